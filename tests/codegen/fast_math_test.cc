// The generated kernels' fast f32 math (codegen::EmitOptions::exact_math = false): accuracy in
// ulp against the correctly rounded double result over dense sweeps, special values (NaN, +-inf,
// +-0, overflow, underflow, domain errors), and that the element loops vectorise. Everything goes
// through the real JIT path (runtime::NewCompiledBackend with flags::fast_math on). The bounds are
// the table in docs/compiler.md ("Fast math"); the measured maxima are printed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../runtime/runtime_test_util.h"
#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/emit_cpp.h"
#include "backends/cpu/jit.h"
#include "codegen/fusion.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "runtime/backend.h"

namespace axle {
namespace {

using ir::Builder;
using ir::Literal;
using ir::OpKind;
using ir::TensorType;
using ir::Value;

using runtime::testutil::FastMathScope;

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// op applied elementwise to xs (dtype t) by a compiled fused kernel.
template <typename T>
std::vector<T> RunUnary(OpKind op, const std::vector<T>& xs, bool fast) {
  const DType t = sizeof(T) == 4 ? DType::kF32 : DType::kF64;
  const int64_t n = static_cast<int64_t>(xs.size());
  ir::Module m("unary");
  Builder b(m.AddFunction("main"));
  b.Return({b.Unary(op, b.Parameter(0, TensorType(t, Shape{n}), "x"))});
  FastMathScope scope(fast);
  auto backend = runtime::NewCompiledBackend(nullptr);
  auto exe = backend->Compile(m);
  std::vector<runtime::BufferPtr> args = {std::make_shared<Literal>(Literal::FromVector(t, Shape{n}, xs))};
  std::vector<runtime::BufferPtr> out = exe->Execute(std::move(args));
  EXPECT_EQ(exe->last_stats().kernels_run, 1);
  const T* p = out[0]->data<T>();
  return std::vector<T>(p, p + n);
}

// sin/cos unchecked (EmitOptions::fast_trig; the compiled backend checks their arguments, Note
// [Checked sin and cos]): run them through EmitCpp and the JIT directly.
std::vector<float> RunTrig(OpKind op, const std::vector<float>& xs) {
  const int64_t n = static_cast<int64_t>(xs.size());
  ir::Module m("trig");
  Builder b(m.AddFunction("main"));
  b.Return({b.Unary(op, b.Parameter(0, TensorType(DType::kF32, Shape{n}), "x"))});
  auto ks = codegen::FuseFunction(*m.entry());
  EXPECT_EQ(ks.size(), 1u);
  const std::string src = codegen::EmitCpp(ks, {.exact_math = false, .fast_trig = true}).source;
  EXPECT_NE(src.find(op == OpKind::kSin ? "ax_fsin(" : "ax_fcos("), std::string::npos);
  auto lib = codegen::CompileAndLoad(src, nullptr);
  using Fn = void (*)(const void* const*, void* const*, int64_t, int64_t);
  auto fn = reinterpret_cast<Fn>(lib->Symbol("k0"));
  std::vector<float> ys(xs.size());
  const void* in[1] = {xs.data()};
  void* out[1] = {ys.data()};
  fn(in, out, 0, n);
  return ys;
}

template <typename T>
std::vector<T> RunFn(OpKind op, const std::vector<T>& xs) {
  if constexpr (sizeof(T) == 4)
    if (op == OpKind::kSin || op == OpKind::kCos) return RunTrig(op, xs);
  return RunUnary<T>(op, xs, /*fast=*/true);
}

// |got - want| in units of the ulp of the float nearest to want (subnormal ulp 2^-149 at the
// bottom); infinities and NaN must match exactly (else a huge error).
double UlpError(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : 1e30;
  const float w = static_cast<float>(want);
  if (std::isinf(w) || std::isinf(got)) return w == got ? 0 : 1e30;
  int e = 0;
  std::frexp(std::fabs(static_cast<double>(w)), &e);
  const double ulp = w == 0 ? std::ldexp(1.0, -149) : std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

struct Fn {
  const char* name;
  OpKind op;
  std::function<double(double)> ref;
  float lo, hi;    // the dense linear sweep
  double max_ulp;  // the documented bound (codegen::FastMathUlpBound)
  double max_abs = INFINITY;  // the bound holds for |x| <= max_abs (sin/cos: the reduction's range)
};

double Logistic(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

const std::vector<Fn>& Functions() {
  static const std::vector<Fn> fns = {
      {"exp", OpKind::kExp, [](double x) { return std::exp(x); }, -104.f, 89.f, codegen::FastMathUlpBound(OpKind::kExp)},
      {"log", OpKind::kLog, [](double x) { return std::log(x); }, 0.f, 16.f, codegen::FastMathUlpBound(OpKind::kLog)},
      {"log1p", OpKind::kLog1p, [](double x) { return std::log1p(x); }, -1.f, 16.f, codegen::FastMathUlpBound(OpKind::kLog1p)},
      {"tanh", OpKind::kTanh, [](double x) { return std::tanh(x); }, -10.f, 10.f, codegen::FastMathUlpBound(OpKind::kTanh)},
      {"logistic", OpKind::kLogistic, Logistic, -105.f, 20.f, codegen::FastMathUlpBound(OpKind::kLogistic)},
      {"erf", OpKind::kErf, [](double x) { return std::erf(x); }, -5.f, 5.f, codegen::FastMathUlpBound(OpKind::kErf)},
      {"sin", OpKind::kSin, [](double x) { return std::sin(x); }, -1e4f, 1e4f, codegen::FastMathUlpBound(OpKind::kSin), 2e8},
      {"cos", OpKind::kCos, [](double x) { return std::cos(x); }, -1e4f, 1e4f, codegen::FastMathUlpBound(OpKind::kCos), 2e8},
  };
  return fns;
}

// ~1e6 inputs: a dense linear sweep of [lo, hi] plus every 4096th f32 bit pattern of both signs
// (all binades, subnormals, infinities and NaNs included), plus a dense sweep near zero.
std::vector<float> Inputs(const Fn& f) {
  std::vector<float> xs;
  const int kLinear = 600000;
  for (int i = 0; i <= kLinear; ++i) xs.push_back(f.lo + (f.hi - f.lo) * static_cast<float>(i) / kLinear);
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4096 * 3 + 1) xs.push_back(Bits(static_cast<uint32_t>(b)));
  for (int i = -100000; i <= 100000; ++i) xs.push_back(static_cast<float>(i) * 1e-7f);
  return xs;
}

TEST(FastMathTest, AccuracyWithinTheDocumentedUlp) {
  for (const Fn& f : Functions()) {
    const std::vector<float> xs = Inputs(f);
    const std::vector<float> ys = RunFn<float>(f.op, xs);
    double worst = 0, worst_lin = 0;
    float at = 0;
    int64_t beyond = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double e = UlpError(ys[i], f.ref(static_cast<double>(xs[i])));
      if (std::fabs(xs[i]) > f.max_abs) {
        // Outside the reduction's range: finite in, a value in [-1, 1] out.
        if (std::isfinite(xs[i])) EXPECT_LE(std::fabs(ys[i]), 1.0f) << f.name << "(" << xs[i] << ")";
        ++beyond;
        continue;
      }
      if (e > worst) {
        worst = e;
        at = xs[i];
      }
      if (xs[i] >= f.lo && xs[i] <= f.hi) worst_lin = std::max(worst_lin, e);
    }
    std::printf("[fast math] %-8s %zu inputs: max %.3f ulp (at %a = %g); in [%g, %g]: %.3f ulp; "
                "%lld beyond |x| > %g\n", f.name, xs.size(), worst, at, at, f.lo, f.hi, worst_lin,
                static_cast<long long>(beyond), f.max_abs);
    EXPECT_LE(worst, f.max_ulp) << f.name << " at " << at;
  }
}

TEST(FastMathTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {0.f, -0.f, inf, -inf, nan, -nan, 89.f, 88.8f, 88.72f, -88.f, -87.5f,
                                 -103.f, -103.5f, -103.97f, -103.98f, -104.f, -110.f, -1e4f, 1e4f, 1.f,
                                 -1.f, -2.f, 1e-45f, -1e-45f, 1.17549435e-38f, 20.f, -20.f, 9.5f, 4.f, -4.f, 3.9f, 1e-30f};
  std::map<OpKind, std::vector<float>> results;
  for (const Fn& f : Functions()) {
    const std::vector<float>& ys = results[f.op] = RunFn<float>(f.op, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = f.ref(static_cast<double>(xs[i]));
      if (std::fabs(xs[i]) > f.max_abs && std::isfinite(xs[i])) continue;
      EXPECT_LE(UlpError(ys[i], want), f.max_ulp) << f.name << "(" << xs[i] << ") = " << ys[i] << ", want " << want;
      // Signed zeros as the C library has them (exp(-inf) = +0, tanh(-0) = -0, ...).
      if (static_cast<float>(want) == 0 && ys[i] == 0)
        EXPECT_EQ(std::signbit(static_cast<float>(want)), std::signbit(ys[i])) << f.name << "(" << xs[i] << ")";
    }
  }
  // The headline cases, spelled out.
  auto one = [&](OpKind op, float x) {
    for (size_t i = 0; i < xs.size(); ++i)
      if (std::memcmp(&xs[i], &x, 4) == 0) return results.at(op)[i];
    ADD_FAILURE() << x << " is not among the inputs";
    return 0.f;
  };
  EXPECT_EQ(one(OpKind::kExp, 89.f), inf);
  EXPECT_EQ(one(OpKind::kExp, -110.f), 0.f);
  EXPECT_EQ(one(OpKind::kExp, -inf), 0.f);  // computed as 0, not through subnormals
  EXPECT_GT(one(OpKind::kExp, -103.5f), 0.f);  // a subnormal result
  EXPECT_EQ(one(OpKind::kLog, 0.f), -inf);
  EXPECT_EQ(one(OpKind::kLog, -0.f), -inf);
  EXPECT_TRUE(std::isnan(one(OpKind::kLog, -1.f)));
  EXPECT_EQ(one(OpKind::kLog1p, -1.f), -inf);
  EXPECT_TRUE(std::isnan(one(OpKind::kLog1p, -2.f)));
  EXPECT_EQ(one(OpKind::kTanh, 20.f), 1.f);
  EXPECT_EQ(one(OpKind::kTanh, -inf), -1.f);
  EXPECT_EQ(one(OpKind::kErf, inf), 1.f);
  EXPECT_EQ(one(OpKind::kLogistic, -inf), 0.f);
  EXPECT_TRUE(std::isnan(one(OpKind::kErf, nan)));
  EXPECT_TRUE(std::isnan(one(OpKind::kSin, inf)));
  EXPECT_TRUE(std::isnan(one(OpKind::kCos, -inf)));
  EXPECT_EQ(one(OpKind::kCos, 0.f), 1.f);
  EXPECT_TRUE(std::signbit(one(OpKind::kSin, -0.f)));
}

// Note [Checked sin and cos] (emit_cpp.cc): the compiled backend's fast mode runs f32 sin / cos as
// ax_fsin / ax_fcos where |x| <= 2e8 (bitwise the unchecked fast functions) and recomputes the
// elements with a farther or NaN argument with the C library's (bitwise std::sin / std::cos), at
// the start, middle and end of the range, in a vectorised run and its tail. Such a kernel has no
// in-place outputs (it reads its inputs again after storing).
TEST(FastMathTest, CheckedSinCosAreExactBeyondTheReductionRange) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs;
  for (int i = 0; i < 1001; ++i) xs.push_back(static_cast<float>(std::sin(i * 0.7) * 50.0));
  const std::map<size_t, float> far = {{0, 3.0e8f}, {1, -1.0e20f}, {500, 3.4e38f}, {501, inf}, {502, -inf},
                                       {503, nan}, {998, 2.0000002e8f}, {1000, -7.5e9f}};
  for (const auto& [i, x] : far) xs[i] = x;
  xs[700] = 2.0e8f;  // the last argument the fast path takes
  for (OpKind op : {OpKind::kSin, OpKind::kCos}) {
    const std::vector<float> got = RunUnary<float>(op, xs, /*fast=*/true);
    const std::vector<float> fast = RunTrig(op, xs);  // unchecked ax_fsin / ax_fcos
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = far.count(i) ? (op == OpKind::kSin ? std::sin(xs[i]) : std::cos(xs[i])) : fast[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
      } else {
        EXPECT_EQ(std::memcmp(&want, &got[i], 4), 0) << "op " << static_cast<int>(op) << " at " << xs[i]
                                                    << ": " << got[i] << " want " << want;
      }
    }
    ir::Module m("trig");
    Builder b(m.AddFunction("main"));
    b.Return({b.Unary(op, b.Parameter(0, TensorType(DType::kF32, Shape{1001}), "x"))});
    const auto ks = codegen::FuseFunction(*m.entry());
    const std::string src = codegen::EmitCpp(ks, {.exact_math = false}).source;
    EXPECT_NE(src.find(op == OpKind::kSin ? "ax_fsin(" : "ax_fcos("), std::string::npos) << src;
    EXPECT_NE(src.find(op == OpKind::kSin ? "std::sin(" : "std::cos("), std::string::npos) << src;
    EXPECT_EQ(codegen::InputsReadAtIndex(ks[0]), std::vector<bool>{false});
  }
}

// f64 keeps the C library in fast mode: bitwise equal to std::.
TEST(FastMathTest, F64StaysExact) {
  std::vector<double> xs;
  for (int i = -2000; i <= 2000; ++i) xs.push_back(i * 0.01);
  for (OpKind op : {OpKind::kExp, OpKind::kTanh, OpKind::kErf, OpKind::kLog1p}) {
    const std::vector<double> ys = RunUnary<double>(op, xs, /*fast=*/true);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i];
      const double want = op == OpKind::kExp ? std::exp(x) : op == OpKind::kTanh ? std::tanh(x)
                          : op == OpKind::kErf ? std::erf(x) : std::log1p(x);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(ys[i]));
      } else {
        ASSERT_EQ(want, ys[i]) << "op " << static_cast<int>(op) << " at " << x;
      }
    }
  }
}

// Runs the JIT compiler on `source` with JitFlags() plus -fopt-info-vec-optimized and returns the
// set of source lines GCC reports "loop vectorized" for (empty with a compiler that is not GCC).
std::set<int> VectorizedLines(const std::string& source, std::string* log_out) {
  std::string t = std::filesystem::temp_directory_path().string() + "/axle-vec-XXXXXX";
  const std::string dir = mkdtemp(t.data());
  const std::string src = dir + "/kernels.cc", log = dir + "/vec.log";
  std::ofstream(src) << source;
  std::string cmd = "'" + codegen::JitCompiler() + "'";
  for (const std::string& f : codegen::JitFlags()) cmd += " " + f;
  cmd += " -fopt-info-vec-optimized -o " + dir + "/k.so " + src + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream ss;
  ss << std::ifstream(log).rdbuf();
  *log_out = ss.str();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(rc, 0) << *log_out;
  std::set<int> lines;
  std::istringstream in(*log_out);
  for (std::string l; std::getline(in, l);) {
    const size_t p = l.find("kernels.cc:");
    if (p == std::string::npos || l.find("loop vectorized") == std::string::npos) continue;
    lines.insert(std::atoi(l.c_str() + p + 11));
  }
  return lines;
}

// Every fused element loop of a fast-math module with each approximated function, sqrt
// (vectorised thanks to -fno-math-errno), a gelu, relu and clamp is vectorised by GCC. (-fno-trapping-math
// is needed too: GCC otherwise threads the clamps' selects into paths with constant-folded
// overflowing products it will not if-convert.)
TEST(FastMathTest, LoopsVectorise) {
  const std::string cxx = codegen::JitCompiler();
  if (cxx.find("g++") == std::string::npos && cxx.find("/c++") == std::string::npos && cxx != "c++")
    GTEST_SKIP() << "not GCC: " << cxx;
  ir::Module m("vec");
  Builder b(m.AddFunction("main"));
  // A parameter of its own for each loop: results that read one value would share a kernel
  // (Note [Results beside their siblings]), and each op's loop is checked alone.
  int64_t index = 0;
  auto param = [&] { return b.Parameter(index++, TensorType(DType::kF32, Shape{1024})); };
  std::vector<Value*> rs;
  for (OpKind op : {OpKind::kExp, OpKind::kLog, OpKind::kLog1p, OpKind::kTanh, OpKind::kLogistic,
                    OpKind::kErf, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kSin, OpKind::kCos})
    rs.push_back(b.Unary(op, param()));
  Value* x = param();
  // gelu-tanh: 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))), constants as broadcast scalars.
  auto c = [&](double v) { return b.BroadcastInDim(b.Scalar(DType::kF32, v), Shape{1024}, {}); };
  Value* inner = b.Mul(c(0.7978845608028654), b.Add(x, b.Mul(c(0.044715), b.Mul(b.Mul(x, x), x))));
  rs.push_back(b.Mul(b.Mul(c(0.5), x), b.Add(c(1.0), b.Unary(OpKind::kTanh, inner))));
  // relu and a clamp with scalar bounds (max/min are select-based, exact in both modes).
  rs.push_back(b.Max(param(), c(0.0)));
  rs.push_back(b.Build1(OpKind::kClamp, {b.Scalar(DType::kF32, -1.0), param(), b.Scalar(DType::kF32, 1.0)}));
  b.Return(rs);
  auto ks = codegen::FuseFunction(*m.entry());
  const std::string src = codegen::EmitCpp(ks, {.exact_math = false, .fast_trig = true}).source;
  std::string log;
  const std::set<int> vec = VectorizedLines(src, &log);
  if (log.find("unrecognized") != std::string::npos) GTEST_SKIP() << log;
  int loops = 0, line = 1;
  for (size_t p = 0; p < src.size(); ++p) {
    if (src.compare(p, 22, "  for (int64_t i = beg") == 0) {
      ++loops;
      EXPECT_TRUE(vec.count(line)) << "loop at line " << line << " not vectorised\n" << log;
    }
    if (src[p] == '\n') ++line;
  }
  EXPECT_EQ(loops, 13);
}

}  // namespace
}  // namespace axle
