// Interpreter kernels of the elementwise ops: unary and binary arithmetic, logic, compare, select,
// clamp, convert and bitcast_convert; and the element conversions other kernels share.
#include <cmath>
#include <limits>

#include "ir/interpreter_internal.h"
#include "ir/scalar_ops.h"

namespace axle::ir::interp {
namespace {

// ---------------------------------------------------------------------------------------------
// Note [Single rounding]
// A conversion into a narrow float type must round the exact source value once, to nearest even.
// Rounding twice (first to f32, then to bf16) can differ: 1 + 2^-8 + 2^-30 rounds to the tie
// 1 + 2^-8 in f32 and then to 1 in bf16, while the exact value is above the tie and rounds to
// 1 + 2^-7. So:
//   * f64 -> bf16/f16 first rounds to f32 with round-to-odd (truncate, then set the last bit when
//     inexact). f32 keeps 13+ more bits than bf16 and f16, and a round-to-odd result with two or
//     more extra bits rounds to nearest exactly as the original would (Boldo and Melquiond).
//   * integer -> bf16/f16 rounds the integer's magnitude to 8 / 11 significant bits with integer
//     arithmetic; the result is then exact in f32 and converts without further rounding (an f16
//     overflow still becomes infinity, as it should). integer -> f32/f64 is one hardware rounding.

constexpr double kFloatMax = 0x1.fffffep127;

// `v` rounded to f32 toward zero, with the last mantissa bit set when that dropped anything.
float RoundToOddFloat(double v) {
  if (std::isnan(v) || std::isinf(v)) return static_cast<float>(v);
  if (std::fabs(v) > kFloatMax) return static_cast<float>(std::signbit(v) ? -kFloatMax : kFloatMax);
  float f = static_cast<float>(v);  // nearest even, in range
  if (static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return BitsToFloat(FloatBits(f) | 1u);
}

// |v| rounded to nearest even at `precision` significant bits, with v's sign.
double RoundIntToPrecision(int64_t v, int precision) {
  uint64_t m = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  int bits = 0;
  while (bits < 64 && (m >> bits) != 0) ++bits;
  if (bits > precision) {
    const int shift = bits - precision;
    const uint64_t dropped = m & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    uint64_t kept = m >> shift;
    if (dropped > half || (dropped == half && (kept & 1u))) ++kept;
    const double r = std::ldexp(static_cast<double>(kept), shift);  // exact: kept <= 2^precision
    return v < 0 ? -r : r;
  }
  return static_cast<double>(v);  // exact: at most `precision` (<= 11) bits
}

}  // namespace

double LoadDouble(const Literal& lit, int64_t i) {
  return VisitFloat(lit.dtype(), [&](auto e) -> double {
    return static_cast<double>(Get<decltype(e)>(lit, i));
  });
}

int64_t LoadInt(const Literal& lit, int64_t i) {
  return VisitIntOrBool(lit.dtype(), [&](auto e) -> int64_t {
    return static_cast<int64_t>(Get<decltype(e)>(lit, i));
  });
}

void StoreDouble(Literal& lit, int64_t i, double v) {
  switch (lit.dtype()) {
    case DType::kF64: return Put<F64>(lit, i, v);
    case DType::kF32: return Put<F32>(lit, i, scalar::ax_narrow(v));  // nearest even
    case DType::kBF16: return Put<Int<uint16_t>>(lit, i, FloatToBF16(RoundToOddFloat(v)));
    case DType::kF16: return Put<Int<uint16_t>>(lit, i, FloatToF16(RoundToOddFloat(v)));
    default: Fail("internal error: StoreDouble into {}", DTypeName(lit.dtype()));
  }
}

void StoreInt(Literal& lit, int64_t i, int64_t v) {
  switch (lit.dtype()) {
    case DType::kF64: return Put<F64>(lit, i, static_cast<double>(v));
    case DType::kF32: return Put<F32>(lit, i, static_cast<float>(v));
    case DType::kBF16: return StoreDouble(lit, i, RoundIntToPrecision(v, 8));
    case DType::kF16: return StoreDouble(lit, i, RoundIntToPrecision(v, 11));
    case DType::kBool: return Put<Bool>(lit, i, v != 0);
    default:
      // Integer -> integer conversion is modulo 2^N in C++20: two's complement truncation.
      return VisitInteger(lit.dtype(), [&](auto e) {
        using I = typename decltype(e)::Compute;
        Put<decltype(e)>(lit, i, static_cast<I>(v));
      });
  }
}

void StoreFloatToIntOrBool(Literal& lit, int64_t i, double v) {
  if (lit.dtype() == DType::kBool) return Put<Bool>(lit, i, v != 0.0);  // NaN != 0
  VisitInteger(lit.dtype(), [&](auto e) {
    using I = typename decltype(e)::Compute;
    Put<decltype(e)>(lit, i, scalar::ax_f2i<I>(v));  // toward zero, saturating; NaN -> 0
  });
}

namespace {

// The ops' scalar functions (NegFn, AddFn, ...; integer arithmetic wraps) are ir/scalar_ops.h's,
// shared with the CPU backend's hand kernels.
using scalar::kIsFloat;
using namespace scalar;  // NOLINT: the function objects the table below names

// ---------------------------------------------------------------------------------------------
// Kernels.

enum class Domain { kFloat, kNumeric, kIntOrBool };

template <Domain D, typename F>
void VisitDomain(DType t, F&& f) {
  if constexpr (D == Domain::kFloat) VisitFloat(t, f);
  else if constexpr (D == Domain::kNumeric) VisitNumeric(t, f);
  else VisitIntOrBool(t, f);
}

template <Domain D, typename Fn>
std::vector<Literal> UnaryKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  Literal out(node.result()->type());
  VisitDomain<D>(x.dtype(), [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < x.NumElements(); ++i) Put<E>(out, i, Fn{}(Get<E>(x, i)));
  });
  return One(std::move(out));
}

template <Domain D, typename Fn>
std::vector<Literal> BinaryKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& a = *ops[0];
  const Literal& b = *ops[1];
  Literal out(node.result()->type());
  VisitDomain<D>(a.dtype(), [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < a.NumElements(); ++i) Put<E>(out, i, Fn{}(Get<E>(a, i), Get<E>(b, i)));
  });
  return One(std::move(out));
}

std::vector<Literal> IsFiniteKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  Literal out(node.result()->type());
  VisitFloat(x.dtype(), [&](auto e) {
    for (int64_t i = 0; i < x.NumElements(); ++i)
      Put<Bool>(out, i, std::isfinite(Get<decltype(e)>(x, i)));
  });
  return One(std::move(out));
}

template <typename T>
bool Compare(CompareDir dir, T a, T b) {
  switch (dir) {
    case CompareDir::kEq: return a == b;
    case CompareDir::kNe: return a != b;  // true when either is NaN
    case CompareDir::kLt: return a < b;
    case CompareDir::kLe: return a <= b;
    case CompareDir::kGt: return a > b;
    case CompareDir::kGe: return a >= b;
  }
  return false;
}

std::vector<Literal> CompareKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& a = *ops[0];
  const Literal& b = *ops[1];
  const CompareDir dir = node.attrs_as<CompareAttrs>().dir;
  Literal out(node.result()->type());
  VisitAny(a.dtype(), [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < a.NumElements(); ++i)
      Put<Bool>(out, i, Compare(dir, Get<E>(a, i), Get<E>(b, i)));
  });
  return One(std::move(out));
}

std::vector<Literal> SelectKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& pred = *ops[0];
  Literal out(node.result()->type());
  const bool scalar = pred.shape().rank() == 0;
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    const bool p = Get<Bool>(pred, scalar ? 0 : i);
    CopyElement(p ? *ops[1] : *ops[2], i, out, i);
  }
  return One(std::move(out));
}

// clamp(min, x, max) = min(max(x, min), max), with max/min's NaN and signed-zero rules.
std::vector<Literal> ClampKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& lo = *ops[0];
  const Literal& x = *ops[1];
  const Literal& hi = *ops[2];
  Literal out(node.result()->type());
  VisitNumeric(x.dtype(), [&](auto e) {
    using E = decltype(e);
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      auto l = Get<E>(lo, lo.shape().rank() == 0 ? 0 : i);
      auto h = Get<E>(hi, hi.shape().rank() == 0 ? 0 : i);
      Put<E>(out, i, Min(Max(Get<E>(x, i), l), h));
    }
  });
  return One(std::move(out));
}

std::vector<Literal> ConvertKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  Literal out(node.result()->type());
  const DType to = out.dtype();
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    if (!IsFloat(x.dtype())) {
      StoreInt(out, i, LoadInt(x, i));
    } else if (IsFloat(to)) {
      StoreDouble(out, i, LoadDouble(x, i));
    } else {
      StoreFloatToIntOrBool(out, i, LoadDouble(x, i));
    }
  }
  return One(std::move(out));
}

std::vector<Literal> BitcastConvertKernel(const Node& node, Operands ops, const ReplicaContext&) {
  Literal out(node.result()->type());
  const auto src = ops[0]->bytes();
  if (!src.empty()) std::memcpy(out.mutable_bytes().data(), src.data(), src.size());
  return One(std::move(out));
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& table) {
  auto set = [&](OpKind k, LocalKernel f) { table[static_cast<size_t>(k)].local = f; };
  set(OpKind::kNeg, UnaryKernel<Domain::kNumeric, NegFn>);
  set(OpKind::kAbs, UnaryKernel<Domain::kNumeric, AbsFn>);
  set(OpKind::kSign, UnaryKernel<Domain::kNumeric, SignFn>);
  set(OpKind::kExp, UnaryKernel<Domain::kFloat, ExpFn>);
  set(OpKind::kLog, UnaryKernel<Domain::kFloat, LogFn>);
  set(OpKind::kLog1p, UnaryKernel<Domain::kFloat, Log1pFn>);
  set(OpKind::kTanh, UnaryKernel<Domain::kFloat, TanhFn>);
  set(OpKind::kLogistic, UnaryKernel<Domain::kFloat, LogisticFn>);
  set(OpKind::kSqrt, UnaryKernel<Domain::kFloat, SqrtFn>);
  set(OpKind::kRsqrt, UnaryKernel<Domain::kFloat, RsqrtFn>);
  set(OpKind::kSin, UnaryKernel<Domain::kFloat, SinFn>);
  set(OpKind::kCos, UnaryKernel<Domain::kFloat, CosFn>);
  set(OpKind::kErf, UnaryKernel<Domain::kFloat, ErfFn>);
  set(OpKind::kFloor, UnaryKernel<Domain::kFloat, FloorFn>);
  set(OpKind::kCeil, UnaryKernel<Domain::kFloat, CeilFn>);
  set(OpKind::kNot, UnaryKernel<Domain::kIntOrBool, NotFn>);
  set(OpKind::kIsFinite, IsFiniteKernel);
  set(OpKind::kAdd, BinaryKernel<Domain::kNumeric, AddFn>);
  set(OpKind::kSub, BinaryKernel<Domain::kNumeric, SubFn>);
  set(OpKind::kMul, BinaryKernel<Domain::kNumeric, MulFn>);
  set(OpKind::kDiv, BinaryKernel<Domain::kNumeric, DivFn>);
  set(OpKind::kRem, BinaryKernel<Domain::kNumeric, RemFn>);
  set(OpKind::kPow, BinaryKernel<Domain::kNumeric, PowFn>);
  set(OpKind::kMax, BinaryKernel<Domain::kNumeric, MaxFn>);
  set(OpKind::kMin, BinaryKernel<Domain::kNumeric, MinFn>);
  set(OpKind::kAnd, BinaryKernel<Domain::kIntOrBool, AndFn>);
  set(OpKind::kOr, BinaryKernel<Domain::kIntOrBool, OrFn>);
  set(OpKind::kXor, BinaryKernel<Domain::kIntOrBool, XorFn>);
  set(OpKind::kAtan2, BinaryKernel<Domain::kFloat, Atan2Fn>);
  set(OpKind::kCompare, CompareKernel);
  set(OpKind::kSelect, SelectKernel);
  set(OpKind::kClamp, ClampKernel);
  set(OpKind::kConvert, ConvertKernel);
  set(OpKind::kBitcastConvert, BitcastConvertKernel);
}

}  // namespace axle::ir::interp
