// The scalar meaning of each elementwise op, written once (docs/ir.md, "Ops"): what one element
// of the result is, given one element of each operand. The reference interpreter
// (interpreter_elementwise.cc, interpreter_reduce.cc) and the CPU backend's hand kernels
// (backends/cpu/kernels_elementwise.cc, kernels_reduce.cc) both compute an element with
// scalar::Op<K>, so an op's rounding, wrapping, NaN and division-by-zero rules live here alone.
// The generated kernels' C++ (backends/cpu/emit_cpp.cc and its prelude) is text for another
// compiler run; `axle test-ops` and the differential tests hold it to these.
//
// Integers wrap (add, sub, mul and neg compute modulo 2^N); integer division by zero gives -1
// (signed) or the largest value (unsigned), MIN / -1 gives MIN, and x rem 0 gives x; integer pow
// with a negative exponent gives 1 / base truncated. max/min return NaN when either operand is
// NaN and order +0 above -0.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ir/op.h"

namespace axle::ir::scalar {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Two's complement arithmetic modulo 2^N: computed in uint64_t (no signed overflow) and
// truncated back, which is exact modulo 2^N.
template <typename T>
T WrapAdd(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
template <typename T>
T WrapSub(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
template <typename T>
T WrapMul(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

template <typename T>
T IntDiv(T a, T b) {
  if (b == 0) return std::is_signed_v<T> ? static_cast<T>(-1) : std::numeric_limits<T>::max();
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == -1) return a;
  return static_cast<T>(a / b);
}

template <typename T>
T IntRem(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return 0;  // also INT_MIN rem -1, which would trap
  return static_cast<T>(a % b);
}

template <typename T>
T IntPow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? -1 : 1;
      return 0;
    }
  }
  uint64_t acc = 1, b = static_cast<uint64_t>(base), e = static_cast<uint64_t>(exponent);
  while (e != 0) {
    if (e & 1u) acc *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(acc);
}

// max / min of two values: NaN when either is NaN, and +0 counts as greater than -0.
template <typename T>
T Max(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a > b ? a : b;
}
template <typename T>
T Min(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? a : b;
  }
  return a < b ? a : b;
}

// The ops, one function object each.
struct NegFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) return -x; else return WrapSub<T>(0, x);
  }
};
struct AbsFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < 0 ? WrapSub<T>(0, x) : x;
    else return x;
  }
};
struct SignFn {
  template <typename T> T operator()(T x) const {
    if constexpr (kIsFloat<T>) {
      if (std::isnan(x) || x == 0) return x;  // NaN -> NaN, ±0 -> ±0
      return std::copysign(T(1), x);
    } else {
      return static_cast<T>((x > 0) - (x < T(0)));
    }
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
    if constexpr (kIsFloat<T>) return a + b; else return WrapAdd(a, b);
  }
};
struct SubFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a - b; else return WrapSub(a, b);
  }
};
struct MulFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a * b; else return WrapMul(a, b);
  }
};
struct DivFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return a / b; else return IntDiv(a, b);
  }
};
struct RemFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return std::fmod(a, b); else return IntRem(a, b);
  }
};
struct PowFn {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) return std::pow(a, b); else return IntPow(a, b);
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
