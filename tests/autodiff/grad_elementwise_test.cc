// Finite-difference checks (f64, reference interpreter) of the elementwise VJP rules, plus the
// tie and zero conventions, which finite differences cannot see.
#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::CompareDir;

BodyFn Unary(OpKind op) {
  return [op](Builder& b, const Values& p) { return b.Unary(op, p[0]); };
}
BodyFn Binary(OpKind op) {
  return [op](Builder& b, const Values& p) { return b.Binary(op, p[0], p[1]); };
}

struct UnaryCase {
  OpKind op;
  Range range;
};

TEST(GradElementwiseTest, Unary) {
  const std::vector<UnaryCase> cases = {
      {OpKind::kNeg, {}},           {OpKind::kAbs, {}},          {OpKind::kExp, {}},
      {OpKind::kLog, {0.2, 3}},     {OpKind::kLog1p, {-0.8, 3}}, {OpKind::kTanh, {}},
      {OpKind::kLogistic, {-4, 4}}, {OpKind::kSqrt, {0.2, 3}},   {OpKind::kRsqrt, {0.2, 3}},
      {OpKind::kSin, {-4, 4}},      {OpKind::kCos, {-4, 4}},     {OpKind::kErf, {}},
      {OpKind::kFloor, {}},         {OpKind::kCeil, {}},         {OpKind::kSign, {}},
  };
  for (const UnaryCase& c : cases)
    for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {5}, {2, 3}}) {
      GradCheckOptions o;
      o.ranges = {c.range};
      CheckGradients(std::string(ir::OpName(c.op)), {F64(shape)}, Unary(c.op), o);
    }
}

TEST(GradElementwiseTest, Binary) {
  struct Case {
    OpKind op;
    Range a, b;
  };
  const std::vector<Case> cases = {
      {OpKind::kAdd, {}, {}},
      {OpKind::kSub, {}, {}},
      {OpKind::kMul, {}, {}},
      {OpKind::kDiv, {}, {0.5, 2}},
      {OpKind::kDiv, {}, {-2, -0.5}},
      {OpKind::kRem, {-5, 5}, {0.7, 2}},
      {OpKind::kRem, {-5, 5}, {-2, -0.7}},
      {OpKind::kPow, {0.3, 2}, {-2, 2}},
      {OpKind::kMax, {}, {}},
      {OpKind::kMin, {}, {}},
      {OpKind::kAtan2, {}, {}},
  };
  for (const Case& c : cases)
    for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {6}, {2, 3}}) {
      GradCheckOptions o;
      o.ranges = {c.a, c.b};
      CheckGradients(std::string(ir::OpName(c.op)), {F64(shape), F64(shape)}, Binary(c.op), o);
    }
}

TEST(GradElementwiseTest, SameOperandTwice) {
  // x * x, x - x, max(x, x): both uses accumulate; max's tie splits g in halves, so d = g.
  for (OpKind op : {OpKind::kMul, OpKind::kSub, OpKind::kDiv, OpKind::kMax, OpKind::kPow})
    CheckGradients(std::string(ir::OpName(op)) + "(x, x)", {F64({4})},
                   [op](Builder& b, const Values& p) { return b.Binary(op, p[0], p[0]); },
                   {.ranges = {{0.5, 2}}});
}

TEST(GradElementwiseTest, SelectAndClamp) {
  auto select = [](Builder& b, const Values& p) {
    return b.Select(b.Compare(CompareDir::kGt, p[0], p[1]), p[0], b.Mul(p[1], p[1]));
  };
  CheckGradients("select", {F64({3, 2}), F64({3, 2})}, select);
  auto scalar_pred = [](Builder& b, const Values& p) {
    return b.Select(b.Compare(CompareDir::kLt, p[2], b.Scalar(DType::kF64, 0)), p[0], p[1]);
  };
  for (uint64_t seed : {1, 2, 3})
    CheckGradients("select scalar pred", {F64({4}), F64({4}), F64({})}, scalar_pred,
                   {.seed = seed});
  auto clamp = [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kClamp, {p[0], p[1], p[2]});
  };
  CheckGradients("clamp", {F64({8}), F64({8}), F64({8})}, clamp,
                 {.ranges = {{-2, -0.5}, {-3, 3}, {0.5, 2}}});
  CheckGradients("clamp scalar bounds", {F64({}), F64({3, 3}), F64({})}, clamp,
                 {.ranges = {{-1, -0.5}, {-3, 3}, {0.5, 1}}});
  // min > max: the result is max everywhere.
  CheckGradients("clamp crossed", {F64({5}), F64({5}), F64({5})}, clamp,
                 {.ranges = {{1, 2}, {-3, 3}, {-1, 0.5}}});
}

TEST(GradElementwiseTest, Convert) {
  auto roundtrip = [](Builder& b, const Values& p) {
    return b.Mul(b.Convert(b.Convert(p[0], DType::kF32), DType::kF64), p[0]);
  };
  // Through f32 the values round, so the tolerance is f32's.
  CheckGradients("convert f64->f32->f64", {F64({4})}, roundtrip, {.eps = 1e-3, .tol = 1e-5});
  auto through_int = [](Builder& b, const Values& p) {
    return b.Add(b.Convert(b.Convert(p[0], DType::kI32), DType::kF64), p[0]);  // d = 1
  };
  CheckGradients("convert through i32", {F64({4})}, through_int, {.ranges = {{0.1, 0.9}}});
}

// Evaluates the gradient of sum(body(x, y) * 1) at the given points.
std::vector<Literal> GradAt(const BodyFn& body, const std::vector<Literal>& args) {
  ir::Module m;
  Builder b(m.AddFunction("main"));
  Values ps;
  for (size_t i = 0; i < args.size(); ++i)
    ps.push_back(b.Parameter(static_cast<int64_t>(i), args[i].type()));
  Value* y = body(b, ps);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < y->type().rank(); ++i) dims.push_back(i);
  b.Return({dims.empty() ? y : b.Reduce(y, ir::ReduceKind::kSum, dims)});
  std::vector<int> wrt;
  for (size_t i = 0; i < args.size(); ++i) wrt.push_back(static_cast<int>(i));
  auto g = GradModule(m, 0, wrt);
  std::vector<Literal> out = ir::Evaluate(*g->entry(), args);
  out.erase(out.begin());
  return out;
}

Literal Vec(std::vector<double> v) {
  return Literal::FromDoubles(DType::kF64, Shape{static_cast<int64_t>(v.size())}, v);
}

TEST(GradElementwiseTest, TieConventions) {
  // max/min ties: g / 2 to each side.
  auto g = GradAt(Binary(OpKind::kMax), {Vec({1, 2, 3}), Vec({1, 5, 0})});
  EXPECT_EQ(g[0], Vec({0.5, 0, 1}));
  EXPECT_EQ(g[1], Vec({0.5, 1, 0}));
  g = GradAt(Binary(OpKind::kMin), {Vec({1, 2, 3}), Vec({1, 5, 0})});
  EXPECT_EQ(g[0], Vec({0.5, 1, 0}));
  EXPECT_EQ(g[1], Vec({0.5, 0, 1}));
  // clamp ties go to x.
  g = GradAt(
      [](Builder& b, const Values& p) {
        return b.Build1(OpKind::kClamp, {p[0], p[1], p[2]});
      },
      {Vec({0, 0, 0, 0}), Vec({0, 1, -1, 2}), Vec({1, 1, 1, 1})});
  EXPECT_EQ(g[0], Vec({0, 0, 1, 0}));
  EXPECT_EQ(g[1], Vec({1, 1, 0, 0}));
  EXPECT_EQ(g[2], Vec({0, 0, 0, 1}));
  // abs at 0: 0.
  g = GradAt(Unary(OpKind::kAbs), {Vec({-2, 0, 3})});
  EXPECT_EQ(g[0], Vec({-1, 0, 1}));
}

TEST(GradElementwiseTest, PowAtZero) {
  // d/da a^p = p a^(p-1): 0 at a = 0 for p = 2, 0 (not NaN) for p = 0; d/dp = 0 at a = 0.
  auto g = GradAt(Binary(OpKind::kPow), {Vec({0, 0, 2}), Vec({2, 0, 3})});
  EXPECT_EQ(g[0], Vec({0, 0, 12}));
  EXPECT_EQ(g[1].GetDouble(0), 0.0);
  EXPECT_EQ(g[1].GetDouble(1), 0.0);
  EXPECT_NEAR(g[1].GetDouble(2), 8 * std::log(2.0), 1e-12);
}

}  // namespace
}  // namespace axle::autodiff::test
