// Shared by the VJP rule files: the table type, the per-family registration functions and small
// builders for the values rules need (zeros, masks, sums). Not a public header.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "autodiff/vjp.h"
#include "ir/builder.h"

namespace axle::autodiff::internal {

using ir::Builder;
using ir::Node;
using ir::OpKind;
using ir::Value;
using Cotangents = std::vector<Value*>;
using VjpTable = std::array<VjpEntry, ir::kNumOps>;

// Each family file fills its ops' entries.
void RegisterElementwiseVjps(VjpTable& t);
void RegisterMovementVjps(VjpTable& t);
void RegisterReduceVjps(VjpTable& t);
void RegisterMiscVjps(VjpTable& t);

inline void SetRule(VjpTable& t, OpKind k, VjpRule rule) {
  t[static_cast<size_t>(k)] = VjpEntry{VjpKind::kRule, rule, {}};
}
inline void SetZero(VjpTable& t, OpKind k, std::string_view reason) {
  t[static_cast<size_t>(k)] = VjpEntry{VjpKind::kZeroGradient, nullptr, reason};
}
inline void SetNotDifferentiable(VjpTable& t, OpKind k, std::string_view reason) {
  t[static_cast<size_t>(k)] = VjpEntry{VjpKind::kNotDifferentiable, nullptr, reason};
}

// A scalar constant of `dtype`.
Value* ScalarConst(Builder& b, DType dtype, double v);
// A value of `type` with every element `v` (a broadcast scalar constant).
Value* Full(Builder& b, const ir::TensorType& type, double v);
inline Value* Zeros(Builder& b, const ir::TensorType& type) { return Full(b, type, 0.0); }
// Full(x's type, v).
inline Value* FullLike(Builder& b, Value* x, double v) { return Full(b, x->type(), v); }
Value* Neg(Builder& b, Value* x);
Value* Cmp(Builder& b, ir::CompareDir dir, Value* lhs, Value* rhs);
// select(pred, 1, 0) of `like`'s type: a 0/1 float mask.
Value* Mask(Builder& b, Value* pred, Value* like);
Value* ReduceSum(Builder& b, Value* x, std::vector<int64_t> dims);
// Sums every dim of x (a scalar); x itself when it is already a scalar.
Value* SumAll(Builder& b, Value* x);
// The cotangent `g` of a value broadcast from a scalar or from `x`'s shape: g summed to a scalar
// when `operand` is a scalar, else g itself (clamp's and select's scalar operands).
Value* SumToOperand(Builder& b, Value* g, Value* operand);
// broadcast_in_dim(x) into `shape`, keeping x's dtype.
Value* Broadcast(Builder& b, Value* x, const Shape& shape, std::vector<int64_t> dims);
// The dims of a rank-`rank` value that are not in `removed`, in order.
std::vector<int64_t> KeptDims(int64_t rank, const std::vector<int64_t>& removed);
// The inverse of permutation `perm`.
std::vector<int64_t> InversePermutation(const std::vector<int64_t>& perm);
// Whether a gradient may flow into `v` (a float value).
inline bool CarriesGradient(const Value* v) { return IsFloat(v->dtype()); }

}  // namespace axle::autodiff::internal
