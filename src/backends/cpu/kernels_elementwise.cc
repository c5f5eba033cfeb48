// Elementwise fast kernels: f32/f64 arithmetic, compare, clamp and converts; wrapping integer
// add/sub/mul/neg, max/min and bitwise ops (bool too); bf16/f16 arithmetic computed in float and
// rounded back once per op, as the interpreter; select for any dtype (it moves bits). Each is a
// tight loop over contiguous storage, split over the thread pool above kParallelElements. An
// element is computed by ir::scalar::Op<K> (ir/scalar_ops.h), the function the interpreter
// computes it with, so results are bitwise equal.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "core/half.h"
#include "runtime/thread_pool.h"

// Elementwise loops have no loop-carried dependence even when the result aliases an operand
// (same index), so the vectoriser need not version them for aliasing (it would not at -O2).
// The builds use -O2, whose "very cheap" vectoriser cost model skips loops of unknown trip
// count; these hot loops get the default (-O3) model.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#define AXLE_IVDEP _Pragma("GCC ivdep")
#else
#define AXLE_IVDEP
#endif

// After the pragma: the scalar functions are inlined into the loops below and take their options.
#include "ir/scalar_ops.h"  // NOLINT(build/include_order)

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;

template <typename F>
void ParallelLoop(int64_t n, F&& body) {
  ThreadPool::Global().ParallelFor(n, kParallelElements, [&](int64_t b, int64_t e) { body(b, e); });
}

// ---- unary ----
template <typename T, OpKind K>
bool UnaryKernel(const Node&, Operands ops, Literal& out) {
  const T* x = ops[0]->data<T>();
  T* y = out.mutable_data<T>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Op<K>{}(x[i]);
  });
  return true;
}

template <typename T>
bool IsFiniteKernel(const Node&, Operands ops, Literal& out) {
  const T* x = ops[0]->data<T>();
  uint8_t* y = out.mutable_data<uint8_t>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = std::isfinite(x[i]) ? 1 : 0;
  });
  return true;
}

// ---- binary ----
// True when `v` is a broadcast_in_dim of a one-element value: every element is equal.
bool IsBroadcastScalar(const ir::Value* v) {
  const Node* n = v->node();
  return n->op() == OpKind::kBroadcastInDim && n->operand(0)->type().NumElements() == 1;
}

template <typename T, OpKind K>
bool BinaryKernel(const Node& node, Operands ops, Literal& out) {
  const T* a = ops[0]->data<T>();
  const T* c = ops[1]->data<T>();
  T* y = out.mutable_data<T>();
  const int64_t n = out.NumElements();
  // A broadcast scalar operand (a broadcast constant, typically) becomes loop-invariant.
  if (n > 1 && IsBroadcastScalar(node.operand(1))) {
    const T s = c[0];
    ParallelLoop(n, [&](int64_t b, int64_t e) {
      AXLE_IVDEP
      for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Op<K>{}(a[i], s);
    });
    return true;
  }
  if (n > 1 && IsBroadcastScalar(node.operand(0))) {
    const T s = a[0];
    ParallelLoop(n, [&](int64_t b, int64_t e) {
      AXLE_IVDEP
      for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Op<K>{}(s, c[i]);
    });
    return true;
  }
  ParallelLoop(n, [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Op<K>{}(a[i], c[i]);
  });
  return true;
}

template <typename T, ir::CompareDir D>
inline bool Cmp(T a, T b) {
  using ir::CompareDir;
  if constexpr (D == CompareDir::kEq) return a == b;
  else if constexpr (D == CompareDir::kNe) return a != b;
  else if constexpr (D == CompareDir::kLt) return a < b;
  else if constexpr (D == CompareDir::kLe) return a <= b;
  else if constexpr (D == CompareDir::kGt) return a > b;
  else return a >= b;
}

template <typename T, ir::CompareDir D>
bool CompareKernelT(const Node&, Operands ops, Literal& out) {
  const T* a = ops[0]->data<T>();
  const T* c = ops[1]->data<T>();
  uint8_t* y = out.mutable_data<uint8_t>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = Cmp<T, D>(a[i], c[i]) ? 1 : 0;
  });
  return true;
}

template <typename T>
KernelFn CompareFor(ir::CompareDir d) {
  using ir::CompareDir;
  switch (d) {
    case CompareDir::kEq: return CompareKernelT<T, CompareDir::kEq>;
    case CompareDir::kNe: return CompareKernelT<T, CompareDir::kNe>;
    case CompareDir::kLt: return CompareKernelT<T, CompareDir::kLt>;
    case CompareDir::kLe: return CompareKernelT<T, CompareDir::kLe>;
    case CompareDir::kGt: return CompareKernelT<T, CompareDir::kGt>;
    case CompareDir::kGe: return CompareKernelT<T, CompareDir::kGe>;
  }
  return nullptr;
}

// ---- select (any dtype: moves bits of width W) ----
template <typename W>
bool SelectKernelT(const Node&, Operands ops, Literal& out) {
  const uint8_t* p = ops[0]->data<uint8_t>();
  const W* t = ops[1]->data<W>();
  const W* f = ops[2]->data<W>();
  W* y = out.mutable_data<W>();
  const int64_t n = out.NumElements();
  if (ops[0]->NumElements() == 1 && n != 1) {
    const W* src = p[0] ? t : f;
    if (src != y && n > 0) std::memmove(y, src, static_cast<size_t>(n) * sizeof(W));
    return true;
  }
  ParallelLoop(n, [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = p[i] ? t[i] : f[i];
  });
  return true;
}

// ---- clamp ----
template <typename T>
bool ClampKernel(const Node&, Operands ops, Literal& out) {
  const T* lo = ops[0]->data<T>();
  const T* x = ops[1]->data<T>();
  const T* hi = ops[2]->data<T>();
  const int64_t slo = ops[0]->NumElements() == 1 ? 0 : 1;
  const int64_t shi = ops[2]->NumElements() == 1 ? 0 : 1;
  T* y = out.mutable_data<T>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Min(ir::scalar::Max(x[i], lo[i * slo]), hi[i * shi]);
  });
  return true;
}

// ---- convert: float <-> float, small integers / bool -> float, float -> bool ----
template <typename From, typename To>
bool ConvertKernel(const Node&, Operands ops, Literal& out) {
  const From* x = ops[0]->data<From>();
  To* y = out.mutable_data<To>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<To, uint8_t>) {  // float -> bool: x != 0 (NaN -> true)
      AXLE_IVDEP
      for (int64_t i = b; i < e; ++i) y[i] = x[i] != 0 ? 1 : 0;
    } else if constexpr (std::is_floating_point_v<From>) {
      // Through double, as the interpreter: one rounding to nearest even, and a signaling NaN
      // comes out quiet even for f32 -> f32.
      AXLE_IVDEP
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<To>(static_cast<double>(x[i]));
    } else {  // small integers and bool (0/1): one rounding (exact here)
      AXLE_IVDEP
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<To>(x[i]);
    }
  });
  return true;
}


// ---- integers and bool: wrapping add/sub/mul/neg, max/min, bitwise and/or/xor/not ----
template <typename T, OpKind K>
bool IntBinaryKernel(const Node&, Operands ops, Literal& out) {
  const T* a = ops[0]->data<T>();
  const T* c = ops[1]->data<T>();
  T* y = out.mutable_data<T>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::Op<K>{}(a[i], c[i]);
  });
  return true;
}

template <typename T, bool kBool>
bool NotKernel(const Node&, Operands ops, Literal& out) {
  const T* x = ops[0]->data<T>();
  T* y = out.mutable_data<T>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) {
      if constexpr (kBool) y[i] = x[i] ? 0 : 1;
      else y[i] = static_cast<T>(~x[i]);
    }
  });
  return true;
}

template <typename T>
bool IntNegKernel(const Node&, Operands ops, Literal& out) {
  const T* x = ops[0]->data<T>();
  T* y = out.mutable_data<T>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    AXLE_IVDEP
    for (int64_t i = b; i < e; ++i) y[i] = ir::scalar::NegFn{}(x[i]);
  });
  return true;
}

template <typename T>
KernelFn IntKernelFor(OpKind k) {
  switch (k) {
#define AXLE_I(K) case OpKind::K: return IntBinaryKernel<T, OpKind::K>;
    AXLE_I(kAdd) AXLE_I(kSub) AXLE_I(kMul) AXLE_I(kMax) AXLE_I(kMin) AXLE_I(kAnd) AXLE_I(kOr) AXLE_I(kXor)
#undef AXLE_I
    case OpKind::kNot: return NotKernel<T, false>;
    case OpKind::kNeg: return IntNegKernel<T>;
    default: return nullptr;
  }
}

KernelFn BoolKernelFor(OpKind k) {
  switch (k) {  // bool bytes are 0/1: bitwise is logical
    case OpKind::kAnd: return IntBinaryKernel<uint8_t, OpKind::kAnd>;
    case OpKind::kOr: return IntBinaryKernel<uint8_t, OpKind::kOr>;
    case OpKind::kXor: return IntBinaryKernel<uint8_t, OpKind::kXor>;
    case OpKind::kNot: return NotKernel<uint8_t, true>;
    default: return nullptr;
  }
}


// ---- bf16 / f16: widen exactly to float, compute there, round back to nearest even ----

template <typename H, OpKind K>
bool HalfUnaryKernel(const Node&, Operands ops, Literal& out) {
  const uint16_t* x = ops[0]->data<uint16_t>();
  uint16_t* y = out.mutable_data<uint16_t>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = H::Store(ir::scalar::Op<K>{}(H::Load(x[i])));
  });
  return true;
}

template <typename H, OpKind K>
bool HalfBinaryKernel(const Node&, Operands ops, Literal& out) {
  const uint16_t* a = ops[0]->data<uint16_t>();
  const uint16_t* c = ops[1]->data<uint16_t>();
  uint16_t* y = out.mutable_data<uint16_t>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = H::Store(ir::scalar::Op<K>{}(H::Load(a[i]), H::Load(c[i])));
  });
  return true;
}

// f32 -> bf16/f16 (through double as the interpreter, so a signaling NaN is quieted first) and
// bf16/f16 -> f32/f64 (exact).
template <typename H>
bool F32ToHalfKernel(const Node&, Operands ops, Literal& out) {
  const float* x = ops[0]->data<float>();
  uint16_t* y = out.mutable_data<uint16_t>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = H::Store(static_cast<float>(static_cast<double>(x[i])));
  });
  return true;
}
template <typename H, typename To>
bool HalfToFloatKernel(const Node&, Operands ops, Literal& out) {
  const uint16_t* x = ops[0]->data<uint16_t>();
  To* y = out.mutable_data<To>();
  ParallelLoop(out.NumElements(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = static_cast<To>(static_cast<double>(H::Load(x[i])));
  });
  return true;
}

template <typename H>
KernelFn HalfKernelFor(OpKind k) {
  switch (k) {
#define AXLE_U(K) case OpKind::K: return HalfUnaryKernel<H, OpKind::K>;
    AXLE_U(kNeg) AXLE_U(kAbs) AXLE_U(kExp) AXLE_U(kLog) AXLE_U(kLog1p) AXLE_U(kTanh)
    AXLE_U(kLogistic) AXLE_U(kSqrt) AXLE_U(kRsqrt) AXLE_U(kSin) AXLE_U(kCos) AXLE_U(kErf)
    AXLE_U(kFloor) AXLE_U(kCeil) AXLE_U(kSign)
#undef AXLE_U
#define AXLE_B(K) case OpKind::K: return HalfBinaryKernel<H, OpKind::K>;
    AXLE_B(kAdd) AXLE_B(kSub) AXLE_B(kMul) AXLE_B(kDiv) AXLE_B(kRem) AXLE_B(kPow) AXLE_B(kMax)
    AXLE_B(kMin) AXLE_B(kAtan2)
#undef AXLE_B
    default: return nullptr;
  }
}

template <typename T>
KernelFn FloatUnaryFor(OpKind k) {
  switch (k) {
#define AXLE_U(K) case OpKind::K: return UnaryKernel<T, OpKind::K>;
    AXLE_U(kNeg) AXLE_U(kAbs) AXLE_U(kExp) AXLE_U(kLog) AXLE_U(kLog1p) AXLE_U(kTanh)
    AXLE_U(kLogistic) AXLE_U(kSqrt) AXLE_U(kRsqrt) AXLE_U(kSin) AXLE_U(kCos) AXLE_U(kErf)
    AXLE_U(kFloor) AXLE_U(kCeil) AXLE_U(kSign)
#undef AXLE_U
#define AXLE_B(K) case OpKind::K: return BinaryKernel<T, OpKind::K>;
    AXLE_B(kAdd) AXLE_B(kSub) AXLE_B(kMul) AXLE_B(kDiv) AXLE_B(kRem) AXLE_B(kPow) AXLE_B(kMax)
    AXLE_B(kMin) AXLE_B(kAtan2)
#undef AXLE_B
    case OpKind::kClamp: return ClampKernel<T>;
    default: return nullptr;
  }
}

template <typename From>
KernelFn ConvertFrom(DType to) {
  switch (to) {
    case DType::kF32: return ConvertKernel<From, float>;
    case DType::kF64: return ConvertKernel<From, double>;
    case DType::kBool:
      if constexpr (std::is_floating_point_v<From>) return ConvertKernel<From, uint8_t>;
      return nullptr;
    default: return nullptr;
  }
}

KernelFn SelectConvert(DType from, DType to) {
  if (from == DType::kF32 && to == DType::kBF16) return F32ToHalfKernel<BF16Tag>;
  if (from == DType::kF32 && to == DType::kF16) return F32ToHalfKernel<F16Tag>;
  if (from == DType::kBF16 && to == DType::kF32) return HalfToFloatKernel<BF16Tag, float>;
  if (from == DType::kF16 && to == DType::kF32) return HalfToFloatKernel<F16Tag, float>;
  if (from == DType::kBF16 && to == DType::kF64) return HalfToFloatKernel<BF16Tag, double>;
  if (from == DType::kF16 && to == DType::kF64) return HalfToFloatKernel<F16Tag, double>;
  switch (from) {
    case DType::kF32: return ConvertFrom<float>(to);
    case DType::kF64: return ConvertFrom<double>(to);
    case DType::kI32: return to == DType::kBool ? nullptr : ConvertFrom<int32_t>(to);
    case DType::kI8: return to == DType::kBool ? nullptr : ConvertFrom<int8_t>(to);
    case DType::kU8: return to == DType::kBool ? nullptr : ConvertFrom<uint8_t>(to);
    case DType::kBool: return to == DType::kBool ? nullptr : ConvertFrom<uint8_t>(to);  // 0/1
    default: return nullptr;  // i64/u32 -> f32 and the rest: interpreter
  }
}

}  // namespace

KernelChoice SelectElementwiseKernel(const Node& node) {
  const OpKind k = node.op();
  const DType rt = node.result()->dtype();
  KernelChoice c;
  if (k == OpKind::kSelect) {
    switch (DTypeSize(rt)) {
      case 1: c.fn = SelectKernelT<uint8_t>; break;
      case 2: c.fn = SelectKernelT<uint16_t>; break;
      case 4: c.fn = SelectKernelT<uint32_t>; break;
      case 8: c.fn = SelectKernelT<uint64_t>; break;
    }
    c.in_place = true;
    c.name = "select";
    return c;
  }
  if (k == OpKind::kConvert) {
    c.fn = SelectConvert(node.operand(0)->dtype(), rt);
    c.name = "convert";
    return c;
  }
  if (k == OpKind::kCompare) {
    const DType t = node.operand(0)->dtype();
    const auto dir = node.attrs_as<ir::CompareAttrs>().dir;
    if (t == DType::kF32) c.fn = CompareFor<float>(dir);
    else if (t == DType::kF64) c.fn = CompareFor<double>(dir);
    else if (t == DType::kI32) c.fn = CompareFor<int32_t>(dir);
    else if (t == DType::kI64) c.fn = CompareFor<int64_t>(dir);
    c.name = "compare";
    return c;
  }
  if (k == OpKind::kIsFinite) {
    const DType t = node.operand(0)->dtype();
    if (t == DType::kF32) c.fn = IsFiniteKernel<float>;
    else if (t == DType::kF64) c.fn = IsFiniteKernel<double>;
    c.name = "is_finite";
    return c;
  }
  switch (rt) {
    case DType::kF32: c.fn = FloatUnaryFor<float>(k); break;
    case DType::kF64: c.fn = FloatUnaryFor<double>(k); break;
    case DType::kI32: c.fn = IntKernelFor<int32_t>(k); break;
    case DType::kI64: c.fn = IntKernelFor<int64_t>(k); break;
    case DType::kU32: c.fn = IntKernelFor<uint32_t>(k); break;
    case DType::kI8: c.fn = IntKernelFor<int8_t>(k); break;
    case DType::kU8: c.fn = IntKernelFor<uint8_t>(k); break;
    case DType::kBool: c.fn = BoolKernelFor(k); break;
    case DType::kBF16: c.fn = HalfKernelFor<BF16Tag>(k); break;
    case DType::kF16: c.fn = HalfKernelFor<F16Tag>(k); break;
    default: break;
  }
  c.in_place = c.fn != nullptr;
  c.name = "elementwise";
  return c;
}

}  // namespace axle::runtime::cpu
