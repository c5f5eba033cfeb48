// Helpers shared by the frontend's op files (tensor.cc, composite.cc, autograd.cc). Internal.
#pragma once
#include <string_view>

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
ir::Value* BroadcastTo(ir::Value* v, const Dims& shape);
ir::Value* ScalarValue(DType dtype, double value);
// A constant `value` broadcast to `shape` (scalar + broadcast_in_dim: small in the IR).
ir::Value* Full(const Dims& shape, DType dtype, double value);
// `reduced` reshaped so that the reduced `dims` of `in_shape` are kept as size 1.
ir::Value* KeepDims(ir::Value* reduced, const Dims& in_shape, const Dims& dims);
// Metrics of host -> device copies.
void CountTransferToDevice(int64_t bytes);

}  // namespace axle::detail
