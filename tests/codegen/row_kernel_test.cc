// Row kernels (Note [Row kernels], src/codegen/row_fusion.cc): which graphs become one, and
// their results against the interpreter, bit for bit in exact math (a row kernel repeats the
// same operations in the same order as the kernels it replaces) and within tolerance in fast math.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "../runtime/runtime_test_util.h"
#include "autodiff/vjp.h"
#include "backends/cpu/emit_cpp.h"
#include "backends/registry.h"
#include "codegen/fusion.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "passes/pass.h"

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

std::vector<codegen::Kernel> Fuse(ir::Module& m) {
  passes::RunDefaultPipeline(m);
  return codegen::FuseFunction(*m.entry());
}

int CountRowKernels(const std::vector<codegen::Kernel>& ks) {
  return static_cast<int>(std::count_if(ks.begin(), ks.end(), [](const auto& k) { return codegen::IsRowKernel(k); }));
}

// The compiled backend against the interpreter: bitwise in exact math; in fast math each element
// within rtol of the interpreter's (relative to max(1, |want|)).
void ExpectMatches(const ir::Module& m, const std::vector<Literal>& args, const std::string& what, double rtol = 2e-4) {
  std::vector<BufferPtr> want = runtime::GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
  for (bool fast : {false, true}) {
    FastMathScope scope(fast);
    std::vector<BufferPtr> got = runtime::GetBackend("compiled").Compile(m)->Execute(Buffers(args));
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!fast) {
        ASSERT_TRUE(runtime::testutil::SameBits(*want[i], *got[i]))
            << what << " result " << i << " (exact math)\nwant " << want[i]->ToString(32) << "\ngot  "
            << got[i]->ToString(32) << "\n" << ir::PrintModule(m);
        continue;
      }
      const Literal& w = *want[i];
      const Literal& g = *got[i];
      ASSERT_EQ(w.type(), g.type()) << what;
      for (int64_t e = 0; e < w.NumElements(); ++e) {
        const double a = w.GetDouble(e), b = g.GetDouble(e);
        if (std::isnan(a) || std::isnan(b)) {
          ASSERT_EQ(std::isnan(a), std::isnan(b)) << what << " result " << i << " element " << e;
          continue;
        }
        ASSERT_LE(std::fabs(a - b), rtol * std::max(1.0, std::fabs(a)))
            << what << " result " << i << " element " << e << " (fast math): want " << a << " got " << b;
      }
    }
  }
}

TensorType F32(Shape s) { return TensorType(DType::kF32, std::move(s)); }

Value* Bcast(Builder& b, Value* v, const Shape& s, std::vector<int64_t> dims) { return b.BroadcastInDim(v, s, std::move(dims)); }

// Layer norm over the rows of x [A, R], GPT-2's: mean, variance, rsqrt(var + eps), gain, bias.
Value* LayerNorm(Builder& b, Value* x, Value* g, Value* beta) {
  const int64_t A = x->shape().dim(0), R = x->shape().dim(1);
  const Shape s{A, R};
  Value* n = Bcast(b, b.Scalar(DType::kF32, static_cast<double>(R)), Shape{A}, {});
  Value* mean = b.Div(b.Reduce(x, ReduceKind::kSum, {1}), n);
  Value* xc = b.Sub(x, Bcast(b, mean, s, {0}));
  Value* var = b.Div(b.Reduce(b.Mul(xc, xc), ReduceKind::kSum, {1}), n);
  Value* inv = b.Unary(OpKind::kRsqrt, b.Add(var, Bcast(b, b.Scalar(DType::kF32, 1e-5), Shape{A}, {})));
  Value* y = b.Mul(xc, Bcast(b, inv, s, {0}));
  return b.Add(b.Mul(y, Bcast(b, g, s, {1})), Bcast(b, beta, s, {1}));
}

// Parameters x [A, R], gain and bias [R]; returns layer_norm(x).
Value* LayerNormOfParameters(Builder& b, int64_t A, int64_t R) {
  Value* x = b.Parameter(0, F32({A, R}), "x");
  return LayerNorm(b, x, b.Parameter(1, F32({R}), "gain"), b.Parameter(2, F32({R}), "bias"));
}

TEST(RowKernelTest, LayerNormIsOneKernel) {
  const int64_t A = 64, R = 128;
  ir::Module m("layer_norm");
  Builder b(m.AddFunction("main"));
  b.Return({LayerNormOfParameters(b, A, R)});
  const std::vector<codegen::Kernel> ks = Fuse(m);
  // 5 kernels before row fusion: the mean's reduce, the mean, the variance's reduce, the rsqrt,
  // the normalize.
  ASSERT_EQ(ks.size(), 1u) << codegen::DescribeKernels(ks);
  const codegen::Kernel& k = ks[0];
  ASSERT_TRUE(codegen::IsRowKernel(k)) << codegen::DescribeKernels(ks);
  EXPECT_EQ(k.reduces.size(), 2u);
  EXPECT_EQ(k.reduce, nullptr);
  EXPECT_EQ(k.num_elements, A);
  EXPECT_EQ(k.reduced, R);
  EXPECT_EQ(codegen::PrologueElements(k), A * R);
  ASSERT_EQ(k.outputs.size(), 1u);  // only y: the mean, x - mean and the rsqrt stay in the row
  EXPECT_EQ(codegen::InputsReadAtIndex(k), std::vector<bool>(k.inputs.size(), false));
  const std::string src = codegen::EmitCpp(ks, codegen::EmitOptions{}).source;
  EXPECT_NE(src.find("// row kernel: 2 reductions (sum, sum) in 3 loops over 64 rows of 128"), std::string::npos) << src;
  EXPECT_NE(src.find("constexpr int64_t m = 128;"), std::string::npos) << src;  // one strip a row
  ExpectMatches(m, {RandomLiteral(DType::kF32, {A, R}, 1), RandomLiteral(DType::kF32, {R}, 2),
                    RandomLiteral(DType::kF32, {R}, 3)}, "layer_norm");
}

// A softmax: its exp, needed by the sum and again by the division, is kept in a row buffer.
TEST(RowKernelTest, SoftmaxIsOneKernelWithARowBuffer) {
  for (int64_t R : {64, 300}) {  // one strip a row; two strips
    const int64_t A = 40;
    const Shape s{A, R};
    ir::Module m("softmax");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, F32(s), "x");
    Value* e = b.Unary(OpKind::kExp, b.Sub(x, Bcast(b, b.Reduce(x, ReduceKind::kMax, {1}), s, {0})));
    b.Return({b.Div(e, Bcast(b, b.Reduce(e, ReduceKind::kSum, {1}), s, {0}))});
    const std::vector<codegen::Kernel> ks = Fuse(m);
    ASSERT_EQ(ks.size(), 1u) << codegen::DescribeKernels(ks);
    ASSERT_TRUE(codegen::IsRowKernel(ks[0]));
    ASSERT_EQ(ks[0].reduces.size(), 2u);
    EXPECT_EQ(ks[0].reduces[0]->attrs_as<ir::ReduceAttrs>().kind, ReduceKind::kMax);
    const std::string src = codegen::EmitCpp(ks, codegen::EmitOptions{}).source;
    EXPECT_NE(src.find(fmt::format("float rb0[{}];", R)), std::string::npos) << src;
    EXPECT_NE(src.find("= rb0[(r0 + r)];  // exp"), std::string::npos) << src;  // read back, not recomputed
    ExpectMatches(m, {RandomLiteral(DType::kF32, s, 4)}, fmt::format("softmax R={}", R));
  }
}

// The source depends only on the graph (it keys the disk cache): two row buffers are declared in
// the same order whatever the nodes' addresses.
TEST(RowKernelTest, SourceIsTheSameForEveryBuild) {
  auto source = [] {
    const Shape s{32, 48};
    ir::Module m("two_buffers");
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, F32(s), "x");
    Value* e = b.Unary(OpKind::kExp, b.Sub(x, Bcast(b, b.Reduce(x, ReduceKind::kMax, {1}), s, {0})));
    Value* t = b.Unary(OpKind::kTanh, b.Mul(e, x));
    Value* sum = Bcast(b, b.Reduce(b.Add(e, t), ReduceKind::kSum, {1}), s, {0});
    b.Return({b.Add(b.Div(e, sum), b.Div(t, sum))});
    const std::vector<codegen::Kernel> ks = Fuse(m);
    EXPECT_EQ(ks.size(), 1u) << codegen::DescribeKernels(ks);
    return codegen::EmitCpp(ks, codegen::EmitOptions{}).source;
  };
  const std::string first = source();
  EXPECT_NE(first.find("rb1["), std::string::npos) << first;  // exp and tanh both kept
  for (int i = 0; i < 5; ++i) EXPECT_EQ(source(), first);
}

// Layer norm's forward and backward (autodiff's graph): each direction's row reductions and
// their per-row arithmetic become row kernels; the column sums (dgain, dbias) stay reductions.
TEST(RowKernelTest, LayerNormBackwardMatchesTheInterpreter) {
  const int64_t A = 64, R = 96;
  ir::Module m("layer_norm_step");
  Builder b(m.AddFunction("main"));
  Value* y = LayerNormOfParameters(b, A, R);
  b.Return({b.Reduce(b.Mul(y, b.Parameter(3, F32({A, R}), "dy")), ReduceKind::kSum, {0, 1})});
  std::unique_ptr<ir::Module> grad = autodiff::GradModule(m, 0, {0, 1, 2});
  std::unique_ptr<ir::Module> fused = grad->Clone();
  const std::vector<codegen::Kernel> ks = Fuse(*fused);
  // 12 kernels before row fusion (docs/compiler.md, the backward stage by stage): now the
  // forward's statistics, the loss, dgain, dbias and all of dx in one row kernel.
  EXPECT_EQ(CountRowKernels(ks), 2) << codegen::DescribeKernels(ks);
  EXPECT_EQ(ks.size(), 5u) << codegen::DescribeKernels(ks);
  ExpectMatches(*grad, {RandomLiteral(DType::kF32, {A, R}, 5), RandomLiteral(DType::kF32, {R}, 6),
                        RandomLiteral(DType::kF32, {R}, 7), RandomLiteral(DType::kF32, {A, R}, 8)},
                "layer_norm_step");
}

// A kernel that reads the group's per-row value but cannot join it (a product) ends the group:
// the elementwise kernel after it stays separate, and reads the value the row reduction wrote.
TEST(RowKernelTest, AReaderThatCannotJoinEndsTheGroup) {
  const int64_t A = 32, R = 48;
  const Shape s{A, R};
  ir::Module m("blocked");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32(s), "x");
  Value* w = b.Parameter(1, F32({1, R}), "w");
  Value* mean = b.Div(b.Reduce(x, ReduceKind::kSum, {1}), Bcast(b, b.Scalar(DType::kF32, R), Shape{A}, {}));
  Value* outer = b.MatMul(b.Reshape(mean, Shape{A, 1}), w);  // [A, R]
  b.Return({b.Add(b.Mul(x, Bcast(b, mean, s, {0})), outer)});
  std::unique_ptr<ir::Module> copy = m.Clone();
  const std::vector<codegen::Kernel> ks = Fuse(*copy);
  const auto dot = std::find_if(ks.begin(), ks.end(), [](const auto& k) { return !k.fused; });
  ASSERT_NE(dot, ks.end()) << codegen::DescribeKernels(ks);
  const auto last = ks.end() - 1;
  EXPECT_TRUE(last->fused && !codegen::IsRowKernel(*last) && last->reduce == nullptr) << codegen::DescribeKernels(ks);
  ExpectMatches(m, {RandomLiteral(DType::kF32, s, 9), RandomLiteral(DType::kF32, {1, R}, 10)}, "blocked");
}

// Random row programs: two row reductions of random kinds over [A, R] (f32 or f64), per-row
// arithmetic between them, a final elementwise over the rows that reads both, extra outputs of
// every kind (a row value of the first loop, a per-row value, a reduce's result), compare and
// select, a bias along the rows; rows of one and several strips, threaded sizes, and rows too
// long for row buffers (recomputed instead).
TEST(RowKernelTest, RandomRowProgramsMatchTheInterpreter) {
  std::mt19937 rng(20261201);
  const std::vector<int64_t> rows = {16, 17, 33, 64};
  const std::vector<int64_t> lengths = {2, 7, 64, 255, 256, 257, 600, 1024, 20000};
  const std::vector<ReduceKind> kinds = {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin};
  const std::vector<OpKind> unary = {OpKind::kExp, OpKind::kTanh, OpKind::kNeg, OpKind::kAbs, OpKind::kLogistic};
  int row_kernels = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t A = rows[rng() % rows.size()];
    const int64_t R = trial < static_cast<int>(lengths.size()) ? lengths[trial] : lengths[rng() % lengths.size()];
    const DType t = rng() % 4 == 0 ? DType::kF64 : DType::kF32;
    const Shape s{A, R};
    ir::Module m(fmt::format("rows{}", trial));
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, TensorType(t, s), "x");
    Value* y = b.Parameter(1, TensorType(t, s), "y");
    Value* bias = b.Parameter(2, TensorType(t, Shape{R}), "bias");
    auto c = [&](double v, const Shape& sh) { return Bcast(b, b.Scalar(t, v), sh, {}); };
    Value* h = b.Add(x, b.Mul(y, c(0.5, s)));  // a row value
    Value* f1 = b.Unary(unary[rng() % unary.size()], h);
    Value* r1 = b.Reduce(f1, kinds[rng() % kinds.size()], {1});
    Value* p = b.Div(r1, c(static_cast<double>(R), Shape{A}));  // per row
    if (rng() % 2) p = b.Unary(OpKind::kRsqrt, b.Add(b.Mul(p, p), c(1.0, Shape{A})));
    Value* d = b.Sub(h, Bcast(b, p, s, {0}));
    Value* f2 = rng() % 2 ? b.Unary(OpKind::kExp, b.Unary(OpKind::kNeg, b.Unary(OpKind::kAbs, d))) : b.Mul(d, d);
    Value* r2 = b.Reduce(f2, kinds[rng() % kinds.size()], {1});
    Value* q = b.Add(r2, c(1.0, Shape{A}));
    Value* out = b.Add(b.Div(f2, Bcast(b, q, s, {0})), Bcast(b, bias, s, {1}));
    Value* pos = b.Compare(ir::CompareDir::kGt, d, c(0.0, s));
    out = b.Select(pos, out, b.Mul(out, Bcast(b, p, s, {0})));
    std::vector<Value*> results = {out};
    if (rng() % 2) results.push_back(h);   // stored in the first loop
    if (rng() % 2) results.push_back(p);   // per row
    if (rng() % 2) results.push_back(r2);  // a reduce's result
    if (rng() % 3 == 0) results.push_back(pos);  // bool over the rows
    b.Return(results);
    std::unique_ptr<ir::Module> copy = m.Clone();
    const std::vector<codegen::Kernel> ks = Fuse(*copy);
    row_kernels += CountRowKernels(ks);
    const std::string what = fmt::format("trial {} ([{}, {}] {}): {}", trial, A, R, DTypeName(t), codegen::DescribeKernels(ks));
    ExpectMatches(m, {RandomLiteral(t, s, 100 + trial), RandomLiteral(t, s, 200 + trial), RandomLiteral(t, Shape{R}, 300 + trial)},
                  what, 1e-3);
    if (HasFailure()) return;
  }
  EXPECT_GE(row_kernels, 35);  // nearly every trial fuses its rows (R = 2 and 7 may too)
}

}  // namespace
}  // namespace axle
