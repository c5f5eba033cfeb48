// Helpers shared by the frontend's op files (tensor.cc, composite.cc, autograd.cc); defined in
// ops_internal.cc. Internal.
#pragma once
#include <string_view>

#include <memory>

#include "axle/autocast.h"
#include "axle/tensor.h"
#include "ir/module.h"

namespace axle::detail {

// `d` in [-rank, rank) made non-negative; throws naming `op` otherwise.
int64_t NormDim(int64_t d, int64_t rank, std::string_view op);
// Normalized, sorted, duplicate-free dims.
Dims NormDims(const Dims& dims, int64_t rank, std::string_view op);
// PyTorch-style promotion for the common cases.
DType Promote(DType a, DType b);
ir::Value* Cast(ir::Value* v, DType to);
// NumPy broadcasting of `v` to `shape` (trailing dims aligned).
ir::Value* BroadcastTo(ir::Value* v, DimsView shape);
// BroadcastTo for an operand of an elementwise op: one broadcast per (value, shape) in a trace
// (Note [Operand caches] in lazy.h). Never a tensor's own value.
ir::Value* BroadcastOperand(ir::Value* v, DimsView shape);
ir::Value* ScalarValue(DType dtype, double value);
// A constant `value` broadcast to `shape` (scalar + broadcast_in_dim: small in the IR).
ir::Value* Full(DimsView shape, DType dtype, double value);
// Full for an operand of an elementwise op (x * 0.9): one constant and broadcast per (dtype,
// value, shape) in a trace (Note [Operand caches]). Never a tensor's own value.
ir::Value* FullOperand(DimsView shape, DType dtype, double value);
// NumPy broadcasting of two shapes.
Dims BroadcastShapes(DimsView a, DimsView b);
// `reduced` reshaped so that the reduced `dims` of `in_shape` are kept as size 1.
ir::Value* KeepDims(ir::Value* reduced, DimsView in_shape, const Dims& dims);
// `t` cast as op's autocast policy says (include/axle/autocast.h): to the scope's half dtype, to
// f32, or unchanged (no scope, not floating, f64, or no cast needed). autocast.cc.
Tensor Autocast(const Tensor& t, std::string_view op);
// An f32 region (autocast(kFloat32, false)) for the inside of an op that applied its own policy:
// the ops it is built from cast nothing more.
struct AutocastOff {
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;
  std::unique_ptr<autocast> scope;
};
// matmul without its autocast cast (composite ops that applied their own policy: linear,
// attention).
Tensor MatMulNoCast(const Tensor& a, const Tensor& b);
// Metrics of host -> device copies.
void CountTransferToDevice(int64_t bytes);

}  // namespace axle::detail
