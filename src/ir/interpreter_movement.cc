// Interpreter kernels of the data-movement ops: broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, pad, concatenate, reverse, gather, scatter_add; and the
// indexing helpers other kernels share.
#include <algorithm>

#include "ir/interpreter_internal.h"

namespace axle::ir::interp {

bool NextIndex(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (size_t k = index.size(); k-- > 0;) {
    if (++index[k] < dims[k]) return true;
    index[k] = 0;
  }
  return false;
}

int64_t Offset(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t k = 0; k < index.size(); ++k) off += index[k] * strides[k];
  return off;
}

Literal SliceAlong(const Literal& x, int64_t dim, int64_t start, int64_t size) {
  std::vector<int64_t> dims = x.shape().dims();
  dims[static_cast<size_t>(dim)] = size;
  Literal out(TensorType(x.dtype(), Shape(dims)));
  const std::vector<int64_t> strides = x.shape().Strides();
  ForEachIndex(dims, [&](const std::vector<int64_t>& idx, int64_t flat) {
    std::vector<int64_t> from = idx;
    from[static_cast<size_t>(dim)] += start;
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return out;
}

Literal ConcatAlong(const std::vector<const Literal*>& parts, int64_t dim) {
  std::vector<int64_t> dims = parts[0]->shape().dims();
  dims[static_cast<size_t>(dim)] = 0;
  for (const Literal* p : parts) dims[static_cast<size_t>(dim)] += p->shape().dim(dim);
  Literal out(TensorType(parts[0]->dtype(), Shape(dims)));
  const std::vector<int64_t> strides = out.shape().Strides();
  int64_t offset = 0;
  for (const Literal* p : parts) {
    ForEachIndex(p->shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
      std::vector<int64_t> to = idx;
      to[static_cast<size_t>(dim)] += offset;
      CopyElement(*p, flat, out, Offset(to, strides));
    });
    offset += p->shape().dim(dim);
  }
  return out;
}

namespace {

std::vector<Literal> BroadcastInDimKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& bdims = node.attrs_as<BroadcastInDimAttrs>().dims;
  Literal out(node.result()->type());
  const std::vector<int64_t> strides = x.shape().Strides();
  std::vector<int64_t> from(bdims.size());
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < bdims.size(); ++i)
      from[i] = x.shape().dim(static_cast<int64_t>(i)) == 1 ? 0 : idx[static_cast<size_t>(bdims[i])];
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return One(std::move(out));
}

std::vector<Literal> ReshapeKernel(const Node& node, Operands ops, const ReplicaContext&) {
  Literal out(node.result()->type());
  const auto src = ops[0]->bytes();
  if (!src.empty()) std::memcpy(out.mutable_bytes().data(), src.data(), src.size());
  return One(std::move(out));
}

std::vector<Literal> TransposeKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& perm = node.attrs_as<TransposeAttrs>().perm;
  Literal out(node.result()->type());
  const std::vector<int64_t> strides = x.shape().Strides();
  std::vector<int64_t> from(perm.size());
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < perm.size(); ++i) from[static_cast<size_t>(perm[i])] = idx[i];
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return One(std::move(out));
}

std::vector<Literal> SliceKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& s = node.attrs_as<SliceAttrs>();
  Literal out(node.result()->type());
  const std::vector<int64_t> strides = x.shape().Strides();
  std::vector<int64_t> from(s.start.size());
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < from.size(); ++i) from[i] = s.start[i] + idx[i] * s.strides[i];
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return One(std::move(out));
}

// Start indices (operands first..) clamped so that a window of `sizes` fits in `dims`, as XLA.
std::vector<int64_t> ClampedStarts(Operands ops, size_t first, const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    starts[i] = std::clamp<int64_t>(LoadInt(*ops[first + i], 0), 0, dims[i] - sizes[i]);
  return starts;
}

std::vector<Literal> DynamicSliceKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& sizes = node.attrs_as<DynamicSliceAttrs>().sizes;
  const std::vector<int64_t> starts = ClampedStarts(ops, 1, x.shape().dims(), sizes);
  Literal out(node.result()->type());
  const std::vector<int64_t> strides = x.shape().Strides();
  std::vector<int64_t> from(starts.size());
  ForEachIndex(sizes, [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < from.size(); ++i) from[i] = starts[i] + idx[i];
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return One(std::move(out));
}

std::vector<Literal> DynamicUpdateSliceKernel(const Node&, Operands ops, const ReplicaContext&) {
  const Literal& update = *ops[1];
  Literal out = *ops[0];
  const std::vector<int64_t> starts =
      ClampedStarts(ops, 2, out.shape().dims(), update.shape().dims());
  const std::vector<int64_t> strides = out.shape().Strides();
  std::vector<int64_t> to(starts.size());
  ForEachIndex(update.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < to.size(); ++i) to[i] = starts[i] + idx[i];
    CopyElement(update, flat, out, Offset(to, strides));
  });
  return One(std::move(out));
}

// Each operand element lands at low + i * (interior + 1); positions outside the result (negative
// low/high crop) are dropped; everything else is the padding value.
std::vector<Literal> PadKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& p = node.attrs_as<PadAttrs>();
  Literal out(node.result()->type());
  for (int64_t i = 0; i < out.NumElements(); ++i) CopyElement(*ops[1], 0, out, i);
  const std::vector<int64_t>& out_dims = out.shape().dims();
  const std::vector<int64_t> strides = out.shape().Strides();
  std::vector<int64_t> to(out_dims.size());
  ForEachIndex(x.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t i = 0; i < to.size(); ++i) {
      to[i] = p.low[i] + idx[i] * (p.interior[i] + 1);
      if (to[i] < 0 || to[i] >= out_dims[i]) return;
    }
    CopyElement(x, flat, out, Offset(to, strides));
  });
  return One(std::move(out));
}

std::vector<Literal> ConcatenateKernel(const Node& node, Operands ops, const ReplicaContext&) {
  std::vector<const Literal*> parts(ops.begin(), ops.end());
  return One(ConcatAlong(parts, node.attrs_as<ConcatenateAttrs>().dim));
}

std::vector<Literal> ReverseKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& rdims = node.attrs_as<ReverseAttrs>().dims;
  Literal out(node.result()->type());
  const std::vector<int64_t> strides = x.shape().Strides();
  ForEachIndex(x.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    std::vector<int64_t> from = idx;
    for (int64_t d : rdims) from[static_cast<size_t>(d)] = x.shape().dim(d) - 1 - idx[static_cast<size_t>(d)];
    CopyElement(x, Offset(from, strides), out, flat);
  });
  return One(std::move(out));
}

// The index arithmetic shared by gather and scatter_add. A position of the gathered shape
// [operand dims < axis] ++ [indices dims >= batch_dims] ++ [operand dims > axis] reads
// indices[its first batch_dims dims ++ its middle dims] and operand[its first axis dims ++ that
// index ++ its last dims].
struct GatherMap {
  GatherMap(const Literal& x, const Literal& indices, const GatherAttrs& g)
      : axis(g.axis), batch(g.batch_dims), num_idx(indices.shape().rank() - g.batch_dims),
        axis_size(x.shape().dim(g.axis)), x_strides(x.shape().Strides()),
        idx_strides(indices.shape().Strides()) {}

  // The index value at gathered position `pos`.
  int64_t IndexAt(const Literal& indices, const std::vector<int64_t>& pos) const {
    int64_t off = 0;
    for (int64_t k = 0; k < batch; ++k) off += pos[static_cast<size_t>(k)] * idx_strides[static_cast<size_t>(k)];
    for (int64_t k = 0; k < num_idx; ++k)
      off += pos[static_cast<size_t>(axis + k)] * idx_strides[static_cast<size_t>(batch + k)];
    return LoadInt(indices, off);
  }
  // The operand offset of gathered position `pos` reading operand row `row` along the axis.
  int64_t OperandOffset(const std::vector<int64_t>& pos, int64_t row) const {
    int64_t off = row * x_strides[static_cast<size_t>(axis)];
    for (int64_t k = 0; k < axis; ++k) off += pos[static_cast<size_t>(k)] * x_strides[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(axis) + 1; k < x_strides.size(); ++k)
      off += pos[k + static_cast<size_t>(num_idx) - 1] * x_strides[k];
    return off;
  }

  int64_t axis, batch, num_idx, axis_size;
  std::vector<int64_t> x_strides, idx_strides;
};

// Out-of-range indices are clamped to [0, size - 1], as XLA.
std::vector<Literal> GatherKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const Literal& indices = *ops[1];
  const GatherMap map(x, indices, node.attrs_as<GatherAttrs>());
  Literal out(node.result()->type());
  if (out.NumElements() > 0 && map.axis_size == 0)
    Fail("gather reads {} elements along axis {} of size 0", out.NumElements(), map.axis);
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& pos, int64_t flat) {
    const int64_t row = std::clamp<int64_t>(map.IndexAt(indices, pos), 0, map.axis_size - 1);
    CopyElement(x, map.OperandOffset(pos, row), out, flat);
  });
  return One(std::move(out));
}

// Updates are added in row-major order (so duplicates accumulate, rounding after each add);
// out-of-range indices (negative or >= size) are skipped, as XLA.
std::vector<Literal> ScatterAddKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& indices = *ops[1];
  const Literal& updates = *ops[2];
  Literal out = *ops[0];
  const GatherMap map(out, indices, node.attrs_as<GatherAttrs>());
  VisitNumeric(out.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::Compute;
    ForEachIndex(updates.shape().dims(), [&](const std::vector<int64_t>& pos, int64_t flat) {
      const int64_t row = map.IndexAt(indices, pos);
      if (row < 0 || row >= map.axis_size) return;
      const int64_t at = map.OperandOffset(pos, row);
      const T a = Get<E>(out, at), b = Get<E>(updates, flat);
      if constexpr (std::is_floating_point_v<T>)
        Put<E>(out, at, a + b);
      else
        Put<E>(out, at, static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)));
    });
  });
  return One(std::move(out));
}

}  // namespace

void RegisterMovementKernels(KernelTable& table) {
  auto set = [&](OpKind k, LocalKernel f) { table[static_cast<size_t>(k)].local = f; };
  set(OpKind::kBroadcastInDim, BroadcastInDimKernel);
  set(OpKind::kReshape, ReshapeKernel);
  set(OpKind::kTranspose, TransposeKernel);
  set(OpKind::kSlice, SliceKernel);
  set(OpKind::kDynamicSlice, DynamicSliceKernel);
  set(OpKind::kDynamicUpdateSlice, DynamicUpdateSliceKernel);
  set(OpKind::kPad, PadKernel);
  set(OpKind::kConcatenate, ConcatenateKernel);
  set(OpKind::kReverse, ReverseKernel);
  set(OpKind::kGather, GatherKernel);
  set(OpKind::kScatterAdd, ScatterAddKernel);
}

}  // namespace axle::ir::interp
