// The optimizing compiler's first slice: fusion structure, generated source, the "compiled"
// backend against the interpreter (random programs bit for bit, an MLP training step), the disk
// cache of compiled kernels and compiler failures.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <climits>
#include <map>

#include <fmt/format.h>

#include "../runtime/runtime_test_util.h"
#include "autodiff/vjp.h"
#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/emit_cpp.h"
#include "backends/cpu/jit.h"
#include "backends/registry.h"
#include "codegen/fusion.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "random_ops.h"
#include "runtime/disk_cache.h"
#include "runtime/thread_pool.h"
#include "testing/models.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using ir::Builder;
using ir::Literal;
using ir::OpKind;
using ir::ReduceKind;
using ir::TensorType;
using ir::Value;
using runtime::BufferPtr;
using runtime::testutil::Buffers;
using runtime::testutil::FastMathScope;
using runtime::testutil::RandomLiteral;

TensorType F32(Shape s) { return TensorType(DType::kF32, std::move(s)); }

// The process-wide "compiled" backend caches in DiskCache::Default(): point it at a temporary
// directory (before anything reads the flag), removed at exit.
class CacheDirEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string t = std::filesystem::temp_directory_path().string() + "/axle-cg-cache-XXXXXX";
    dir_ = mkdtemp(t.data());
    flags::set_cache_dir(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

 private:
  std::string dir_;
};
[[maybe_unused]] ::testing::Environment* const kCacheEnv =
    ::testing::AddGlobalTestEnvironment(new CacheDirEnvironment);

int CountFused(const std::vector<codegen::Kernel>& ks) {
  int n = 0;
  for (const auto& k : ks) n += k.fused;
  return n;
}
// Fused kernels that are reductions with a prologue (a loop over outputs, not over i).
int CountReductions(const std::vector<codegen::Kernel>& ks) {
  int n = 0;
  for (const auto& k : ks) n += k.reduce != nullptr;
  return n;
}

// A scoped temporary directory.
struct TempDir {
  std::string path;
  TempDir() {
    std::string t = std::filesystem::temp_directory_path().string() + "/axle-cg-test-XXXXXX";
    path = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};


// gelu (tanh approximation) of x: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Value* GeluTanh(Builder& b, Value* x) {
  const Shape s = x->shape();
  auto c = [&](double v) { return b.BroadcastInDim(b.Scalar(x->dtype(), v), s, {}); };
  Value* x3 = b.Mul(b.Mul(x, x), x);
  Value* inner = b.Mul(c(0.7978845608028654), b.Add(x, b.Mul(c(0.044715), x3)));
  return b.Mul(b.Mul(c(0.5), x), b.Add(c(1.0), b.Unary(OpKind::kTanh, inner)));
}

// Layer norm over the last dim of x [rows, cols] with gain and bias [cols].
Value* LayerNorm(Builder& b, Value* x, Value* g, Value* beta) {
  const int64_t rows = x->type().shape.dim(0), cols = x->type().shape.dim(1);
  const Shape s{rows, cols};
  Value* n = b.Scalar(DType::kF32, static_cast<double>(cols));
  Value* mean = b.Div(b.Reduce(x, ReduceKind::kSum, {1}), b.BroadcastInDim(n, Shape{rows}, {}));
  Value* xc = b.Sub(x, b.BroadcastInDim(mean, s, {0}));
  Value* var = b.Div(b.Reduce(b.Mul(xc, xc), ReduceKind::kSum, {1}), b.BroadcastInDim(n, Shape{rows}, {}));
  Value* eps = b.BroadcastInDim(b.Scalar(DType::kF32, 1e-5), Shape{rows}, {});
  Value* inv = b.Unary(OpKind::kRsqrt, b.Add(var, eps));
  Value* y = b.Mul(xc, b.BroadcastInDim(inv, s, {0}));
  return b.Add(b.Mul(y, b.BroadcastInDim(g, s, {1})), b.BroadcastInDim(beta, s, {1}));
}

void BuildLayerNorm(ir::Module& m, int64_t rows, int64_t cols) {
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({rows, cols}), "x");
  Value* g = b.Parameter(1, F32({cols}), "gain");
  Value* beta = b.Parameter(2, F32({cols}), "bias");
  b.Return({LayerNorm(b, x, g, beta)});
}

// docs/examples/layer_norm_backward.axir, the worked example of docs/compiler.md: what autodiff
// makes of layer norm under an upstream gradient dy (loss = sum(layer_norm(x) * dy); the module
// returns the loss, dx, dgain and dbias). The test keeps the file current
// (AXLE_UPDATE_EXAMPLES=1 rewrites it) and pins its kernel count.
std::unique_ptr<ir::Module> LayerNormBackward(int64_t rows, int64_t cols) {
  ir::Module m("layer_norm_backward");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({rows, cols}), "x");
  Value* g = b.Parameter(1, F32({cols}), "gain");
  Value* beta = b.Parameter(2, F32({cols}), "bias");
  Value* dy = b.Parameter(3, F32({rows, cols}), "dy");
  b.Return({b.Reduce(b.Mul(LayerNorm(b, x, g, beta), dy), ReduceKind::kSum, {0, 1})});
  return autodiff::GradModule(m, 0, {0, 1, 2});
}

std::vector<codegen::Kernel> FuseOptimized(ir::Module& m) {
  passes::RunDefaultPipeline(m);
  return codegen::FuseFunction(*m.entry());
}

TEST(FusionTest, GeluTanhIsOneKernel) {
  ir::Module m("gelu");
  Builder b(m.AddFunction("main"));
  b.Return({GeluTanh(b, b.Parameter(0, F32({8, 16}), "x"))});
  auto ks = FuseOptimized(m);
  EXPECT_EQ(ks.size(), 1u) << codegen::DescribeKernels(ks);
  EXPECT_TRUE(ks[0].fused);
  EXPECT_EQ(ks[0].num_elements, 128);
  EXPECT_EQ(ks[0].outputs.size(), 1u);
}

void ExpectSame(const ir::Module& m, const std::vector<Literal>& args, const std::string& what);

// Note [Recomputing cheap values]: in a GELU's forward and backward, every intermediate of the
// forward (x + bias, x^3, tanh(...), ...) is needed by the backward too. The cheap ones are not
// written: the backward recomputes them from x and the bias. The tanh is not cheap: the forward
// kernel (the loss's prologue) writes it, and the backward reads it instead of computing it again.
TEST(FusionTest, GeluBackwardReadsTheTanhAndRecomputesTheRest) {
  const int64_t R = 64, C = 256;
  ir::Module m("gelu_step");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({R, C}), "x");
  Value* bias = b.Parameter(1, F32({C}), "bias");
  Value* dy = b.Parameter(2, F32({R, C}), "dy");
  Value* h = b.Add(x, b.BroadcastInDim(bias, Shape{R, C}, {1}));
  b.Return({b.Reduce(b.Mul(GeluTanh(b, h), dy), ReduceKind::kSum, {0, 1})});
  std::unique_ptr<ir::Module> g = autodiff::GradModule(m, 0, {0, 1});
  const std::vector<codegen::Kernel> ks = FuseOptimized(*g);
  ASSERT_EQ(ks.size(), 2u) << codegen::DescribeKernels(ks);  // the loss with its prologue; the backward
  std::vector<const Value*> full_outputs;
  int tanh_kernels = 0;
  for (const codegen::Kernel& k : ks) {
    for (const Value* v : k.outputs)
      if (v->shape().NumElements() == R * C) full_outputs.push_back(v);
    tanh_kernels += std::any_of(k.nodes.begin(), k.nodes.end(), [](const ir::Node* n) { return n->op() == OpKind::kTanh; });
  }
  ASSERT_EQ(full_outputs.size(), 2u) << codegen::DescribeKernels(ks);  // the tanh and dx
  EXPECT_EQ(full_outputs[0]->node()->op(), OpKind::kTanh) << codegen::DescribeKernels(ks);
  EXPECT_EQ(tanh_kernels, 1) << codegen::DescribeKernels(ks);
  EXPECT_TRUE(std::find(ks[1].inputs.begin(), ks[1].inputs.end(), full_outputs[0]) != ks[1].inputs.end())
      << codegen::DescribeKernels(ks);
  ExpectSame(*g, {RandomLiteral(DType::kF32, {R, C}, 1), RandomLiteral(DType::kF32, {C}, 2),
                  RandomLiteral(DType::kF32, {R, C}, 3)}, "gelu step");
}

// Found by the compiler fuzzer (program 201527): %1 = logistic (a transcendental, not recomputed)
// joins the kernel of %h (multi-output fusion), and its only user, sign, is recomputed in both
// kernels. The later kernel's sign reads %1, so %1 is an output although all its users are
// members of its own kernel. (%h comes last: before %7, it would now join %7's kernel, Note
// [Results beside their siblings], and there would be one kernel.)
TEST(FusionTest, AValueReadByARecomputedUserElsewhereIsWritten) {
  std::unique_ptr<ir::Module> m = ir::ParseModule(R"(module @m {
  func @main {
    %i = iota() {dim=0} : f64[4]
    %c = cos(%i) : f64[4]
    %1 = logistic(%c) : f64[4]
    %2 = sqrt(%c) : f64[4]
    %3 = log(%2) : f64[4]
    %s = sign(%1) : f64[4]
    %t = rsqrt(%s) : f64[4]
    %4 = sub(%t, %3) : f64[4]
    %5 = log(%4) : f64[4]
    %7 = logistic(%5) : f64[4]
    %h = floor(%t) : f64[4]
    return %7, %h
  }
})");
  const std::vector<codegen::Kernel> ks = codegen::FuseFunction(*m->entry());
  const Value* logistic = nullptr;
  for (const auto& n : m->entry()->nodes())
    if (n->op() == OpKind::kLogistic && logistic == nullptr) logistic = n->result();
  int writers = 0, readers = 0;
  for (const codegen::Kernel& k : ks) {
    writers += std::count(k.outputs.begin(), k.outputs.end(), logistic);
    readers += std::count(k.inputs.begin(), k.inputs.end(), logistic);
  }
  EXPECT_EQ(writers, 1) << codegen::DescribeKernels(ks);
  EXPECT_EQ(readers, 1) << codegen::DescribeKernels(ks);
  ExpectSame(*m, {}, "recomputed user");
}

TEST(FusionTest, LayerNormIsReducesPlusFusedElementwise) {
  ir::Module m("layer_norm");
  BuildLayerNorm(m, 4, 8);
  auto ks = FuseOptimized(m);
  // The mean's reduce reads x (a parameter: an empty prologue); x - mean and its square are the
  // prologue of the variance's reduce, and the normalize/scale/shift epilogue computes x - mean
  // again (Note [Recomputing cheap values]) instead of reading it back. Over [4]: the mean and
  // the rsqrt.
  ASSERT_EQ(ks.size(), 5u) << codegen::DescribeKernels(ks);
  ASSERT_TRUE(ks[0].fused);
  ASSERT_NE(ks[0].reduce, nullptr);
  EXPECT_EQ(ks[0].nodes, std::vector<const ir::Node*>{ks[0].reduce});  // no prologue
  EXPECT_EQ(ks[0].inputs, std::vector<const ir::Value*>{ks[0].reduce->operand(0)});
  ASSERT_EQ(CountReductions(ks), 2) << codegen::DescribeKernels(ks);
  const codegen::Kernel& red = ks[2];
  ASSERT_NE(red.reduce, nullptr) << codegen::DescribeKernels(ks);
  EXPECT_EQ(red.num_elements, 4);
  EXPECT_EQ(red.reduced, 8);
  EXPECT_FALSE(red.column);
  EXPECT_EQ(red.nodes.back(), red.reduce);
  ASSERT_EQ(red.outputs.size(), 1u);  // the variance's sum; x - mean is not written
  EXPECT_EQ(red.outputs[0], red.reduce->result());
  EXPECT_EQ(codegen::InputsReadAtIndex(red), std::vector<bool>(red.inputs.size(), false));
  int full = 0, rows = 0;
  for (const auto& k : ks) {
    if (!k.fused || k.reduce) continue;
    full += k.num_elements == 32;
    rows += k.num_elements == 4;
    if (k.num_elements == 32)  // the epilogue recomputes x - mean from x, a parameter
      EXPECT_TRUE(std::any_of(k.nodes.begin(), k.nodes.end(), [](const ir::Node* n) { return n->op() == OpKind::kSub; }))
          << codegen::DescribeKernels(ks);
  }
  EXPECT_EQ(full, 1) << codegen::DescribeKernels(ks);
  EXPECT_EQ(rows, 2) << codegen::DescribeKernels(ks);
}

// Which reduces take a prologue: row (innermost block) and column (outermost block) reductions,
// dims of size 1 ignored; a middle block stays a reduce node; an operand that is a parameter is
// read by a reduction kernel with no prologue.
TEST(FusionTest, ReductionPrologueShapes) {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    bool fused;
    bool column;
    int64_t reduced;
  };
  const std::vector<Case> cases = {
      {Shape{4, 8}, {1}, true, false, 8},        {Shape{4, 8}, {0}, true, true, 4},
      {Shape{4, 8}, {0, 1}, true, false, 32},    {Shape{2, 3, 5}, {1, 2}, true, false, 15},
      {Shape{2, 3, 5}, {0, 1}, true, true, 6},   {Shape{2, 3, 5}, {1}, false, false, 0},
      {Shape{4, 1, 8}, {0, 1}, true, true, 4},   {Shape{1, 4, 8}, {0, 2}, true, false, 8},
      {Shape{2, 3, 5}, {0, 2}, false, false, 0},
  };
  for (const Case& c : cases) {
    ir::Module m("r");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, F32(c.shape), "x");
    b.Return({b.Reduce(b.Unary(OpKind::kExp, x), ReduceKind::kSum, c.dims)});
    auto ks = codegen::FuseFunction(*m.entry());
    const std::string what = c.shape.ToString() + " " + codegen::DescribeKernels(ks);
    if (!c.fused) {
      EXPECT_EQ(ks.size(), 2u) << what;
      EXPECT_EQ(CountReductions(ks), 0) << what;
      continue;
    }
    ASSERT_EQ(ks.size(), 1u) << what;
    ASSERT_NE(ks[0].reduce, nullptr) << what;
    EXPECT_EQ(ks[0].column, c.column) << what;
    EXPECT_EQ(ks[0].reduced, c.reduced) << what;
    EXPECT_EQ(ks[0].num_elements, c.shape.NumElements() / c.reduced) << what;
    EXPECT_EQ(codegen::DescribeKernels(ks), fmt::format("1 kernels: reduce{{exp}}[{}]", ks[0].num_elements));
  }
  // No elementwise producer: a reduction kernel with an empty prologue for row and column
  // reductions, the executor's reduce kernel for a middle block.
  for (const Case& c : cases) {
    ir::Module m("plain");
    Builder b(m.AddFunction("main"));
    b.Return({b.Reduce(b.Parameter(0, F32(c.shape), "x"), ReduceKind::kSum, c.dims)});
    auto ks = codegen::FuseFunction(*m.entry());
    const std::string what = c.shape.ToString() + " " + codegen::DescribeKernels(ks);
    ASSERT_EQ(ks.size(), 1u) << what;
    EXPECT_EQ(ks[0].fused, c.fused) << what;
    if (!c.fused) continue;
    ASSERT_NE(ks[0].reduce, nullptr) << what;
    EXPECT_EQ(ks[0].column, c.column) << what;
    EXPECT_EQ(ks[0].reduced, c.reduced) << what;
    EXPECT_EQ(codegen::DescribeKernels(ks), fmt::format("1 kernels: reduce[{}]", ks[0].num_elements));
  }
}

TEST(FusionTest, MlpIsDotsPlusFusedEpilogues) {
  ir::Module m("mlp");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({4, 8}), "x");
  Value* w1 = b.Parameter(1, F32({8, 16}), "w1");
  Value* b1 = b.Parameter(2, F32({16}), "b1");
  Value* w2 = b.Parameter(3, F32({16, 2}), "w2");
  Value* h = b.Unary(OpKind::kTanh, b.Add(b.MatMul(x, w1), b.BroadcastInDim(b1, Shape{4, 16}, {1})));
  b.Return({b.Unary(OpKind::kExp, b.MatMul(h, w2))});
  auto ks = FuseOptimized(m);
  // dot, fused{broadcast, add, tanh}, dot, fused{exp}.
  ASSERT_EQ(ks.size(), 4u) << codegen::DescribeKernels(ks);
  EXPECT_FALSE(ks[0].fused);
  EXPECT_TRUE(ks[1].fused);
  EXPECT_EQ(ks[1].nodes.size(), 3u) << codegen::DescribeKernels(ks);
  EXPECT_FALSE(ks[2].fused);
  EXPECT_TRUE(ks[3].fused);
}

TEST(FusionTest, SharedProducerIsMaterialized) {
  ir::Module m("shared");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({16}), "x");
  Value* e = b.Unary(OpKind::kExp, x);
  Value* s = b.Reduce(e, ReduceKind::kSum, {0});
  b.Return({b.Unary(OpKind::kLog, e), s});
  auto ks = FuseOptimized(m);
  // exp is used by a fused log and by reduce: it is the reduce's prologue and an extra output of
  // that kernel (written at the operand index), which the log's kernel reads.
  ASSERT_EQ(ks.size(), 2u) << codegen::DescribeKernels(ks);
  EXPECT_EQ(codegen::DescribeKernels(ks), "2 kernels: reduce{exp}[1], fused{log}[16]");
  ASSERT_NE(ks[0].reduce, nullptr);
  ASSERT_EQ(ks[0].outputs.size(), 2u);
  EXPECT_EQ(ks[0].outputs[1], e);
  EXPECT_EQ(ks[1].inputs, std::vector<const Value*>{e});
}

TEST(EmitTest, OneLoopPerFusedKernel) {
  ir::Module m("layer_norm");
  BuildLayerNorm(m, 4, 8);
  auto ks = FuseOptimized(m);
  codegen::EmittedModule em = codegen::EmitCpp(ks);
  size_t loops = 0;  // flat loops, or loops over rows
  for (const char* head : {"for (int64_t i = begin", "for (int64_t r = begin"})
    for (size_t p = em.source.find(head); p != std::string::npos; p = em.source.find(head, p + 1)) ++loops;
  EXPECT_EQ(loops, static_cast<size_t>(CountFused(ks) - CountReductions(ks))) << em.source;
  size_t reductions = 0;
  for (size_t p = em.source.find("for (int64_t o = begin"); p != std::string::npos;
       p = em.source.find("for (int64_t o = begin", p + 1))
    ++reductions;
  EXPECT_EQ(reductions, static_cast<size_t>(CountReductions(ks))) << em.source;
  EXPECT_EQ(em.source.find("#include <vector>"), std::string::npos);
  EXPECT_NE(em.source.find("#include <cmath>"), std::string::npos);
  EXPECT_NE(em.source.find("extern \"C\" void k"), std::string::npos);
  if (std::getenv("AXLE_PRINT_EXAMPLE")) {
    std::printf("%s\n%s\n%s\n", ir::PrintModule(m).c_str(), codegen::DescribeKernels(ks).c_str(),
                em.source.c_str());
  }
}

// The generated source carries src/ir/scalar_functions.inc as it is on disk, the text
// ir/scalar_ops.h compiles for the interpreter: one definition of max/min, the integer ops and the
// conversions (an embedded copy that went stale would fail here before it failed a sample).
TEST(EmitTest, ThePreludeIsTheInterpretersScalarFunctions) {
  std::ifstream in(std::string(AXLE_SOURCE_DIR) + "/src/ir/scalar_functions.inc");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_NE(text.str().find("inline T ax_idiv("), std::string::npos);
  ir::Module m("int_ops");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, TensorType(DType::kI32, Shape{16}), "x");
  b.Return({b.Binary(OpKind::kDiv, x, b.Binary(OpKind::kMax, x, x))});
  for (bool exact : {true, false}) {
    const std::string src = codegen::EmitCpp(codegen::FuseFunction(*m.entry()), {.exact_math = exact}).source;
    const size_t at = src.find(text.str());
    EXPECT_NE(at, std::string::npos) << src;
    EXPECT_EQ(src.find("inline T ax_idiv(", at + text.str().size()), std::string::npos);  // once
    EXPECT_NE(src.find("ax_idiv<int32_t>(", at + text.str().size()), std::string::npos) << src;
  }
}

// exact_math = false replaces f32 exp/log/log1p/tanh/logistic/erf with the prelude's
// approximations; f64 keeps std::; exact mode emits no approximation at all.
TEST(EmitTest, FastMathUsesApproximationsForF32Only) {
  ir::Module m("fast");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({16}), "x");
  Value* y = b.Parameter(1, TensorType(DType::kF64, Shape{16}), "y");
  std::vector<Value*> rs;
  for (OpKind op : {OpKind::kExp, OpKind::kLog, OpKind::kLog1p, OpKind::kTanh, OpKind::kLogistic,
                    OpKind::kErf}) {
    rs.push_back(b.Unary(op, x));
    rs.push_back(b.Unary(op, y));
  }
  b.Return(rs);
  auto ks = codegen::FuseFunction(*m.entry());
  const std::string fast = codegen::EmitCpp(ks, {.exact_math = false}).source;
  const std::string exact = codegen::EmitCpp(ks, {.exact_math = true}).source;
  for (const char* f : {"ax_fexp(", "ax_flog(", "ax_flog1p(", "ax_ftanh(", "ax_flogistic(", "ax_ferf("}) {
    EXPECT_NE(fast.find(std::string("= ") + f), std::string::npos) << f << "\n" << fast;
    EXPECT_EQ(exact.find(f), std::string::npos) << f;
  }
  EXPECT_EQ(exact.find("ax_fexp"), std::string::npos);  // no fast prelude in exact mode
  for (const char* f : {"std::exp(", "std::log(", "std::log1p(", "std::tanh(", "std::erf("})
    EXPECT_NE(fast.find(std::string("= ") + f), std::string::npos) << f;  // the f64 kernels
}

// Pointers are not __restrict (an output may alias an input read at i); the loop is ivdep.
TEST(EmitTest, IvdepLoopsWithoutRestrict) {
  ir::Module m("layer_norm");
  BuildLayerNorm(m, 4, 8);
  auto ks = FuseOptimized(m);
  const std::string src = codegen::EmitCpp(ks).source;
  EXPECT_EQ(src.find("__restrict"), std::string::npos) << src;
  size_t ivdep = 0;  // on the flat loop, or on the loop within a row
  for (const char* head : {"#pragma GCC ivdep\n  for (int64_t i = begin", "#pragma GCC ivdep\n    for (int64_t j = j0"})
    for (size_t p = src.find(head); p != std::string::npos; p = src.find(head, p + 1)) ++ivdep;
  EXPECT_EQ(ivdep, static_cast<size_t>(CountFused(ks) - CountReductions(ks))) << src;
}

// A broadcast along rows is read at the column (a vector load), a per-row value at the row: the
// loop runs over rows of the last dimension and no index is divided or taken modulo.
TEST(EmitTest, BroadcastsInRowLoopsNeedNoDivision) {
  ir::Module m("bias");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({16, 64}), "x");
  Value* bias = b.Parameter(1, F32({64}), "bias");
  Value* scale = b.Parameter(2, F32({16}), "scale");
  Value* y = b.Binary(OpKind::kAdd, x, b.BroadcastInDim(bias, Shape{16, 64}, {1}));
  b.Return({b.Binary(OpKind::kMul, y, b.BroadcastInDim(scale, Shape{16, 64}, {0}))});
  auto ks = FuseOptimized(m);
  ASSERT_EQ(CountFused(ks), 1) << codegen::DescribeKernels(ks);
  const std::string src = codegen::EmitCpp(ks).source;
  EXPECT_NE(src.find("for (int64_t r = begin / 64, j0 = begin % 64;"), std::string::npos) << src;
  EXPECT_NE(src.find("[j];  // broadcast_in_dim"), std::string::npos) << src;  // the bias
  EXPECT_NE(src.find("[r];  // broadcast_in_dim"), std::string::npos) << src;  // the row's scale
  EXPECT_EQ(src.find("(i % "), std::string::npos) << src;
  EXPECT_EQ(src.find("(i / "), std::string::npos) << src;
}

TEST(EmitTest, InputsReadAtIndex) {
  ir::Module m("at_index");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({4, 8}), "x");      // read at i
  Value* row = b.Parameter(1, F32({8}), "row");     // broadcast: read at i % 8
  Value* lo = b.Parameter(2, F32(Shape{}), "lo");   // clamp bound: a scalar read at 0
  Value* w = b.Parameter(3, F32({32}), "w");        // reshape: read at i
  Value* u = b.Parameter(4, F32({1, 8}), "u");      // broadcast [1,8] -> [4,8]: read at i % 8
  Value* t = b.Parameter(5, F32({4, 8}), "t");      // any broadcast of an input counts as not at i
  Value* y = b.Add(x, b.BroadcastInDim(row, Shape{4, 8}, {1}));
  y = b.Build1(OpKind::kClamp, {lo, y, b.Reshape(w, Shape{4, 8})});
  y = b.Mul(y, b.BroadcastInDim(u, Shape{4, 8}, {0, 1}));
  y = b.Add(y, b.BroadcastInDim(t, Shape{4, 8}, {0, 1}));
  y = b.Mul(y, x);
  b.Return({y});
  auto ks = codegen::FuseFunction(*m.entry());
  ASSERT_EQ(CountFused(ks), 1) << codegen::DescribeKernels(ks);
  const codegen::Kernel* k = nullptr;
  for (const auto& kk : ks) if (kk.fused) k = &kk;
  const std::vector<bool> at = codegen::InputsReadAtIndex(*k);
  ASSERT_EQ(at.size(), k->inputs.size());
  std::map<const Value*, bool> got;
  for (size_t j = 0; j < at.size(); ++j) got[k->inputs[j]] = at[j];
  EXPECT_TRUE(got.at(x));
  EXPECT_FALSE(got.at(row));
  EXPECT_FALSE(got.at(lo));
  EXPECT_TRUE(got.at(w));
  EXPECT_FALSE(got.at(u));
  EXPECT_FALSE(got.at(t));
  codegen::EmittedModule em = codegen::EmitCpp(ks);
  for (size_t i = 0; i < ks.size(); ++i)
    EXPECT_EQ(em.inputs_read_at_index[i], ks[i].fused ? codegen::InputsReadAtIndex(ks[i])
                                                      : std::vector<bool>(ks[i].inputs.size(), false));
}

// ----- differential tests ----------------------------------------------------------------------

void ExpectSame(const ir::Module& m, const std::vector<Literal>& args, const std::string& what) {
  FastMathScope exact(false);
  std::vector<BufferPtr> want;
  bool interp_failed = false;
  try {
    want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
  } catch (const Error&) {
    interp_failed = true;
  }
  if (interp_failed) {
    EXPECT_THROW(runtime::GetBackend("compiled").Compile(m)->Execute(Buffers(args)), Error) << what;
    return;
  }
  std::vector<BufferPtr> got = runtime::GetBackend("compiled").Compile(m)->Execute(Buffers(args));
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_TRUE(runtime::testutil::SameBits(*want[i], *got[i]))
        << what << " result " << i << "\nwant " << want[i]->ToString(64) << "\ngot  "
        << got[i]->ToString(64) << "\n" << ir::PrintModule(m);
}

TEST(CompiledBackendTest, GeluAndLayerNormBitwiseEqual) {
  {
    ir::Module m("gelu");
    Builder b(m.AddFunction("main"));
    b.Return({GeluTanh(b, b.Parameter(0, F32({300, 200}), "x"))});  // threaded: 60000 elements
    ExpectSame(m, {RandomLiteral(DType::kF32, {300, 200}, 1)}, "gelu");
  }
  {
    ir::Module m("layer_norm");
    BuildLayerNorm(m, 16, 32);
    ExpectSame(m, {RandomLiteral(DType::kF32, {16, 32}, 2), RandomLiteral(DType::kF32, {32}, 3),
                   RandomLiteral(DType::kF32, {32}, 4)}, "layer_norm");
  }
}

// Reductions with a prologue against the interpreter, bit for bit (exact math): row and column
// reductions of f32 and f64, sum/max/min, an extra output, shapes with dims of size 1, and sizes
// that split the outputs over threads and the column accumulators over several blocks of 512.
TEST(CompiledBackendTest, ReductionWithProloguesBitwiseEqual) {
  struct Case {
    DType t;
    Shape shape;
    std::vector<int64_t> dims;
    ReduceKind kind;
  };
  const std::vector<Case> cases = {
      {DType::kF32, Shape{300, 200}, {1}, ReduceKind::kSum},
      {DType::kF32, Shape{300, 700}, {0}, ReduceKind::kSum},
      {DType::kF64, Shape{64, 96}, {1}, ReduceKind::kSum},
      {DType::kF64, Shape{64, 96}, {0}, ReduceKind::kSum},
      {DType::kF32, Shape{7, 5, 33}, {1, 2}, ReduceKind::kMax},
      {DType::kF32, Shape{7, 5, 33}, {0, 1}, ReduceKind::kMin},
      {DType::kF32, Shape{6, 1, 9}, {0, 1}, ReduceKind::kSum},
      {DType::kF32, Shape{6, 9}, {0, 1}, ReduceKind::kSum},
      {DType::kF32, Shape{2000, 20}, {1}, ReduceKind::kMax},
  };
  int n = 0;
  for (const Case& c : cases) {
    ir::Module m("reduce_prologue");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, TensorType(c.t, c.shape), "x");
    Value* y = b.Parameter(1, TensorType(c.t, c.shape), "y");
    Value* e = b.Mul(b.Unary(OpKind::kExp, x), b.Sub(y, x));
    Value* r = b.Reduce(e, c.kind, c.dims);
    // The second half also returns the prologue's value (an extra output of the same kernel).
    std::vector<Value*> results = {r};
    if (n % 2 == 1) results.push_back(b.Unary(OpKind::kTanh, e));
    b.Return(results);
    const std::string what =
        fmt::format("case {}: {} {}", n++, c.shape.ToString(), codegen::DescribeKernels(FuseOptimized(*m.Clone())));
    EXPECT_EQ(CountReductions(FuseOptimized(*m.Clone())), 1) << what;
    ExpectSame(m, {RandomLiteral(c.t, c.shape, 20 + n), RandomLiteral(c.t, c.shape, 40 + n)}, what);
    if (HasFatalFailure()) return;
    // The same reduce of the parameter itself: a reduction kernel with no prologue.
    ir::Module plain("reduce_plain");
    Builder pb(plain.AddFunction("main"));
    pb.Return({pb.Reduce(pb.Parameter(0, TensorType(c.t, c.shape), "x"), c.kind, c.dims)});
    const std::string pwhat = fmt::format("plain {}: {}", what, codegen::DescribeKernels(FuseOptimized(*plain.Clone())));
    EXPECT_EQ(CountReductions(FuseOptimized(*plain.Clone())), 1) << pwhat;
    ExpectSame(plain, {RandomLiteral(c.t, c.shape, 60 + n)}, pwhat);
    if (HasFatalFailure()) return;
  }
}

// Fast math splits a full reduction of >= 64K elements into 64 row results and their reduction
// (passes/split_reductions.cc), so it runs on every core: max stays bitwise, a sum is within a
// few ulps of the interpreter's one long double sum. Exact math keeps the single reduction.
TEST(CompiledBackendTest, FullReductionsSplitInFastMath) {
  ir::Module m("norms");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({384, 1024}), "x");
  Value* t = b.Transpose(x, {1, 0});  // the gradient norm of a transposed weight
  b.Return({b.Reduce(b.Mul(t, t), ReduceKind::kSum, {0, 1}), b.Reduce(x, ReduceKind::kMax, {0, 1})});
  const std::vector<Literal> args = {RandomLiteral(DType::kF32, {384, 1024}, 7)};
  std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
  for (bool fast : {true, false}) {
    FastMathScope scope(fast);
    auto exe = runtime::GetBackend("compiled").Compile(m);
    std::vector<BufferPtr> got = exe->Execute(Buffers(args));
    const double w = want[0]->GetDouble(0), g = got[0]->GetDouble(0);
    if (fast)
      EXPECT_NEAR(g, w, 4 * std::abs(w) * 0x1p-24) << "sum of squares";
    else
      EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *got[0])) << g << " vs " << w;
    EXPECT_TRUE(runtime::testutil::SameBits(*want[1], *got[1])) << "max, fast " << fast;
    // Two levels in fast math (a [64] row-result reduce after each), one in exact math.
    EXPECT_EQ(exe->last_stats().kernels_run, fast ? 4 : 2) << "fast " << fast;
  }
}

// Note [Column sums by blocks of rows] (backends/cpu/emit_cpp.h): in fast math an f32 column sum of at
// least 2 x 64 rows is cut into blocks of whole rows whose partial sums are added in block order:
// each output within an ulp of the interpreter's (double accumulation, reassociated), the same
// bits whether the blocks ran on the pool or inline, the prologue's own output bitwise. Exact
// math, max and short columns keep one sum per column in row order.
TEST(CompiledBackendTest, ColumnSumsByBlocksOfRowsInFastMath) {
  struct Case {
    Shape shape;
    ReduceKind kind;
    int64_t blocks;  // in fast math
  };
  for (const Case& c : {Case{Shape{600, 300}, ReduceKind::kSum, 8}, Case{Shape{1000, 37}, ReduceKind::kSum, 8},
                        Case{Shape{130, 70}, ReduceKind::kSum, 2}, Case{Shape{127, 40}, ReduceKind::kSum, 1},
                        Case{Shape{600, 300}, ReduceKind::kMax, 1}}) {
    ir::Module m("column_sum");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, TensorType(DType::kF32, c.shape), "x");
    Value* y = b.Parameter(1, TensorType(DType::kF32, c.shape), "y");
    Value* e = b.Mul(b.Add(x, y), b.Sub(y, x));
    b.Return({b.Reduce(e, c.kind, {0}), b.Unary(OpKind::kNeg, e)});
    const std::string what = fmt::format("{} {}", c.shape.ToString(), c.kind == ReduceKind::kSum ? "sum" : "max");
    const std::unique_ptr<ir::Module> optimized = m.Clone();  // the kernels point into it
    const std::vector<codegen::Kernel> ks = FuseOptimized(*optimized);
    ASSERT_EQ(CountReductions(ks), 1) << what;
    for (const codegen::Kernel& k : ks) {
      if (k.reduce == nullptr) continue;
      EXPECT_TRUE(k.column) << what;
      EXPECT_EQ(codegen::ColumnRowBlocks(k, {.exact_math = false}), c.blocks) << what;
      EXPECT_EQ(codegen::ColumnRowBlocks(k, {.exact_math = true}), 1) << what;
    }
    const std::vector<Literal> args = {RandomLiteral(DType::kF32, c.shape, 3), RandomLiteral(DType::kF32, c.shape, 4)};
    std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
    FastMathScope fast(true);
    std::vector<BufferPtr> got = runtime::GetBackend("compiled").Compile(m)->Execute(Buffers(args));
    EXPECT_TRUE(runtime::testutil::SameBits(*want[1], *got[1])) << what;
    if (c.blocks == 1) {
      EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *got[0])) << what;
    } else {
      for (int64_t j = 0; j < want[0]->NumElements(); ++j) {
        const double w = want[0]->GetDouble(j), g = got[0]->GetDouble(j);
        ASSERT_NEAR(g, w, std::abs(w) * 0x1p-23 + 1e-30) << what << ", column " << j;
      }
    }
    // Inline (another thread takes a core: Note [Competing threads]) gives the same bits.
    runtime::ThreadPool::Global().AddCompeting(+1);
    std::vector<BufferPtr> inline_run = runtime::GetBackend("compiled").Compile(m)->Execute(Buffers(args));
    runtime::ThreadPool::Global().AddCompeting(-1);
    EXPECT_TRUE(runtime::testutil::SameBits(*got[0], *inline_run[0])) << what;
  }
}

// Fast math scatters an embedding-style gradient straight into the other gradient
// (passes/scatter_accumulate.cc): no zeros materialized, no add; each element is within a few ulps
// of the interpreter's (reassociated), and exact math keeps the zeros and the add, bitwise.
TEST(CompiledBackendTest, ScatterIntoZerosThenAddAccumulatesInFastMath) {
  ir::Module m("embedding_grad");
  Builder b(m.AddFunction("main"));
  Value* rows = b.Parameter(0, F32({64, 32}), "rows");
  Value* idx = b.Parameter(1, TensorType(DType::kI32, Shape{64}), "idx");
  Value* head = b.Parameter(2, F32({100, 32}), "head");
  Value* zeros = b.BroadcastInDim(b.Scalar(DType::kF32, 0.0), Shape{100, 32}, {});
  Value* s = b.Build1(OpKind::kScatterAdd, {zeros, idx, rows}, ir::GatherAttrs{0, 0}, {F32({100, 32})});
  b.Return({b.Add(head, s)});
  std::vector<int32_t> ids(64);
  for (int i = 0; i < 64; ++i) ids[i] = (i * 37) % 100 % 17;  // repeated rows: real accumulation
  const std::vector<Literal> args = {RandomLiteral(DType::kF32, {64, 32}, 11),
                                     Literal::FromVector(DType::kI32, Shape{64}, ids),
                                     RandomLiteral(DType::kF32, {100, 32}, 12)};
  std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
  for (bool fast : {true, false}) {
    FastMathScope scope(fast);
    auto exe = runtime::GetBackend("compiled").Compile(m);
    std::vector<BufferPtr> got = exe->Execute(Buffers(args));
    if (!fast) {
      EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *got[0]));
    } else {
      for (int64_t i = 0; i < want[0]->NumElements(); ++i) {
        const double w = want[0]->GetDouble(i), g = got[0]->GetDouble(i);
        ASSERT_NEAR(g, w, 1e-5 * std::max(1.0, std::abs(w))) << "element " << i;
      }
    }
    // Fast: one scatter. Exact: the zeros, the scatter and the add.
    EXPECT_EQ(exe->last_stats().kernels_run, fast ? 1 : 3) << "fast " << fast;
  }
}

// Empty reductions (sum: +0, max: -inf, min: +inf) and the max/min rules: a NaN wins, +0 beats
// -0 for max and -0 beats +0 for min, in rows and in columns.
TEST(CompiledBackendTest, ReductionWithPrologueEdgeCases) {
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin}) {
    for (int64_t dim : {0, 1}) {
      ir::Module m("empty");
      Builder b(m.AddFunction("main"));
      const Shape s = dim == 1 ? Shape{4, 0} : Shape{0, 5};
      Value* x = b.Parameter(0, F32(s), "x");
      b.Return({b.Reduce(b.Unary(OpKind::kNeg, x), kind, {dim})});
      ExpectSame(m, {Literal::FromVector<float>(DType::kF32, s, {})}, fmt::format("empty dim {}", dim));
    }
  }
  const float nan = std::nanf(""), inf = INFINITY;
  // Rows of 4: NaN first / last, zeros of both signs in both orders, infinities.
  const std::vector<float> v = {nan, 1.f,  -0.f, 2.f,  3.f,  -0.f, 0.f,  nan,  0.f, -0.f, 0.f,  -0.f,
                                -0.f, 0.f, -0.f, 0.f,  inf,  -inf, 1.f, 2.f,  -inf, -inf, -inf, -inf};
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin}) {
    for (int64_t dim : {0, 1}) {
      // x * ones keeps NaN, -0 and inf (ones is a parameter: no pass can drop the multiply).
      for (const Shape& s : {Shape{6, 4}, Shape{4, 6}}) {
        ir::Module m("signed_zeros");
        Builder b(m.AddFunction("main"));
        Value* x = b.Parameter(0, F32(s), "x");
        Value* ones = b.Parameter(1, F32(s), "ones");
        b.Return({b.Reduce(b.Mul(x, ones), kind, {dim})});
        const std::string what = fmt::format("{} dim {}: {}", s.ToString(), dim,
                                             codegen::DescribeKernels(FuseOptimized(*m.Clone())));
        ASSERT_EQ(CountReductions(FuseOptimized(*m.Clone())), 1) << what;
        ExpectSame(m, {Literal::FromVector<float>(DType::kF32, s, v),
                       Literal::FromVector<float>(DType::kF32, s, std::vector<float>(24, 1.f))}, what);
      }
    }
  }
}

// Fast math reduces rows of >= 16 with 8 max / min lanes (emit_cpp.cc): the same values as the
// in-order interpreter, bit for bit (NaN: any NaN), with NaN, signed zeros and infinities
// anywhere in a row, rows of only zeros, and row lengths with and without a tail.
TEST(CompiledBackendTest, MaxMinLanesInFastMathMatchTheInterpreter) {
  const float nan = std::nanf(""), inf = INFINITY;
  for (int64_t R : {16, 37, 64, 300}) {  // 8, 16, 32 and 32 lanes; a tail for 37 and 300
    const int64_t A = 10;
    std::vector<float> v(static_cast<size_t>(A * R));
    for (int64_t a = 0; a < A; ++a)
      for (int64_t r = 0; r < R; ++r) {
        float& x = v[static_cast<size_t>(a * R + r)];
        x = static_cast<float>(std::sin(0.37 * static_cast<double>(a * R + r)) * 100.0);
        if (a == 1 || a == 2) x = (r % 3 == a) ? 0.f : -0.f;  // only zeros, +0 at some places
        if (a == 3) x = -0.f;                                  // only -0
        if (a == 4 && r == R - 1) x = nan;                     // NaN in the tail / last lane
        if (a == 5 && r == 9) x = nan;                         // NaN in lane 1
        if (a == 6) x = r % 5 == 0 ? -inf : x;                 // infinities among values
        if (a == 7) x = r == R / 2 ? inf : -inf;
        if (a == 8) x = -inf;
        if (a == 9 && r == 21) x = nan;                        // NaN in an upper lane of the fold
      }
    for (ReduceKind kind : {ReduceKind::kMax, ReduceKind::kMin}) {
      ir::Module m("lanes");
      Builder b(m.AddFunction("main"));
      Value* x = b.Parameter(0, F32({A, R}), "x");
      Value* ones = b.Parameter(1, F32({A, R}), "ones");
      b.Return({b.Reduce(b.Mul(x, ones), kind, {1})});
      const std::vector<Literal> args = {Literal::FromVector<float>(DType::kF32, Shape{A, R}, v),
                                         Literal::FromVector<float>(DType::kF32, Shape{A, R},
                                                                    std::vector<float>(v.size(), 1.f))};
      std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
      const std::string src = codegen::EmitCpp(FuseOptimized(*m.Clone()), {.exact_math = false}).source;
      EXPECT_NE(src.find(kind == ReduceKind::kMax ? "lane[k] = ax_max(lane[k]" : "lane[k] = ax_min(lane[k]"),
                std::string::npos) << src;
      const std::string lanes = R >= 64 ? "lane[32]" : R >= 32 ? "lane[16]" : "lane[8]";
      EXPECT_NE(src.find("float " + lanes + ";"), std::string::npos) << "R " << R << ": " << src;
      FastMathScope fast(true);
      auto exe = runtime::GetBackend("compiled").Compile(m);
      std::vector<BufferPtr> got = exe->Execute(Buffers(args));
      for (int64_t a = 0; a < A; ++a) {
        const float w = static_cast<float>(want[0]->GetDouble(a)), g = static_cast<float>(got[0]->GetDouble(a));
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << "R " << R << " row " << a;
        } else {
          EXPECT_EQ(std::memcmp(&w, &g, 4), 0) << "R " << R << " row " << a << ": " << g << " want " << w;
        }
      }
    }
  }
}

uint64_t Seeds(uint64_t n) {
  const char* env = std::getenv("AXLE_RANDOM_SEEDS");
  return env ? std::strtoull(env, nullptr, 10) : n;
}

TEST(CompiledBackendTest, RandomElementwiseProgramsBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  opts.dtypes = {DType::kF32, DType::kF64};
  opts.num_nodes = 10;
  opts.max_functions = 1;
  opts.ops = testing::ElementwiseHeavyOps();
  int compared = 0, fused_programs = 0;
  const auto stats0 = codegen::GetJitStats();
  for (uint64_t seed = 0; seed < Seeds(400); ++seed) {
    std::unique_ptr<ir::Module> m = testing::RandomModule(seed, opts);
    std::vector<Literal> args = testing::RandomArguments(*m->entry(), seed);
    ExpectSame(*m, args, "seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
    auto copy = m->Clone();
    fused_programs += CountFused(FuseOptimized(*copy)) > 0;
    ++compared;
  }
  const auto stats1 = codegen::GetJitStats();
  std::printf("[stats] %d programs, %d with fused kernels, %lld compiles, %lld disk hits\n", compared,
              fused_programs, static_cast<long long>(stats1.compiles - stats0.compiles),
              static_cast<long long>(stats1.disk_hits - stats0.disk_hits));
  EXPECT_GE(compared, 400);
  EXPECT_GE(fused_programs, 200);  // the rest fold to constants or have no float elementwise op
}

// bf16 and f16 in fused kernels (Note [Halves in generated kernels]): elementwise math,
// converts among all four float dtypes, and reductions of halves, bit for bit against the
// interpreter (exact math; fast math is the op table's, `axle test-ops`).
TEST(CompiledBackendTest, RandomHalfProgramsBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  opts.dtypes = {DType::kBF16, DType::kF16, DType::kF32, DType::kF64};
  opts.num_nodes = 12;
  opts.max_functions = 1;
  opts.ops = testing::ElementwiseHeavyOps();
  int compared = 0, half_kernels = 0, half_reductions = 0;
  auto is_half = [](const ir::Value* v) { return v->dtype() == DType::kBF16 || v->dtype() == DType::kF16; };
  for (uint64_t seed = 9000; seed < 9000 + Seeds(250); ++seed) {
    std::unique_ptr<ir::Module> m = testing::RandomModule(seed, opts);
    std::vector<Literal> args = testing::RandomArguments(*m->entry(), seed);
    ExpectSame(*m, args, "seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
    auto copy = m->Clone();
    for (const codegen::Kernel& k : FuseOptimized(*copy)) {
      if (!k.fused) continue;
      half_kernels += std::any_of(k.nodes.begin(), k.nodes.end(), [&](const ir::Node* n) { return is_half(n->result()); });
      half_reductions += k.reduce != nullptr && is_half(k.reduce->result());
    }
    ++compared;
  }
  std::printf("[stats] %d programs, %d fused kernels computing halves, %d reductions of halves\n", compared,
              half_kernels, half_reductions);
  EXPECT_GE(compared, 250);
  EXPECT_GE(half_kernels, 80);
}

// Reductions of halves in every kernel shape (row, column, a row kernel's softmax), each one
// fused with its prologue and accumulating in double as the interpreter does: bitwise in exact
// math, and the column sum in fast math too (its blocks of rows are for f32 sums alone).
TEST(CompiledBackendTest, HalfReductionsBitwiseEqual) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    const int64_t R = 48, C = 300;
    ir::Module m("half_reductions");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, TensorType(t, Shape{R, C}), "x");
    Value* e = b.Unary(OpKind::kExp, b.Mul(x, x));
    Value* row_sum = b.Reduce(b.Add(x, e), ReduceKind::kSum, {1});
    Value* col_sum = b.Reduce(b.Mul(x, x), ReduceKind::kSum, {0});
    Value* row_max = b.Reduce(x, ReduceKind::kMax, {1});
    Value* shifted = b.Unary(OpKind::kExp, b.Sub(x, b.BroadcastInDim(row_max, Shape{R, C}, {0})));
    Value* softmax = b.Div(shifted, b.BroadcastInDim(b.Reduce(shifted, ReduceKind::kSum, {1}), Shape{R, C}, {0}));
    Value* wide = b.Reduce(b.Convert(x, DType::kF32), ReduceKind::kSum, {1});  // autocast's f32 sums
    b.Return({row_sum, col_sum, softmax, wide});
    auto copy = m.Clone();
    const std::vector<codegen::Kernel> ks = FuseOptimized(*copy);
    EXPECT_EQ(CountFused(ks), static_cast<int>(ks.size())) << codegen::DescribeKernels(ks);
    Literal arg = RandomLiteral(t, {R, C}, 7);
    ExpectSame(m, {arg}, fmt::format("{} reductions", DTypeName(t)));
    FastMathScope fast(true);
    std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers({arg}));
    std::vector<BufferPtr> got = runtime::GetBackend("compiled").Compile(m)->Execute(Buffers({arg}));
    ASSERT_EQ(want.size(), got.size());
    // The half column sum stays in order (blocks of rows are for f32 sums alone); the others hold
    // a fast exp (within a half ulp) or are f32 lanes (reassociated).
    EXPECT_TRUE(runtime::testutil::SameBits(*want[1], *got[1]));
  }
}

// Integer dtypes, converts to and from floats, and the index maps (slice, transpose, iota) in
// fused kernels: bit for bit against the interpreter.
TEST(CompiledBackendTest, RandomIntegerProgramsBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  opts.dtypes = {DType::kI8, DType::kI32, DType::kI64, DType::kU8, DType::kU32, DType::kF32,
                 DType::kF64};
  opts.num_nodes = 10;
  opts.max_functions = 1;
  opts.ops = {OpKind::kNeg, OpKind::kAbs, OpKind::kSign, OpKind::kAdd, OpKind::kSub, OpKind::kMul,
              OpKind::kDiv, OpKind::kRem, OpKind::kMax, OpKind::kMin, OpKind::kClamp,
              OpKind::kCompare, OpKind::kSelect, OpKind::kConvert, OpKind::kNot, OpKind::kAnd,
              OpKind::kOr, OpKind::kXor, OpKind::kBroadcastInDim, OpKind::kReshape,
              OpKind::kSlice, OpKind::kTranspose, OpKind::kIota, OpKind::kExp, OpKind::kSqrt};
  int compared = 0, fused_programs = 0;
  for (uint64_t seed = 5000; seed < 5000 + Seeds(300); ++seed) {
    std::unique_ptr<ir::Module> m = testing::RandomModule(seed, opts);
    std::vector<Literal> args = testing::RandomArguments(*m->entry(), seed);
    ExpectSame(*m, args, "seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
    auto copy = m->Clone();
    fused_programs += CountFused(FuseOptimized(*copy)) > 0;
    ++compared;
  }
  std::printf("[stats] %d integer programs, %d with fused kernels\n", compared, fused_programs);
  EXPECT_GE(fused_programs, 150);
}

// Integer edge cases in one fused kernel per dtype: division and remainder by 0 and -1 (MIN / -1),
// wrapping add/sub/mul/neg/abs, and float -> integer converts of NaN, +-inf, out of range and
// fractional values, integer -> float rounding.
template <typename T>
Literal IntVec(DType t, const std::vector<T>& v) {
  return Literal::FromVector(t, Shape{static_cast<int64_t>(v.size())}, v);
}

TEST(CompiledBackendTest, IntegerEdgeCasesBitwiseEqual) {
  auto run = [&](DType t, Literal a, Literal b) {
    const int64_t n = a.NumElements();
    ir::Module m("int_edges");
    Builder bb(m.AddFunction("main"));
    Value* x = bb.Parameter(0, TensorType(t, Shape{n}), "x");
    Value* y = bb.Parameter(1, TensorType(t, Shape{n}), "y");
    std::vector<Value*> rs = {bb.Div(x, y), bb.Build1(OpKind::kRem, {x, y}), bb.Add(x, y),
                              bb.Sub(x, y), bb.Mul(x, y), bb.Unary(OpKind::kNeg, x),
                              bb.Unary(OpKind::kAbs, x), bb.Unary(OpKind::kSign, x),
                              bb.Build1(OpKind::kMax, {x, y}), bb.Convert(x, DType::kF32),
                              bb.Convert(x, DType::kF64), bb.Convert(x, DType::kI8),
                              bb.Convert(x, DType::kU32), bb.Convert(x, DType::kBool)};
    bb.Return(rs);
    ExpectSame(m, {a, b}, std::string("int edges ") + std::string(DTypeName(t)));
  };
  const int64_t i64min = INT64_MIN, i64max = INT64_MAX;
  run(DType::kI64, IntVec<int64_t>(DType::kI64, {i64min, i64min, 7, -7, 7, -7, 0, i64max, i64max, 123456789012345LL, -3, (1LL << 53) + 1}),
      IntVec<int64_t>(DType::kI64, {-1, 0, 0, -1, 2, 2, 0, 1, i64max, 1000, -3, 3}));
  run(DType::kI32, IntVec<int32_t>(DType::kI32, {INT32_MIN, INT32_MIN, 7, -7, 7, -7, 0, INT32_MAX, INT32_MAX, 16777217, -3, 5}),
      IntVec<int32_t>(DType::kI32, {-1, 0, 0, -1, 2, 2, 0, 1, INT32_MAX, 256, -3, -2}));
  run(DType::kI8, IntVec<int8_t>(DType::kI8, {-128, -128, 7, -7, 7, -7, 0, 127, 127, 100, -3, 5}),
      IntVec<int8_t>(DType::kI8, {-1, 0, 0, -1, 2, 2, 0, 1, 127, 100, -3, -2}));
  run(DType::kU32, IntVec<uint32_t>(DType::kU32, {0xffffffffu, 0xffffffffu, 7, 0x80000000u, 16777217u, 0xffffff80u, 0, 1}),
      IntVec<uint32_t>(DType::kU32, {0, 1, 0, 0xffffffffu, 256, 3, 0, 2}));
  run(DType::kU8, IntVec<uint8_t>(DType::kU8, {255, 255, 7, 128, 200, 0, 0, 1}),
      IntVec<uint8_t>(DType::kU8, {0, 1, 0, 255, 200, 3, 0, 2}));
  // float -> integer: NaN, +-inf, out of range, fractions; each target dtype.
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<float> fv = {nan, -nan, inf, -inf, 0.0f, -0.0f, 0.5f, -0.5f, -0.99f, 1.99f, -1.99f,
                           127.5f, 128.0f, -128.5f, -129.0f, 255.9f, 256.0f, 2147483520.0f, 2147483648.0f,
                           -2147483648.0f, -2147483904.0f, 4294967040.0f, 4294967296.0f,
                           9.2233715e18f, -9.2233715e18f, 9.223371e18f, 1e30f, -1e30f, 3.7f, -3.7f};
  for (DType to : {DType::kI8, DType::kI32, DType::kI64, DType::kU8, DType::kU32, DType::kBool}) {
    for (DType from : {DType::kF32, DType::kF64}) {
      const int64_t n = static_cast<int64_t>(fv.size());
      ir::Module m("f2i");
      Builder bb(m.AddFunction("main"));
      Value* x = bb.Parameter(0, TensorType(from, Shape{n}), "x");
      bb.Return({bb.Convert(x, to)});
      Literal lit = Literal::FromVector(DType::kF32, Shape{n}, fv);
      if (from == DType::kF64) {
        std::vector<double> dv(fv.begin(), fv.end());
        dv[0] = 9223372036854775807.0;  // 2^63
        dv[1] = -9223372036854775808.0;
        dv[2] = 4294967295.5;
        dv[3] = 2147483647.9;
        lit = Literal::FromVector(DType::kF64, Shape{n}, dv);
      }
      ExpectSame(m, {lit}, fmt::format("convert {} -> {}", DTypeName(from), DTypeName(to)));
    }
  }
}

// slice, transpose and iota read through index maps: the randn shape (a [2, ...] slab sliced in
// two halves) is one fused kernel, and the sliced input is not "at index". (tanh where randn has
// cos: a kernel with f32 sin or cos has no input at index at all, Note [Checked sin and cos].)
TEST(FusionTest, SliceTransposeIotaAreIndexMaps) {
  ir::Module m("maps");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({2, 6, 4}), "x");
  Value* t = b.Parameter(1, F32({4, 6}), "t");
  Value* z = b.Parameter(2, F32({6, 4}), "z");
  auto half = [&](int64_t k) {
    return b.Reshape(b.Build1(OpKind::kSlice, {x}, ir::SliceAttrs{{k, 0, 0}, {k + 1, 6, 4}, {1, 1, 1}}),
                     Shape{6, 4});
  };
  Value* tt = b.Build1(OpKind::kTranspose, {t}, ir::TransposeAttrs{{1, 0}});
  Value* io = b.Convert(b.Iota(TensorType(DType::kI32, Shape{6, 4}), 1), DType::kF32);
  Value* y = b.Add(b.Mul(half(0), b.Unary(OpKind::kTanh, half(1))), b.Add(tt, io));
  b.Return({b.Mul(y, z)});
  auto ks = FuseOptimized(m);
  ASSERT_EQ(ks.size(), 1u) << codegen::DescribeKernels(ks);
  ASSERT_TRUE(ks[0].fused);
  const std::vector<bool> at = codegen::InputsReadAtIndex(ks[0]);
  for (size_t j = 0; j < at.size(); ++j) {
    EXPECT_EQ(at[j], ks[0].inputs[j]->shape() == Shape({6, 4})) << j;
  }
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {2, 6, 4}, 1), RandomLiteral(DType::kF32, {4, 6}, 2),
                               RandomLiteral(DType::kF32, {6, 4}, 3)};
  ExpectSame(m, args, "index maps");
}

// Every op and dtype: non-fused nodes run on the cpu executor's kernels (or the interpreter's).
TEST(CompiledBackendTest, RandomProgramsAllOpsBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  int compared = 0;
  for (uint64_t seed = 1000; seed < 1000 + Seeds(200); ++seed) {
    std::unique_ptr<ir::Module> m = testing::RandomModule(seed, opts);
    std::vector<Literal> args = testing::RandomArguments(*m->entry(), seed);
    ExpectSame(*m, args, "seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
    ++compared;
  }
  EXPECT_GE(compared, 200);
}

TEST(FusionTest, LayerNormBackwardExampleIsCurrent) {
  std::unique_ptr<ir::Module> m = LayerNormBackward(4, 8);
  const std::string path = std::string(AXLE_SOURCE_DIR) + "/docs/examples/layer_norm_backward.axir";
  const std::string header =
      "// The worked example of docs/compiler.md: layer norm and its backward, as autodiff builds it\n"
      "// (tests/codegen/codegen_test.cc, LayerNormBackward; AXLE_UPDATE_EXAMPLES=1 codegen_tests\n"
      "// --gtest_filter=*LayerNormBackwardExample* rewrites this file). Try: axle compile FILE\n";
  const std::string text = header + ir::PrintModule(*m);
  if (std::getenv("AXLE_UPDATE_EXAMPLES")) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), text) << "docs/examples/layer_norm_backward.axir is stale: rerun with AXLE_UPDATE_EXAMPLES=1";
  // The counts docs/compiler.md shows.
  std::vector<codegen::Kernel> ks = FuseOptimized(*m);
  EXPECT_EQ(ks.size(), 12u) << codegen::DescribeKernels(ks);
  EXPECT_EQ(CountFused(ks), 12) << codegen::DescribeKernels(ks);
  EXPECT_EQ(CountReductions(ks), 7) << codegen::DescribeKernels(ks);  // 2 without a prologue
}

TEST(CompiledBackendTest, MlpTrainingStepMatchesTheInterpreter) {
  const int64_t B = 32, I = 64, H = 128, O = 16;
  std::unique_ptr<ir::Module> mlp = testing::MlpLossModule(B, I, H, O);
  const ir::Module& m = *mlp;
  std::unique_ptr<ir::Module> g = autodiff::GradModule(m, 0, {1, 2, 3, 4});
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {B, I}, 11), RandomLiteral(DType::kF32, {I, H}, 12),
                               RandomLiteral(DType::kF32, {H}, 13), RandomLiteral(DType::kF32, {H, O}, 14),
                               RandomLiteral(DType::kF32, {O}, 15), RandomLiteral(DType::kF32, {B, O}, 16)};
  std::vector<BufferPtr> want = runtime::testutil::Run("interpreter", *g, args);
  auto exe = runtime::GetBackend("compiled").Compile(*g);
  std::vector<BufferPtr> got = exe->Execute(Buffers(args));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 0;
    for (int64_t k = 0; k < want[i]->NumElements(); ++k) scale = std::max(scale, std::fabs(want[i]->GetDouble(k)));
    std::string where;
    EXPECT_TRUE(runtime::testutil::Near(*want[i], *got[i], 1e-5, scale, &where)) << "result " << i << ": " << where;
  }
  auto copy = g->Clone();
  auto ks = FuseOptimized(*copy);
  std::printf("[mlp step] %d nodes -> %s\n", static_cast<int>(copy->entry()->nodes().size()),
              codegen::DescribeKernels(ks).c_str());
  EXPECT_LT(exe->last_stats().kernels_run, static_cast<int64_t>(copy->entry()->nodes().size()));
}

// Prints the compiled backend's speed against the cpu backend on gelu of 512K elements (and checks
// the threaded result bit for bit).
TEST(CompiledBenchmarkTest, GeluAgainstCpu) {
  const int64_t R = 512, C = 1024;
  ir::Module m("gelu_big");
  Builder b(m.AddFunction("main"));
  b.Return({GeluTanh(b, b.Parameter(0, F32({R, C}), "x"))});
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {R, C}, 9)};
  auto time = [&](runtime::Executable& exe, std::vector<BufferPtr>* out) {
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      auto bufs = Buffers(args);
      auto t0 = std::chrono::steady_clock::now();
      *out = exe.Execute(std::move(bufs));
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  std::vector<BufferPtr> cpu_out, compiled_out;
  FastMathScope exact(false);
  auto cpu = runtime::GetBackend("cpu").Compile(m);
  auto compiled = runtime::GetBackend("compiled").Compile(m);
  const double t_cpu = time(*cpu, &cpu_out), t_compiled = time(*compiled, &compiled_out);
  EXPECT_TRUE(runtime::testutil::SameBits(*cpu_out[0], *compiled_out[0]));
  std::printf("[bench] gelu f32[%lld,%lld]: cpu %.2f ms (%lld kernels), compiled %.2f ms (%lld kernels)\n",
              static_cast<long long>(R), static_cast<long long>(C), t_cpu * 1e3,
              static_cast<long long>(cpu->last_stats().kernels_run), t_compiled * 1e3,
              static_cast<long long>(compiled->last_stats().kernels_run));
}

// ----- speed (prints, never asserts timings) ---------------------------------------------------


// Best of `reps` Execute calls of `exe` on copies of `args` (copies made outside the timing).
double BestSeconds(runtime::Executable& exe, const std::vector<Literal>& args,
                   std::vector<BufferPtr>* out, int reps = 7) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto bufs = Buffers(args);
    auto t0 = std::chrono::steady_clock::now();
    *out = exe.Execute(std::move(bufs));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// gelu-tanh of 786432 f32 and an AdamW update of 2.36M f32 on cpu, compiled (exact_math) and
// compiled (fast math): ms per call and GB/s of kernel-visible traffic (inputs read + outputs
// written once).
TEST(CompiledBenchmarkTest, GeluAndAdamW) {
  auto report = [&](const char* what, const ir::Module& m, const std::vector<Literal>& args,
                    double bytes) {
    std::vector<BufferPtr> out_cpu, out_exact, out_fast;
    auto cpu = runtime::GetBackend("cpu").Compile(m);
    const double t_cpu = BestSeconds(*cpu, args, &out_cpu);
    double t_exact = 0, t_fast = 0;
    int64_t kernels = 0;
    {
      FastMathScope exact(false);
      auto exe = runtime::GetBackend("compiled").Compile(m);
      t_exact = BestSeconds(*exe, args, &out_exact);
      kernels = exe->last_stats().kernels_run;
    }
    {
      FastMathScope fast(true);
      auto exe = runtime::GetBackend("compiled").Compile(m);
      t_fast = BestSeconds(*exe, args, &out_fast);
    }
    std::printf("[bench] %s: cpu %.2f ms (%.1f GB/s); compiled (%lld kernels) exact %.2f ms (%.1f GB/s), "
                "fast %.2f ms (%.1f GB/s)\n", what, t_cpu * 1e3, bytes / t_cpu * 1e-9,
                static_cast<long long>(kernels), t_exact * 1e3, bytes / t_exact * 1e-9, t_fast * 1e3,
                bytes / t_fast * 1e-9);
  };
  {
    const int64_t n = 786432;
    ir::Module m("gelu_bench");
    Builder b(m.AddFunction("main"));
    b.Return({GeluTanh(b, b.Parameter(0, F32({n}), "x"))});
    report("gelu-tanh f32[786432]", m, {RandomLiteral(DType::kF32, {n}, 9)}, 8.0 * n);
  }
  {
    const int64_t n = 2360000;
    ir::Module m("adamw_bench");
    Builder b(m.AddFunction("main"));
    Value* p = b.Parameter(0, F32({n}), "p");
    Value* mo = b.Parameter(1, F32({n}), "m");
    Value* vo = b.Parameter(2, F32({n}), "v");
    Value* g = b.Parameter(3, F32({n}), "g");
    auto scalar = [&](int64_t i, const char* name) {
      return b.BroadcastInDim(b.Parameter(i, F32(Shape{}), name), Shape{n}, {});
    };
    Value* lr = scalar(4, "lr");
    Value* b1 = scalar(5, "b1");
    Value* b2 = scalar(6, "b2");
    Value* c1 = scalar(7, "one_minus_b1t");
    Value* c2 = scalar(8, "one_minus_b2t");
    Value* eps = scalar(9, "eps");
    Value* wd = scalar(10, "wd");
    Value* one = b.BroadcastInDim(b.Scalar(DType::kF32, 1.0), Shape{n}, {});
    Value* m1 = b.Add(b.Mul(b1, mo), b.Mul(b.Sub(one, b1), g));
    Value* v1 = b.Add(b.Mul(b2, vo), b.Mul(b.Mul(b.Sub(one, b2), g), g));
    Value* step = b.Div(b.Mul(lr, b.Div(m1, c1)), b.Add(b.Unary(OpKind::kSqrt, b.Div(v1, c2)), eps));
    Value* p1 = b.Sub(p, b.Add(step, b.Mul(b.Mul(lr, wd), p)));
    b.Return({p1, m1, v1});
    std::vector<Literal> args;
    for (int k = 0; k < 4; ++k) args.push_back(RandomLiteral(DType::kF32, {n}, 20 + k));
    for (double s : {1e-3, 0.9, 0.999, 0.1, 0.001, 1e-8, 0.01})
      args.push_back(Literal::FromVector(DType::kF32, Shape{}, std::vector<float>{static_cast<float>(s)}));
    // v must be >= 0.
    float* v = args[2].mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) v[i] = std::fabs(v[i]);
    report("adamw f32[2360000]", m, args, 28.0 * n);
  }
}

// randn as src/frontend/creation.cc builds it: u32 Philox bits of [2, R, C], the top 24 bits
// (div by 256) to f32 in [0, 1), the two halves sliced and reshaped, Box-Muller.
void BuildRandn(ir::Module& m, int64_t R, int64_t C) {
  Builder b(m.AddFunction("main"));
  Value* key = b.Constant(Literal::FromVector<uint32_t>(DType::kU32, Shape{2}, {42u, 0u}));
  Value* counter = b.Constant(Literal(TensorType(DType::kU32, Shape{4})));
  const Shape two{2, R, C}, one{R, C};
  Value* bits = b.Build1(OpKind::kRngBitGenerator, {key, counter}, ir::NoAttrs{},
                         {TensorType(DType::kU32, two)});
  auto full = [&](DType t, double v, const Shape& s) { return b.BroadcastInDim(b.Scalar(t, v), s, {}); };
  Value* top = b.Div(bits, full(DType::kU32, 256.0, two));
  Value* u = b.Mul(b.Convert(top, DType::kF32), full(DType::kF32, 1.0 / 16777216.0, two));
  auto half = [&](int64_t k) {
    return b.Reshape(b.Build1(OpKind::kSlice, {u}, ir::SliceAttrs{{k, 0, 0}, {k + 1, R, C}, {1, 1, 1}}), one);
  };
  Value* u1 = half(0);
  Value* u2 = half(1);
  Value* rad = b.Unary(OpKind::kSqrt, b.Mul(b.Unary(OpKind::kLog, b.Sub(full(DType::kF32, 1.0, one), u1)),
                                            full(DType::kF32, -2.0, one)));
  b.Return({b.Mul(rad, b.Unary(OpKind::kCos, b.Mul(u2, full(DType::kF32, 2.0 * M_PI, one))))});
}

// The randn graph is 3 kernels: rng_bit_generator, fused{div, convert, mul} over [2, R, C] and
// the Box-Muller kernel reading both halves through slice index maps (before integer fusion
// and slice index maps: 7 -- rng, div, convert, fused{mul}, slice, slice, fused{...}).
TEST(FusionTest, RandnGraphIsThreeKernels) {
  ir::Module m("randn");
  BuildRandn(m, 64, 48);
  {
    auto copy = m.Clone();
    auto ks = FuseOptimized(*copy);
    std::printf("[randn] %s\n", codegen::DescribeKernels(ks).c_str());
    ASSERT_EQ(ks.size(), 3u) << codegen::DescribeKernels(ks);
    EXPECT_FALSE(ks[0].fused);
    EXPECT_TRUE(ks[1].fused);
    EXPECT_EQ(ks[1].num_elements, 2 * 64 * 48);
    EXPECT_TRUE(ks[2].fused);
    EXPECT_EQ(ks[2].num_elements, 64 * 48);
  }
  ExpectSame(m, {}, "randn");
}

// Prints randn of [50257, 768] f32 (GPT-2's token embedding) end to end: cpu backend (the per-op
// kernels unfused integer ops used to fall back to) against compiled, exact and fast math.
TEST(CompiledBenchmarkTest, RandnEmbedding) {
  const int64_t R = 50257, C = 768;
  ir::Module m("randn_big");
  BuildRandn(m, R, C);
  std::vector<BufferPtr> out_cpu, out_exact, out_fast;
  auto cpu = runtime::GetBackend("cpu").Compile(m);
  const double t_cpu = BestSeconds(*cpu, {}, &out_cpu, 1);
  double t_exact = 0, t_fast = 0;
  int64_t kernels = 0;
  {
    FastMathScope exact(false);
    auto exe = runtime::GetBackend("compiled").Compile(m);
    t_exact = BestSeconds(*exe, {}, &out_exact, 2);
    kernels = exe->last_stats().kernels_run;
  }
  {
    FastMathScope fast(true);
    auto exe = runtime::GetBackend("compiled").Compile(m);
    t_fast = BestSeconds(*exe, {}, &out_fast, 2);
  }
  // The Box-Muller kernel alone with fast sin/cos (EmitOptions::fast_trig, off in the backend).
  double t_trig_exact = 0, t_trig_fast = 0;
  {
    auto copy = m.Clone();
    auto ks = FuseOptimized(*copy);
    const codegen::Kernel& k = ks.back();
    std::vector<float> uni(static_cast<size_t>(2 * R * C));
    for (size_t i = 0; i < uni.size(); ++i) uni[i] = static_cast<float>((i * 2654435761u) % 16777216u) / 16777216.0f;
    std::vector<float> res(static_cast<size_t>(R * C));
    for (bool trig : {false, true}) {
      const codegen::EmittedModule em = codegen::EmitCpp(ks, {.exact_math = false, .fast_trig = trig});
      auto lib = codegen::CompileAndLoad(em.source, nullptr);
      using Fn = void (*)(const void* const*, void* const*, int64_t, int64_t);
      auto fn = reinterpret_cast<Fn>(lib->Symbol(em.symbols.back()));
      std::vector<const void*> in(k.inputs.size(), uni.data());
      void* out[1] = {res.data()};
      double best = 1e30;
      for (int r = 0; r < 2; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        fn(in.data(), out, 0, R * C);  // one thread
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      (trig ? t_trig_fast : t_trig_exact) = best;
    }
  }
  EXPECT_TRUE(runtime::testutil::SameBits(*out_cpu[0], *out_exact[0]));
  double max_diff = 0;
  for (int64_t i = 0; i < R * C; i += 97)
    max_diff = std::max(max_diff, std::fabs(out_exact[0]->GetDouble(i) - out_fast[0]->GetDouble(i)));
  std::printf("[bench] randn f32[%lld,%lld]: cpu %.1f ms (%lld kernels); compiled (%lld kernels) exact %.1f ms, "
              "fast %.1f ms (max |fast - exact| %.2g on a sample); Box-Muller kernel on one thread: "
              "std::cos %.1f ms, fast_trig %.1f ms\n", static_cast<long long>(R),
              static_cast<long long>(C), t_cpu * 1e3, static_cast<long long>(cpu->last_stats().kernels_run),
              static_cast<long long>(kernels), t_exact * 1e3, t_fast * 1e3, max_diff,
              t_trig_exact * 1e3, t_trig_fast * 1e3);
}

// ----- compile, cache, failures --------------------------------------------------------------

TEST(JitTest, SecondCompileInAFreshBackendHitsTheDiskCache) {
  TempDir dir;
  ir::Module m("cache_me");
  Builder b(m.AddFunction("main"));
  b.Return({GeluTanh(b, b.Parameter(0, F32({64}), "x"))});
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {64}, 5)};
  using Clock = std::chrono::steady_clock;
  double cold = 0, warm = 0;
  FastMathScope exact(false);
  {
    runtime::DiskCache cache(dir.path);
    auto backend = runtime::NewCompiledBackend(&cache);
    const auto s0 = codegen::GetJitStats();
    auto t0 = Clock::now();
    auto exe = backend->Compile(m);
    cold = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto s1 = codegen::GetJitStats();
    EXPECT_EQ(s1.compiles - s0.compiles, 1);
    EXPECT_EQ(s1.disk_hits - s0.disk_hits, 0);
    EXPECT_EQ(cache.stats().puts, 2);  // the optimized module and the library
    EXPECT_FALSE(exe->compile_info().pipeline_cached);
    std::vector<BufferPtr> want = runtime::testutil::Run("interpreter", m, args);
    EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *exe->Execute(Buffers(args))[0]));
  }
  {
    runtime::DiskCache cache(dir.path);
    auto backend = runtime::NewCompiledBackend(&cache);
    const auto s0 = codegen::GetJitStats();
    const int64_t passes0 = passes::PassesRun();
    auto t0 = Clock::now();
    std::unique_ptr<runtime::Executable> exe;
    exe = backend->Compile(m);
    warm = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto s1 = codegen::GetJitStats();
    EXPECT_EQ(s1.compiles - s0.compiles, 0);
    EXPECT_EQ(s1.disk_hits - s0.disk_hits, 1);
    EXPECT_EQ(cache.stats().hits, 2);
    // Note [A warm start skips the pipeline]: no pass ran.
    EXPECT_EQ(passes::PassesRun(), passes0);
    EXPECT_TRUE(exe->compile_info().pipeline_cached);
    std::vector<BufferPtr> want = runtime::testutil::Run("interpreter", m, args);
    std::vector<BufferPtr> got = exe->Execute(Buffers(args));
    EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *got[0]));
  }
  std::printf("[compile time] gelu module: cold %.3f s, disk hit %.4f s\n", cold, warm);
}

// An optimized module in the cache that does not parse is a warning and a miss: the pipeline runs
// and the results are right.
TEST(JitTest, AnOptimizedModuleThatDoesNotLoadIsAMiss) {
  TempDir dir;
  ir::Module m("bad_entry");
  Builder b(m.AddFunction("main"));
  b.Return({GeluTanh(b, b.Parameter(0, F32({64}), "x"))});
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {64}, 6)};
  FastMathScope exact(false);
  runtime::DiskCache cache(dir.path);
  const std::string key = runtime::OptimizedModuleKey(m, passes::Target::Host(), /*fast_math=*/false);
  for (const char* garbage : {"module @x { func @main { return %nope } }", "not IR at all", ""}) {
    cache.Put(key, garbage);
    const int64_t passes0 = passes::PassesRun();
    auto exe = runtime::NewCompiledBackend(&cache)->Compile(m);
    EXPECT_FALSE(exe->compile_info().pipeline_cached) << garbage;
    EXPECT_GT(passes::PassesRun(), passes0) << garbage;
    std::vector<BufferPtr> want = runtime::testutil::Run("interpreter", m, args);
    EXPECT_TRUE(runtime::testutil::SameBits(*want[0], *exe->Execute(Buffers(args))[0])) << garbage;
  }
}

TEST(JitTest, CompilerFailureIsAClearError) {
  const std::string bad = "extern \"C\" void k0() { this is not C++; }\n";
  try {
    codegen::CompileAndLoad(bad, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("C++ compiler"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;  // the compiler's own diagnostic
    EXPECT_NE(msg.find("this"), std::string::npos) << msg;
  }
  codegen::SetJitCompilerForTesting("/nonexistent/axle-test-cxx");
  try {
    ir::Module m("gelu");
    Builder b(m.AddFunction("main"));
    b.Return({GeluTanh(b, b.Parameter(0, F32({8}), "x"))});
    runtime::NewCompiledBackend(nullptr)->Compile(m);
    codegen::SetJitCompilerForTesting("");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    codegen::SetJitCompilerForTesting("");
    EXPECT_NE(std::string(e.what()).find("/nonexistent/axle-test-cxx"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace axle
