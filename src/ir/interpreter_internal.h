// Internals of the reference interpreter shared by its per-family kernel files. Not a public API:
// include ir/interpreter.h instead.
//
// A kernel is either local (it runs once per replica on that replica's operands) or collective (it
// runs once per node on every replica's operands). The driver (interpreter.cc) has already checked
// each node against its op's shape rule, so kernels may rely on well-formed attributes and operand
// types; they allocate their results with the node's result types.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "ir/scalar_ops.h"

namespace axle::ir::interp {

using Operands = std::span<const Literal* const>;

// What a local kernel may know about where it runs.
struct ReplicaContext {
  std::span<const Literal> args;  // this replica's arguments
  int64_t replica = 0;
};

using LocalKernel = std::vector<Literal> (*)(const Node& node, Operands operands,
                                             const ReplicaContext& ctx);
// operands[r][i] is replica r's operand i; returns results[r][j].
using ReplicaOperands = std::vector<std::vector<const Literal*>>;
using CollectiveKernel = std::vector<std::vector<Literal>> (*)(const Node& node,
                                                               const ReplicaOperands& operands);

struct KernelEntry {
  LocalKernel local = nullptr;
  CollectiveKernel collective = nullptr;
};
using KernelTable = std::array<KernelEntry, kNumOps>;

// Each op family fills its entries of the table.
void RegisterElementwiseKernels(KernelTable& table);
void RegisterMovementKernels(KernelTable& table);
void RegisterReduceKernels(KernelTable& table);
void RegisterMiscKernels(KernelTable& table);
// constant, parameter, custom_call, optimization_barrier (interpreter.cc).
void RegisterDriverKernels(KernelTable& table);

// ---------------------------------------------------------------------------------------------
// Element types. Each tag names an element's storage type and the type arithmetic is done in
// (bf16 and f16 compute in float and round back to nearest even on store).

struct F32 {
  using Storage = float;
  using Compute = float;
  static float Load(float s) { return s; }
  static float Store(float c) { return c; }
};
struct F64 {
  using Storage = double;
  using Compute = double;
  static double Load(double s) { return s; }
  static double Store(double c) { return c; }
};
struct BF16 {
  using Storage = uint16_t;
  using Compute = float;
  static float Load(uint16_t s) { return BF16ToFloat(s); }
  static uint16_t Store(float c) { return FloatToBF16(c); }
};
struct F16 {
  using Storage = uint16_t;
  using Compute = float;
  static float Load(uint16_t s) { return F16ToFloat(s); }
  static uint16_t Store(float c) { return FloatToF16(c); }
};
template <typename I>
struct Int {
  using Storage = I;
  using Compute = I;
  static I Load(I s) { return s; }
  static I Store(I c) { return c; }
};
struct Bool {
  using Storage = uint8_t;
  using Compute = bool;
  static bool Load(uint8_t s) { return s != 0; }
  static uint8_t Store(bool c) { return c ? 1 : 0; }
};

// Element i of `lit`, in E's compute type. memcpy keeps the access free of aliasing questions.
template <typename E>
typename E::Compute Get(const Literal& lit, int64_t i) {
  typename E::Storage s;
  std::memcpy(&s, lit.bytes().data() + i * static_cast<int64_t>(sizeof(s)), sizeof(s));
  return E::Load(s);
}
template <typename E>
void Put(Literal& lit, int64_t i, typename E::Compute c) {
  typename E::Storage s = E::Store(c);
  std::memcpy(lit.mutable_bytes().data() + i * static_cast<int64_t>(sizeof(s)), &s, sizeof(s));
}

// Calls f(tag) with the element tag of `t`, restricted to floats / integers / integers and bool /
// numeric types; any other dtype is an internal error (the shape rules exclude it).
template <typename F>
decltype(auto) VisitFloat(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f(F32{});
    case DType::kF64: return f(F64{});
    case DType::kBF16: return f(BF16{});
    case DType::kF16: return f(F16{});
    default: Fail("internal error: {} is not a float type", DTypeName(t));
  }
}
template <typename F>
decltype(auto) VisitInteger(DType t, F&& f) {
  switch (t) {
    case DType::kI8: return f(Int<int8_t>{});
    case DType::kI32: return f(Int<int32_t>{});
    case DType::kI64: return f(Int<int64_t>{});
    case DType::kU8: return f(Int<uint8_t>{});
    case DType::kU32: return f(Int<uint32_t>{});
    default: Fail("internal error: {} is not an integer type", DTypeName(t));
  }
}
template <typename F>
decltype(auto) VisitIntOrBool(DType t, F&& f) {
  if (t == DType::kBool) return f(Bool{});
  return VisitInteger(t, std::forward<F>(f));
}
template <typename F>
decltype(auto) VisitNumeric(DType t, F&& f) {
  if (IsFloat(t)) return VisitFloat(t, std::forward<F>(f));
  return VisitInteger(t, std::forward<F>(f));
}
template <typename F>
decltype(auto) VisitAny(DType t, F&& f) {
  if (IsFloat(t)) return VisitFloat(t, std::forward<F>(f));
  return VisitIntOrBool(t, std::forward<F>(f));
}

// ---------------------------------------------------------------------------------------------
// Scalar semantics shared by several kernels.

// max / min of two values (ir/scalar_ops.h): NaN when either is NaN, +0 above -0.
using scalar::Max;
using scalar::Min;

// Element i of a float literal as a double (exact), or of an integer/bool literal as an int64
// (u32 zero-extends, bool is 0/1).
double LoadDouble(const Literal& lit, int64_t i);
int64_t LoadInt(const Literal& lit, int64_t i);
// Stores `v` into float element i rounding once to nearest even (f64 -> bf16/f16 does not round
// through f32; see Note [Single rounding]).
void StoreDouble(Literal& lit, int64_t i, double v);
// Stores integer `v` as `convert` would: wraps (two's complement truncation) into integer types,
// rounds once to nearest even into float types, v != 0 into bool.
void StoreInt(Literal& lit, int64_t i, int64_t v);
// Stores `v` as `convert` from a float would into an integer or bool element: truncation toward
// zero saturating at the type's range, NaN -> 0; bool is v != 0 (NaN -> true).
void StoreFloatToIntOrBool(Literal& lit, int64_t i, double v);

// ---------------------------------------------------------------------------------------------
// Indexing helpers (row-major).

// Advances `index` to the next position in row-major order within `dims`; false after the last.
bool NextIndex(std::vector<int64_t>& index, const std::vector<int64_t>& dims);
// Calls f(index, flat) for every index of `dims` in row-major order (none when a dim is 0; once,
// with an empty index, for a scalar).
template <typename F>
void ForEachIndex(const std::vector<int64_t>& dims, F&& f) {
  for (int64_t d : dims)
    if (d == 0) return;
  std::vector<int64_t> index(dims.size(), 0);
  int64_t flat = 0;
  do {
    f(static_cast<const std::vector<int64_t>&>(index), flat++);
  } while (NextIndex(index, dims));
}
// Flat offset of `index` under row-major `strides`.
int64_t Offset(const std::vector<int64_t>& index, const std::vector<int64_t>& strides);
// Copies element `from` of `src` into element `to` of `dst` (same dtype).
inline void CopyElement(const Literal& src, int64_t from, Literal& dst, int64_t to) {
  const size_t w = static_cast<size_t>(DTypeSize(src.dtype()));
  std::memcpy(dst.mutable_bytes().data() + static_cast<size_t>(to) * w,
              src.bytes().data() + static_cast<size_t>(from) * w, w);
}
// The part of `x` with index in [start, start + size) along `dim`.
Literal SliceAlong(const Literal& x, int64_t dim, int64_t start, int64_t size);
// Concatenation of `parts` (same dtype, equal outside `dim`) along `dim`.
Literal ConcatAlong(const std::vector<const Literal*>& parts, int64_t dim);

// One result.
inline std::vector<Literal> One(Literal lit) {
  std::vector<Literal> out;
  out.push_back(std::move(lit));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Accumulation shared by reduce, all_reduce and reduce_scatter. See Note [Accumulation] in
// interpreter_reduce.cc.
class Accumulator {
 public:
  Accumulator(ReduceKind kind, DType dtype);
  // Combines element i of `lit` (of the accumulator's dtype) into the running value.
  void Add(const Literal& lit, int64_t i);
  // Stores the running value (the identity when nothing was added) into element i of `out`.
  void Store(Literal& out, int64_t i) const;

 private:
  ReduceKind kind_;
  DType dtype_;
  bool is_float_;
  bool any_ = false;  // whether anything was added
  double f_ = 0;   // floats: sums and products in double, max/min exact
  int64_t i_ = 0;  // integers and bool: wrapping arithmetic on the two's complement bits
};

}  // namespace axle::ir::interp
