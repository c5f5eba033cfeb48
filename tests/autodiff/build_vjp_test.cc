// BuildVjp as an API: several outputs with their own cotangents, absent cotangents, wrt values
// in the middle of the graph, not-differentiable ops off the gradient path, other float types,
// and second derivatives (the backward IR is itself differentiable).
#include <algorithm>
#include <unordered_set>

#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::ReduceKind;

Literal Vec(std::vector<double> v) {
  return Literal::FromDoubles(DType::kF64, Shape{static_cast<int64_t>(v.size())}, v);
}

TEST(BuildVjpTest, SeveralOutputsAndCotangents) {
  // y1 = x * x, y2 = sin(x), y3 = x (cotangent absent): d = 2x c1 + cos(x) c2.
  ir::Module m;
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F64({3}), "x");
  Value* c1 = b.Parameter(1, F64({3}), "c1");
  Value* c2 = b.Parameter(2, F64({3}), "c2");
  Value* y1 = b.Mul(x, x);
  Value* y2 = b.Unary(OpKind::kSin, x);
  std::vector<Value*> outs = {y1, y2, x}, cots = {c1, c2, nullptr}, wrt = {x};
  std::vector<Value*> d = BuildVjp(b, outs, cots, wrt);
  b.Return({d[0]});
  ir::Verify(m);
  const std::vector<double> xv = {0.5, -1, 2}, c1v = {1, 2, 3}, c2v = {-1, 0.5, 4};
  Literal got = ir::Evaluate(*m.entry(), {Vec(xv), Vec(c1v), Vec(c2v)})[0];
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(got.GetDouble(i), 2 * xv[i] * c1v[i] + std::cos(xv[i]) * c2v[i], 1e-13);
}

TEST(BuildVjpTest, WrtAnIntermediateValueAndItsInput) {
  // h = exp(x); y = sum(h * h). dy/dh = 2h, dy/dx = 2h * exp(x) = 2 exp(2x).
  ir::Module m;
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F64({2}), "x");
  Value* h = b.Unary(OpKind::kExp, x);
  Value* y = b.Reduce(b.Mul(h, h), ReduceKind::kSum, {0});
  std::vector<Value*> outs = {y}, cots = {b.Scalar(DType::kF64, 1)}, wrt = {h, x};
  std::vector<Value*> d = BuildVjp(b, outs, cots, wrt);
  b.Return({d[0], d[1]});
  std::vector<Literal> r = ir::Evaluate(*m.entry(), {Vec({0.25, -0.5})});
  for (int i = 0; i < 2; ++i) {
    const double xi = i == 0 ? 0.25 : -0.5;
    EXPECT_NEAR(r[0].GetDouble(i), 2 * std::exp(xi), 1e-14);
    EXPECT_NEAR(r[1].GetDouble(i), 2 * std::exp(2 * xi), 1e-14);
  }
}

TEST(BuildVjpTest, NotDifferentiableOpsOffThePathAreFine) {
  // argmax picks an index (integer, no gradient); a custom_call computes a factor that does not
  // depend on x; compare/select route the gradient (relu).
  ir::RegisterCustomCall("axle.autodiff_test.identity",
                         [](const std::vector<Literal>& ops, const ir::CustomCallAttrs&,
                            const std::vector<TensorType>&) { return ops; });
  CheckGradients("argmax index", {F64({4, 3})}, [](Builder& b, const Values& p) {
    Value* i = b.Build1(OpKind::kArgMax, {p[0]}, ir::ArgReduceAttrs{1, DType::kI32});
    Value* idx = b.Reshape(i, Shape{4, 1});
    Value* picked =
        b.Reshape(b.Build1(OpKind::kGather, {p[0], idx}, ir::GatherAttrs{1, 1}), Shape{4});
    Value* factor = b.Build(OpKind::kCustomCall, {b.Scalar(DType::kF64, 2)},
                            ir::CustomCallAttrs{"axle.autodiff_test.identity", ""}, {F64({})})[0];
    Value* zeros = b.BroadcastInDim(b.Scalar(DType::kF64, 0), Shape{4, 3}, {});
    Value* relu = b.Select(b.Compare(ir::CompareDir::kGt, p[0], zeros), p[0], zeros);
    Value* scaled = b.Mul(picked, b.BroadcastInDim(factor, Shape{4}, {}));
    return b.Add(scaled, b.Reduce(relu, ReduceKind::kSum, {1}));
  });
}

TEST(BuildVjpTest, OtherFloatTypesKeepTheirType) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    ir::Module m;
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, ir::TensorType(t, Shape{2, 3}), "x");
    Value* w = b.Parameter(1, ir::TensorType(t, Shape{3, 2}), "w");
    Value* y = b.Reduce(b.Unary(OpKind::kTanh, b.MatMul(x, w)), ReduceKind::kSum, {0, 1});
    b.Return({y});
    std::unique_ptr<ir::Module> g = GradModule(m, 0, {0, 1});
    ir::Verify(*g);
    EXPECT_EQ(g->entry()->results()[1]->type(), x->type());
    EXPECT_EQ(g->entry()->results()[2]->type(), w->type());
  }
}

// The body returns dx = d sum(f(x)) / dx, built with BuildVjp; CheckGradients then checks the
// derivative of sum(dx * w), i.e. Hessian-vector products, against finite differences of dx.
BodyFn Gradient(BodyFn f) {
  return [f](Builder& b, const Values& p) {
    Value* y = f(b, p);
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < y->type().rank(); ++i) dims.push_back(i);
    Value* s = dims.empty() ? y : b.Reduce(y, ReduceKind::kSum, dims);
    std::vector<Value*> outs = {s}, cots = {b.Scalar(DType::kF64, 1)}, wrt = {p[0]};
    return BuildVjp(b, outs, cots, wrt)[0];
  };
}

TEST(BuildVjpTest, SecondDerivatives) {
  CheckGradients("d2 sin(x) * x", {F64({4})}, Gradient([](Builder& b, const Values& p) {
                   return b.Mul(b.Unary(OpKind::kSin, p[0]), p[0]);
                 }));
  CheckGradients(
      "d2 softmax-ish", {F64({2, 3})}, Gradient([](Builder& b, const Values& p) {
        Value* e = b.Unary(OpKind::kExp, p[0]);
        Value* s = b.BroadcastInDim(b.Reduce(e, ReduceKind::kSum, {1}), Shape{2, 3}, {0});
        return b.Unary(OpKind::kLog, b.Add(b.Div(e, s), b.Unary(OpKind::kTanh, p[0])));
      }),
      {.ranges = {{-1, 1}}});
  CheckGradients("d2 matmul tanh", {F64({2, 3}), F64({3, 2})},
                 Gradient([](Builder& b, const Values& p) {
                   return b.Unary(OpKind::kTanh, b.MatMul(p[0], p[1]));
                 }));
  CheckGradients("d2 max/pad/slice", {F64({5})}, Gradient([](Builder& b, const Values& p) {
                   Value* padded = b.Build1(OpKind::kPad, {p[0], b.Scalar(DType::kF64, 0.25)},
                                            ir::PadAttrs{{1}, {-1}, {1}});
                   Value* sq = b.Mul(padded, padded);
                   return b.Reduce(b.Mul(sq, padded), ReduceKind::kMax, {0});
                 }));
}

}  // namespace
}  // namespace axle::autodiff::test

namespace axle::autodiff::test {
namespace {

// Note [Recomputed regions]: an MLP block y = x + W2 gelu-ish(W1 x) as a remat region. The
// gradients are bitwise those without the region; the backward recomputes the region behind one
// optimization_barrier, and no backward node reads an intermediate of the forward region (only
// its input x and the weights), except, with kSaveProducts, the products' results.
TEST(BuildVjpTest, RecomputedRegionsGiveTheSameGradients) {
  for (auto policy : {RematRegion::Policy::kFull, RematRegion::Policy::kSaveProducts}) {
    auto build = [&](bool remat, ir::Module& m, std::vector<const ir::Node*>* region_nodes) {
      Builder b(m.AddFunction("main"));
      Value* x0 = b.Parameter(0, TensorType(DType::kF32, Shape{4, 8}), "x");
      Value* w1 = b.Parameter(1, TensorType(DType::kF32, Shape{8, 16}), "w1");
      Value* w2 = b.Parameter(2, TensorType(DType::kF32, Shape{16, 8}), "w2");
      Value* x = b.Unary(OpKind::kTanh, x0);  // an activation: computed, depends on the wrt x0
      const size_t start = m.entry()->nodes().size();
      Value* h = b.MatMul(x, w1);
      Value* a = b.Mul(h, b.Unary(OpKind::kLogistic, h));
      Value* y = b.Add(x, b.MatMul(a, w2));
      if (region_nodes)
        for (size_t i = start; i < m.entry()->nodes().size(); ++i) region_nodes->push_back(m.entry()->nodes()[i].get());
      Value* loss = b.Reduce(b.Mul(y, y), ReduceKind::kSum, {0, 1});
      std::vector<RematRegion> regions;
      if (remat) regions.push_back(RematRegion{*region_nodes, policy});
      std::vector<Value*> outs = {loss}, cots = {b.Scalar(DType::kF32, 1)}, wrt = {x0, w1, w2};
      std::vector<Value*> d = BuildVjp(b, outs, cots, wrt, nullptr, regions);
      b.Return({loss, d[0], d[1], d[2]});
      ir::Verify(m);
    };
    ir::Module plain, rem;
    std::vector<const ir::Node*> region;
    build(false, plain, nullptr);
    build(true, rem, &region);
    const std::vector<Literal> args = {RandomLiteral(TensorType(DType::kF32, Shape{4, 8}), 1),
                                       RandomLiteral(TensorType(DType::kF32, Shape{8, 16}), 2),
                                       RandomLiteral(TensorType(DType::kF32, Shape{16, 8}), 3)};
    const std::vector<Literal> want = ir::Evaluate(*plain.entry(), args), got = ir::Evaluate(*rem.entry(), args);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(std::ranges::equal(want[i].bytes(), got[i].bytes())) << "result " << i;
    // The structure: one barrier; the backward reads no region value but the saved products.
    std::unordered_set<const Value*> region_values;
    for (const ir::Node* n : region)
      if (!(policy == RematRegion::Policy::kSaveProducts && n->op() == OpKind::kDotGeneral))
        region_values.insert(n->result());
    int barriers = 0;
    bool after = false;
    for (const auto& n : rem.entry()->nodes()) {
      if (n->op() == OpKind::kOptimizationBarrier) ++barriers, after = true;
      if (!after) continue;
      for (const Value* v : n->operands())
        EXPECT_FALSE(region_values.count(v)) << "the backward reads " << ir::PrintNode(*v->node());
    }
    EXPECT_EQ(barriers, 1);
  }
}

}  // namespace
}  // namespace axle::autodiff::test
