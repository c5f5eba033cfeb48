// VJP rules of the elementwise ops: unary, binary, select, clamp, convert.
//
// Notation in the comments: x, y = operands (a, b for binary ops), r = the node's result,
// g = r's cotangent. Each rule's comment is its calculus.
#include <cmath>
#include <numbers>

#include "autodiff/vjp_internal.h"

namespace axle::autodiff::internal {
namespace {

using ir::CompareDir;
using G = std::span<Value* const>;

Value* X(const Node& n, int i = 0) { return n.operand(static_cast<size_t>(i)); }
Value* R(const Node& n) { return n.result(0); }

// ---------------------------------------------------------------------------------------------
// Unary.

// d(-x) = -g
Cotangents NegVjp(Builder& b, const Node&, G g) { return {Neg(b, g[0])}; }

// d|x| = g * sign(x)   (0 at x = 0: sign(0) = 0, a subgradient)
Cotangents AbsVjp(Builder& b, const Node& n, G g) {
  return {b.Mul(g[0], b.Unary(OpKind::kSign, X(n)))};
}

// d exp(x) = g * exp(x) = g * r
Cotangents ExpVjp(Builder& b, const Node& n, G g) { return {b.Mul(g[0], R(n))}; }

// d log(x) = g / x
Cotangents LogVjp(Builder& b, const Node& n, G g) { return {b.Div(g[0], X(n))}; }

// d log1p(x) = g / (1 + x)
Cotangents Log1pVjp(Builder& b, const Node& n, G g) {
  return {b.Div(g[0], b.Add(FullLike(b, X(n), 1.0), X(n)))};
}

// d tanh(x) = g * (1 - r^2)
Cotangents TanhVjp(Builder& b, const Node& n, G g) {
  return {b.Mul(g[0], b.Sub(FullLike(b, R(n), 1.0), b.Mul(R(n), R(n))))};
}

// d logistic(x) = g * r * (1 - r)
Cotangents LogisticVjp(Builder& b, const Node& n, G g) {
  return {b.Mul(g[0], b.Mul(R(n), b.Sub(FullLike(b, R(n), 1.0), R(n))))};
}

// d sqrt(x) = g / (2 r)
Cotangents SqrtVjp(Builder& b, const Node& n, G g) {
  return {b.Div(g[0], b.Mul(FullLike(b, R(n), 2.0), R(n)))};
}

// d x^(-1/2) = g * (-1/2) x^(-3/2) = g * (-1/2) * r^3
Cotangents RsqrtVjp(Builder& b, const Node& n, G g) {
  Value* r3 = b.Mul(R(n), b.Mul(R(n), R(n)));
  return {b.Mul(g[0], b.Mul(FullLike(b, R(n), -0.5), r3))};
}

// d sin(x) = g * cos(x)
Cotangents SinVjp(Builder& b, const Node& n, G g) {
  return {b.Mul(g[0], b.Unary(OpKind::kCos, X(n)))};
}

// d cos(x) = -g * sin(x)
Cotangents CosVjp(Builder& b, const Node& n, G g) {
  return {Neg(b, b.Mul(g[0], b.Unary(OpKind::kSin, X(n))))};
}

// d erf(x) = g * 2/sqrt(pi) * exp(-x^2)
Cotangents ErfVjp(Builder& b, const Node& n, G g) {
  Value* e = b.Unary(OpKind::kExp, Neg(b, b.Mul(X(n), X(n))));
  return {b.Mul(g[0], b.Mul(FullLike(b, X(n), 2.0 / std::sqrt(std::numbers::pi)), e))};
}

// ---------------------------------------------------------------------------------------------
// Binary.

// d(a + b) = (g, g)
Cotangents AddVjp(Builder&, const Node&, G g) { return {g[0], g[0]}; }

// d(a - b) = (g, -g)
Cotangents SubVjp(Builder& b, const Node&, G g) { return {g[0], Neg(b, g[0])}; }

// d(a * b) = (g * b, g * a)
Cotangents MulVjp(Builder& b, const Node& n, G g) {
  return {b.Mul(g[0], X(n, 1)), b.Mul(g[0], X(n, 0))};
}

// d(a / b) = (g / b, -g * a / b^2 = -g * r / b)
Cotangents DivVjp(Builder& b, const Node& n, G g) {
  Value* ga = b.Div(g[0], X(n, 1));
  return {ga, Neg(b, b.Mul(ga, R(n)))};
}

// rem(a, b) = a - b * trunc(a / b), so d = (g, -g * trunc(a / b)), where trunc(a / b) =
// (a - r) / b exactly in real arithmetic; it is rounded to the nearest integer to undo rounding
// error: floor((a - r) / b + 1/2).
Cotangents RemVjp(Builder& b, const Node& n, G g) {
  Value* q = b.Div(b.Sub(X(n, 0), R(n)), X(n, 1));
  Value* t = b.Unary(OpKind::kFloor, b.Add(q, FullLike(b, q, 0.5)));
  return {g[0], Neg(b, b.Mul(g[0], t))};
}

// d a^p = (g * p * a^(p-1), g * r * log(a)). Conventions at a = 0 (as JAX): the base's cotangent
// is 0 where p = 0 (not 0 * inf); the exponent's is 0 where a = 0 (log(0) replaced by log(1)).
// For a < 0 the exponent's cotangent is NaN (log of a negative number), as in JAX and PyTorch.
Cotangents PowVjp(Builder& b, const Node& n, G g) {
  Value* a = X(n, 0);
  Value* p = X(n, 1);
  Value* zero = FullLike(b, a, 0.0);
  Value* one = FullLike(b, a, 1.0);
  Value* pm1 = b.Binary(OpKind::kPow, a, b.Sub(p, one));
  Value* da = b.Select(Cmp(b, CompareDir::kEq, p, zero), zero, b.Mul(p, pm1));
  Value* safe_a = b.Select(Cmp(b, CompareDir::kEq, a, zero), one, a);
  Value* dp = b.Mul(R(n), b.Unary(OpKind::kLog, safe_a));
  return {b.Mul(g[0], da), b.Mul(g[0], dp)};
}

// max/min: g goes to the operand that is selected; on a tie (a == b) each gets g / 2 (JAX's
// convention; the average of the one-sided derivatives).
Cotangents ChooserVjp(Builder& b, const Node& n, G g, CompareDir wins) {
  Value* a = X(n, 0);
  Value* c = X(n, 1);
  Value* half = FullLike(b, a, 0.5);
  Value* zero = FullLike(b, a, 0.0);
  Value* one = FullLike(b, a, 1.0);
  Value* tie = Cmp(b, CompareDir::kEq, a, c);
  Value* wa = b.Select(Cmp(b, wins, a, c), one, b.Select(tie, half, zero));
  Value* wc = b.Select(Cmp(b, wins, c, a), one, b.Select(tie, half, zero));
  return {b.Mul(g[0], wa), b.Mul(g[0], wc)};
}
Cotangents MaxVjp(Builder& b, const Node& n, G g) { return ChooserVjp(b, n, g, CompareDir::kGt); }
Cotangents MinVjp(Builder& b, const Node& n, G g) { return ChooserVjp(b, n, g, CompareDir::kLt); }

// d atan2(y, x) = (g * x / (x^2 + y^2), -g * y / (x^2 + y^2))
Cotangents Atan2Vjp(Builder& b, const Node& n, G g) {
  Value* y = X(n, 0);
  Value* x = X(n, 1);
  Value* s = b.Div(g[0], b.Add(b.Mul(x, x), b.Mul(y, y)));
  return {b.Mul(s, x), Neg(b, b.Mul(s, y))};
}

// ---------------------------------------------------------------------------------------------
// Ternary, convert.

// select(p, t, f): (none, select(p, g, 0), select(p, 0, g)); a scalar predicate works as is.
Cotangents SelectVjp(Builder& b, const Node& n, G g) {
  Value* zero = FullLike(b, g[0], 0.0);
  return {nullptr, b.Select(X(n, 0), g[0], zero), b.Select(X(n, 0), zero, g[0])};
}

// clamp(lo, x, hi) = min(max(x, lo), hi). Let m = max(x, lo). hi receives g where m > hi; the
// rest goes to x where x >= lo, else to lo. Ties go to x (as PyTorch): at x == lo or x == hi the
// whole g flows to x. Scalar lo/hi receive the sum of their elements' shares.
Cotangents ClampVjp(Builder& b, const Node& n, G g) {
  Value* lo = X(n, 0);
  Value* x = X(n, 1);
  Value* hi = X(n, 2);
  Value* lo_b = Broadcast(b, lo, x->shape(), {});
  Value* hi_b = Broadcast(b, hi, x->shape(), {});
  Value* zero = FullLike(b, x, 0.0);
  Value* m = b.Max(x, lo_b);
  Value* above = Cmp(b, CompareDir::kGt, m, hi_b);
  Value* rest = b.Select(above, zero, g[0]);
  Value* x_wins = Cmp(b, CompareDir::kGe, x, lo_b);
  Value* g_lo = b.Select(x_wins, zero, rest);
  Value* g_hi = b.Select(above, g[0], zero);
  return {SumToOperand(b, g_lo, lo), b.Select(x_wins, rest, zero), SumToOperand(b, g_hi, hi)};
}

// convert between floats: g converted back to the operand's dtype. No gradient flows through a
// conversion from or to an integer or bool (the result is piecewise constant or not a float).
Cotangents ConvertVjp(Builder& b, const Node& n, G g) {
  if (!IsFloat(X(n)->dtype()) || !IsFloat(R(n)->dtype())) return {nullptr};
  if (X(n)->dtype() == R(n)->dtype()) return {g[0]};
  return {b.Convert(g[0], X(n)->dtype())};
}

}  // namespace

void RegisterElementwiseVjps(VjpTable& t) {
  SetRule(t, OpKind::kNeg, NegVjp);
  SetRule(t, OpKind::kAbs, AbsVjp);
  SetRule(t, OpKind::kExp, ExpVjp);
  SetRule(t, OpKind::kLog, LogVjp);
  SetRule(t, OpKind::kLog1p, Log1pVjp);
  SetRule(t, OpKind::kTanh, TanhVjp);
  SetRule(t, OpKind::kLogistic, LogisticVjp);
  SetRule(t, OpKind::kSqrt, SqrtVjp);
  SetRule(t, OpKind::kRsqrt, RsqrtVjp);
  SetRule(t, OpKind::kSin, SinVjp);
  SetRule(t, OpKind::kCos, CosVjp);
  SetRule(t, OpKind::kErf, ErfVjp);
  SetZero(t, OpKind::kFloor, "piecewise constant: the derivative is 0 almost everywhere");
  SetZero(t, OpKind::kCeil, "piecewise constant: the derivative is 0 almost everywhere");
  SetZero(t, OpKind::kSign, "piecewise constant: the derivative is 0 almost everywhere");
  SetNotDifferentiable(t, OpKind::kNot, "integer/bool op (logical or bitwise not)");
  SetNotDifferentiable(t, OpKind::kIsFinite, "bool result: a predicate carries no gradient");
  SetRule(t, OpKind::kAdd, AddVjp);
  SetRule(t, OpKind::kSub, SubVjp);
  SetRule(t, OpKind::kMul, MulVjp);
  SetRule(t, OpKind::kDiv, DivVjp);
  SetRule(t, OpKind::kRem, RemVjp);
  SetRule(t, OpKind::kPow, PowVjp);
  SetRule(t, OpKind::kMax, MaxVjp);
  SetRule(t, OpKind::kMin, MinVjp);
  SetNotDifferentiable(t, OpKind::kAnd, "integer/bool op (logical or bitwise and)");
  SetNotDifferentiable(t, OpKind::kOr, "integer/bool op (logical or bitwise or)");
  SetNotDifferentiable(t, OpKind::kXor, "integer/bool op (logical or bitwise xor)");
  SetRule(t, OpKind::kAtan2, Atan2Vjp);
  SetNotDifferentiable(t, OpKind::kCompare, "bool result: a predicate carries no gradient");
  SetRule(t, OpKind::kSelect, SelectVjp);
  SetRule(t, OpKind::kClamp, ClampVjp);
  SetRule(t, OpKind::kConvert, ConvertVjp);
  SetNotDifferentiable(
      t, OpKind::kBitcastConvert,
      "reinterprets bits: the result is not a differentiable function of the value");
}

}  // namespace axle::autodiff::internal
