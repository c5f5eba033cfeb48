// VJP rules of the data-movement ops: broadcast, reshape, transpose, slice, pad, concatenate,
// reverse, dynamic_slice, dynamic_update_slice, gather, scatter_add.
//
// Notation: x = operand 0, g = the result's cotangent.
#include <algorithm>

#include "autodiff/vjp_internal.h"

namespace axle::autodiff::internal {
namespace {

using ir::CompareDir;
using G = std::span<Value* const>;

Value* X(const Node& n, int i = 0) { return n.operand(static_cast<size_t>(i)); }

// broadcast_in_dim: sum g over the result dims that are not operand dims, and over the operand
// dims of size 1 that were broadcast; then reshape to the operand's shape (restoring the 1s).
Cotangents BroadcastInDimVjp(Builder& b, const Node& n, G g) {
  const auto& dims = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
  const Shape& in = X(n)->shape();
  const Shape& out = n.result()->shape();
  std::vector<int64_t> summed;
  for (int64_t d = 0; d < out.rank(); ++d) {
    auto it = std::find(dims.begin(), dims.end(), d);
    if (it == dims.end()) {
      summed.push_back(d);
    } else {
      const int64_t i = it - dims.begin();
      if (in.dim(i) == 1 && out.dim(d) != 1) summed.push_back(d);
    }
  }
  Value* s = ReduceSum(b, g[0], summed);
  if (s->shape() != in) s = b.Reshape(s, in);
  return {s};
}

// reshape: g reshaped back.
Cotangents ReshapeVjp(Builder& b, const Node& n, G g) { return {b.Reshape(g[0], X(n)->shape())}; }

// transpose(perm): g transposed by the inverse permutation.
Cotangents TransposeVjp(Builder& b, const Node& n, G g) {
  return {b.Transpose(g[0], InversePermutation(n.attrs_as<ir::TransposeAttrs>().perm))};
}

// slice: g padded with zeros back into x's shape: low = start, interior = stride - 1, high = the
// rest. An empty slice gives zeros. The zeros are -0.0, the additive identity (x + -0 is x for
// every x, -0 included): the gradients of slices that split a tensor are summed, and simplify's
// add-adjacent-pads turns that sum of pads into one concatenate only when the padding is -0.
Cotangents SliceVjp(Builder& b, const Node& n, G g) {
  const auto& s = n.attrs_as<ir::SliceAttrs>();
  const Shape& in = X(n)->shape();
  const Shape& out = n.result()->shape();
  if (out.NumElements() == 0) return {Zeros(b, X(n)->type())};
  ir::PadAttrs p;
  for (int64_t i = 0; i < in.rank(); ++i) {
    const int64_t last = s.start[i] + (out.dim(i) - 1) * s.strides[i];  // last element read
    p.low.push_back(s.start[i]);
    p.interior.push_back(s.strides[i] - 1);
    p.high.push_back(in.dim(i) - 1 - last);
  }
  return {b.Build1(OpKind::kPad, {g[0], ScalarConst(b, g[0]->dtype(), -0.0)}, std::move(p))};
}

// pad(x, v){low, high, interior}: undo the edge padding with the negated amounts (which also
// restores cropped positions as zeros: their elements were dropped, so their gradient is 0), then
// take every (interior + 1)-th element. The padding value receives everything else:
// g_v = sum(g) - sum(g_x).
Cotangents PadVjp(Builder& b, const Node& n, G g) {
  const auto& p = n.attrs_as<ir::PadAttrs>();
  const Shape& in = X(n)->shape();
  Value* gx;
  if (in.NumElements() == 0) {
    gx = Zeros(b, X(n)->type());
  } else {
    ir::PadAttrs un{{}, {}, {}};
    ir::SliceAttrs s;
    for (int64_t i = 0; i < in.rank(); ++i) {
      un.low.push_back(-p.low[i]);
      un.high.push_back(-p.high[i]);
      un.interior.push_back(0);
      s.start.push_back(0);
      s.limit.push_back(in.dim(i) + (in.dim(i) - 1) * p.interior[i]);
      s.strides.push_back(p.interior[i] + 1);
    }
    Value* uncropped =
        b.Build1(OpKind::kPad, {g[0], ScalarConst(b, g[0]->dtype(), 0.0)}, std::move(un));
    gx = b.Build1(OpKind::kSlice, {uncropped}, std::move(s));
  }
  Value* gv = b.Sub(SumAll(b, g[0]), SumAll(b, gx));
  return {gx, gv};
}

// concatenate: operand k receives the slice of g at its offset along dim.
Cotangents ConcatenateVjp(Builder& b, const Node& n, G g) {
  const int64_t dim = n.attrs_as<ir::ConcatenateAttrs>().dim;
  const Shape& out = n.result()->shape();
  Cotangents r;
  int64_t offset = 0;
  for (Value* x : n.operands()) {
    ir::SliceAttrs s;
    for (int64_t i = 0; i < out.rank(); ++i) {
      s.start.push_back(i == dim ? offset : 0);
      s.limit.push_back(i == dim ? offset + x->shape().dim(i) : out.dim(i));
      s.strides.push_back(1);
    }
    offset += x->shape().dim(dim);
    r.push_back(b.Build1(OpKind::kSlice, {g[0]}, std::move(s)));
  }
  return r;
}

// reverse(dims): g reversed along the same dims.
Cotangents ReverseVjp(Builder& b, const Node& n, G g) {
  return {b.Build1(OpKind::kReverse, {g[0]}, n.attrs())};
}

// The start-index operands of a dynamic (update) slice, from operand `first` on.
std::vector<Value*> Starts(const Node& n, size_t first) {
  return std::vector<Value*>(n.operands().begin() + static_cast<int64_t>(first),
                             n.operands().end());
}

// dynamic_slice(x, s...): g written into zeros at the same (identically clamped) starts.
Cotangents DynamicSliceVjp(Builder& b, const Node& n, G g) {
  std::vector<Value*> ops = {Zeros(b, X(n)->type()), g[0]};
  for (Value* s : Starts(n, 1)) ops.push_back(s);
  Cotangents r(n.num_operands(), nullptr);
  r[0] = b.Build1(OpKind::kDynamicUpdateSlice, std::move(ops));
  return r;
}

// dynamic_update_slice(x, u, s...): x receives g with the updated window zeroed; u receives the
// window of g (dynamic_slice clamps the starts exactly as the update did).
Cotangents DynamicUpdateSliceVjp(Builder& b, const Node& n, G g) {
  Value* u = X(n, 1);
  std::vector<Value*> ops = {g[0], Zeros(b, u->type())};
  std::vector<Value*> slice_ops = {g[0]};
  for (Value* s : Starts(n, 2)) {
    ops.push_back(s);
    slice_ops.push_back(s);
  }
  Cotangents r(n.num_operands(), nullptr);
  r[0] = b.Build1(OpKind::kDynamicUpdateSlice, std::move(ops));
  r[1] = b.Build1(OpKind::kDynamicSlice, std::move(slice_ops),
                  ir::DynamicSliceAttrs{u->shape().dims()});
  return r;
}

// clamp(0, idx, size - 1) in idx's dtype: gather's reading position.
Value* ClampIndices(Builder& b, Value* idx, int64_t size) {
  return b.Build1(OpKind::kClamp, {ScalarConst(b, idx->dtype(), 0.0), idx,
                                   ScalarConst(b, idx->dtype(), static_cast<double>(size - 1))});
}

// gather(x, idx): g scatter-added into zeros at the positions gather read. gather clamps
// out-of-range indices while scatter_add drops them, so the indices are clamped first.
// One index per row along the last dim (every other dim a batch dim: a loss's target logit) is
// a one-hot select instead, g where the column is the row's index and 0 elsewhere: elementwise,
// so fusion folds it into its reader, where the scatter wrote a zero-filled [rows, classes]
// buffer (GPT-2 small's logits: 1 MB filled and then scattered into, every step). The values
// are the scatter's (g, or 0), but for the sign of a zero g.
Cotangents GatherVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::GatherAttrs>();
  Value* x = X(n);
  if (x->shape().dim(a.axis) == 0 || g[0]->type().NumElements() == 0)
    return {Zeros(b, x->type()), nullptr};
  Value* idx = ClampIndices(b, X(n, 1), x->shape().dim(a.axis));
  const int64_t rank = x->type().rank();
  if (a.axis == rank - 1 && a.batch_dims == a.axis && idx->type().rank() == rank && idx->shape().dim(a.axis) == 1) {
    std::vector<int64_t> all(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) all[static_cast<size_t>(d)] = d;
    Value* column = b.Iota(ir::TensorType(idx->dtype(), x->shape()), a.axis);
    Value* hit = Cmp(b, CompareDir::kEq, column, Broadcast(b, idx, x->shape(), all));
    return {b.Select(hit, Broadcast(b, g[0], x->shape(), all), Zeros(b, x->type())), nullptr};
  }
  return {b.Build1(OpKind::kScatterAdd, {Zeros(b, x->type()), idx, g[0]}, a), nullptr};
}

// scatter_add(x, idx, u): x receives g; u receives gather(g, idx), zeroed where the index was out
// of range (scatter_add dropped those updates).
Cotangents ScatterAddVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::GatherAttrs>();
  Value* idx = X(n, 1);
  Value* u = X(n, 2);
  const int64_t size = X(n)->shape().dim(a.axis);
  if (size == 0 || u->type().NumElements() == 0) return {g[0], nullptr, Zeros(b, u->type())};
  Value* gathered = b.Build1(OpKind::kGather, {g[0], idx}, a);
  Value* in_range =
      b.Binary(OpKind::kAnd, Cmp(b, CompareDir::kGe, idx, Full(b, idx->type(), 0.0)),
               Cmp(b, CompareDir::kLt, idx, Full(b, idx->type(), static_cast<double>(size))));
  // indices dim k maps to updates dim k (batch dims) or axis + k - batch_dims.
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < idx->type().rank(); ++k)
    dims.push_back(k < a.batch_dims ? k : a.axis + k - a.batch_dims);
  Value* mask = Broadcast(b, in_range, u->shape(), dims);
  return {g[0], nullptr, b.Select(mask, gathered, Zeros(b, u->type()))};
}

}  // namespace

void RegisterMovementVjps(VjpTable& t) {
  SetRule(t, OpKind::kBroadcastInDim, BroadcastInDimVjp);
  SetRule(t, OpKind::kReshape, ReshapeVjp);
  SetRule(t, OpKind::kTranspose, TransposeVjp);
  SetRule(t, OpKind::kSlice, SliceVjp);
  SetRule(t, OpKind::kDynamicSlice, DynamicSliceVjp);
  SetRule(t, OpKind::kDynamicUpdateSlice, DynamicUpdateSliceVjp);
  SetRule(t, OpKind::kPad, PadVjp);
  SetRule(t, OpKind::kConcatenate, ConcatenateVjp);
  SetRule(t, OpKind::kReverse, ReverseVjp);
  SetRule(t, OpKind::kGather, GatherVjp);
  SetRule(t, OpKind::kScatterAdd, ScatterAddVjp);
}

}  // namespace axle::autodiff::internal
