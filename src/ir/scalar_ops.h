// The scalar meaning of each elementwise op, written once (docs/ir.md, "Ops"): what one element
// of the result is, given one element of each operand. The reference interpreter
// (interpreter_elementwise.cc, interpreter_reduce.cc) and the CPU backend's hand kernels
// (backends/cpu/kernels_elementwise.cc, kernels_reduce.cc) both compute an element with
// scalar::Op<K>, so an op's rounding, wrapping, NaN and division-by-zero rules live here alone.
// The functions with Axle's own rules (max/min, sign, wrapping integer ops, conversions) are
// ir/scalar_functions.inc, which the generated kernels' prelude embeds verbatim; the rest of the
// generated C++ (backends/cpu/emit_cpp.cc) names the same C library functions as these. `axle
// test-ops` and the differential tests hold the three to one answer.
//
// Integers wrap (add, sub, mul and neg compute modulo 2^N); integer division by zero gives -1
// (signed) or the largest value (unsigned), MIN / -1 gives MIN, and x rem 0 gives x; integer pow
// with a negative exponent gives 1 / base truncated. max/min return NaN when either operand is
// NaN and order +0 above -0.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ir/op.h"

namespace axle::ir::scalar {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// ax_max, ax_min, ax_sign, the integer ops (ax_iadd ... ax_ipow), ax_f2i and ax_narrow: the
// functions the generated kernels call too, from the same text (Note at its top).
#include "ir/scalar_functions.inc"

// max / min of two values: NaN when either is NaN, and +0 counts as greater than -0.
template <typename T>
T Max(T a, T b) {
  if constexpr (kIsFloat<T>) return ax_max(a, b); else return ax_imaxf(a, b);
}
template <typename T>
T Min(T a, T b) {
  if constexpr (kIsFloat<T>) return ax_min(a, b); else return ax_iminf(a, b);
}

// The ops, one function object each.
struct NegFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) return -x; else return ax_isub<T>(0, x);
  }
};
struct AbsFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) return std::fabs(x); else return ax_iabs(x);
  }
};
struct SignFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) return ax_sign(x); else return ax_isign(x);
  }
};
struct ExpFn { template <typename T> T operator()(T x) const { return std::exp(x); } };
struct LogFn { template <typename T> T operator()(T x) const { return std::log(x); } };
struct Log1pFn { template <typename T> T operator()(T x) const { return std::log1p(x); } };
struct TanhFn { template <typename T> T operator()(T x) const { return std::tanh(x); } };
struct LogisticFn {
  template <typename T> T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
struct SqrtFn { template <typename T> T operator()(T x) const { return std::sqrt(x); } };
struct RsqrtFn { template <typename T> T operator()(T x) const { return T(1) / std::sqrt(x); } };
struct SinFn { template <typename T> T operator()(T x) const { return std::sin(x); } };
struct CosFn { template <typename T> T operator()(T x) const { return std::cos(x); } };
struct ErfFn { template <typename T> T operator()(T x) const { return std::erf(x); } };
struct FloorFn { template <typename T> T operator()(T x) const { return std::floor(x); } };
struct CeilFn { template <typename T> T operator()(T x) const { return std::ceil(x); } };
struct NotFn {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return !x; else return static_cast<T>(~x);
  }
};

struct AddFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a + b; else return ax_iadd(a, b);
  }
};
struct SubFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a - b; else return ax_isub(a, b);
  }
};
struct MulFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a * b; else return ax_imul(a, b);
  }
};
struct DivFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a / b; else return ax_idiv(a, b);
  }
};
struct RemFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return std::fmod(a, b); else return ax_irem(a, b);
  }
};
struct PowFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return std::pow(a, b); else return ax_ipow(a, b);
  }
};
struct MaxFn { template <typename T> T operator()(T a, T b) const { return Max(a, b); } };
struct MinFn { template <typename T> T operator()(T a, T b) const { return Min(a, b); } };
struct AndFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b; else return static_cast<T>(a & b);
  }
};
struct OrFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b; else return static_cast<T>(a | b);
  }
};
struct XorFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a != b; else return static_cast<T>(a ^ b);
  }
};
struct Atan2Fn { template <typename T> T operator()(T a, T b) const { return std::atan2(a, b); } };

// Op<K>: the function object of elementwise op K (unary and binary arithmetic and logic).
template <OpKind K>
struct Op;
#define AXLE_SCALAR_OP(K, F) \
  template <>                \
  struct Op<OpKind::K> : F {};
AXLE_SCALAR_OP(kNeg, NegFn)
AXLE_SCALAR_OP(kAbs, AbsFn)
AXLE_SCALAR_OP(kSign, SignFn)
AXLE_SCALAR_OP(kExp, ExpFn)
AXLE_SCALAR_OP(kLog, LogFn)
AXLE_SCALAR_OP(kLog1p, Log1pFn)
AXLE_SCALAR_OP(kTanh, TanhFn)
AXLE_SCALAR_OP(kLogistic, LogisticFn)
AXLE_SCALAR_OP(kSqrt, SqrtFn)
AXLE_SCALAR_OP(kRsqrt, RsqrtFn)
AXLE_SCALAR_OP(kSin, SinFn)
AXLE_SCALAR_OP(kCos, CosFn)
AXLE_SCALAR_OP(kErf, ErfFn)
AXLE_SCALAR_OP(kFloor, FloorFn)
AXLE_SCALAR_OP(kCeil, CeilFn)
AXLE_SCALAR_OP(kNot, NotFn)
AXLE_SCALAR_OP(kAdd, AddFn)
AXLE_SCALAR_OP(kSub, SubFn)
AXLE_SCALAR_OP(kMul, MulFn)
AXLE_SCALAR_OP(kDiv, DivFn)
AXLE_SCALAR_OP(kRem, RemFn)
AXLE_SCALAR_OP(kPow, PowFn)
AXLE_SCALAR_OP(kMax, MaxFn)
AXLE_SCALAR_OP(kMin, MinFn)
AXLE_SCALAR_OP(kAnd, AndFn)
AXLE_SCALAR_OP(kOr, OrFn)
AXLE_SCALAR_OP(kXor, XorFn)
AXLE_SCALAR_OP(kAtan2, Atan2Fn)
#undef AXLE_SCALAR_OP

}  // namespace axle::ir::scalar
