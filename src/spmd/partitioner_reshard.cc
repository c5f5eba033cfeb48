// Resharding: the ops that move a value from one sharding to another (partitioner.h, Reshard).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "spmd/partitioner.h"
#include "spmd/partitioner_internal.h"

namespace axle::spmd {
namespace internal {

using ir::Sharding;
using ir::TensorType;
using ir::Value;

double ReduceIdentity(ir::ReduceKind kind, DType dtype) {
  const bool fl = IsFloat(dtype);
  switch (kind) {
    case ir::ReduceKind::kSum: return fl ? -0.0 : 0;  // -0 + x is x for every float x, -0 included
    case ir::ReduceKind::kProd: return 1;
    case ir::ReduceKind::kOr: return 0;
    case ir::ReduceKind::kAnd:  // bitwise on integers: all ones
      if (IsBool(dtype)) return 1;
      return IsUnsigned(dtype) ? std::ldexp(1.0, BitWidth(dtype)) - 1 : -1;
    case ir::ReduceKind::kMax:
      if (fl) return -std::numeric_limits<double>::infinity();
      if (IsBool(dtype) || IsUnsigned(dtype)) return 0;
      return -std::ldexp(1.0, BitWidth(dtype) - 1);
    case ir::ReduceKind::kMin:
      if (fl) return std::numeric_limits<double>::infinity();
      if (IsBool(dtype)) return 1;
      return std::ldexp(1.0, BitWidth(dtype) - (IsUnsigned(dtype) ? 0 : 1)) - 1;
  }
  return 0;
}

Value* LocalBuilder::ShardIndex(const std::vector<std::string>& axes) {
  auto it = shard_index_.find(axes);
  if (it != shard_index_.end()) return it->second;
  if (!replica_id_) replica_id_ = b_.Build1(ir::OpKind::kReplicaId, {});
  std::vector<int32_t> table(static_cast<size_t>(mesh_.size()));
  for (int64_t d = 0; d < mesh_.size(); ++d) table[d] = static_cast<int32_t>(mesh_.ShardIndex(d, axes));
  Value* t = b_.Constant(ir::Literal::FromVector<int32_t>(DType::kI32, Shape{mesh_.size()}, table));
  Value* one = b_.Build1(ir::OpKind::kDynamicSlice, {t, replica_id_}, ir::DynamicSliceAttrs{{1}});
  Value* index = b_.Reshape(one, Shape{});
  shard_index_[axes] = index;
  return index;
}

Value* LocalBuilder::PerDevice(ir::Literal table) {
  AXLE_CHECK(table.shape().rank() == 1 && table.shape().dim(0) == mesh_.size(), "PerDevice: a table of {} for {} devices",
             table.shape().ToString(), mesh_.size());
  if (!replica_id_) replica_id_ = b_.Build1(ir::OpKind::kReplicaId, {});
  return b_.Build1(ir::OpKind::kDynamicSlice, {b_.Constant(std::move(table)), replica_id_}, ir::DynamicSliceAttrs{{1}});
}

Value* LocalBuilder::BlockOffset(const std::vector<std::string>& axes, int64_t size) {
  int64_t block = BlockSize(size, mesh_.AxesSize(axes));
  return b_.Mul(ShardIndex(axes), b_.Scalar(DType::kI32, static_cast<double>(block)));
}

Value* LocalBuilder::MaskPadding(Value* local, const TensorType& global, const Sharding& s,
                                 const std::vector<int64_t>& dims, double fill) {
  const Shape& shape = local->shape();
  Value* mask = nullptr;
  for (int64_t d : dims) {
    const std::vector<std::string>& axes = s.dims[d];
    const int64_t n = mesh_.AxesSize(axes);
    if (n <= 1 || global.shape.dim(d) % n == 0) continue;  // no padding on this dim
    Value* iota = b_.Iota(TensorType(DType::kI32, shape), d);
    Value* at = b_.Add(iota, b_.BroadcastInDim(BlockOffset(axes, global.shape.dim(d)), shape, {}));
    Value* limit = b_.BroadcastInDim(b_.Scalar(DType::kI32, static_cast<double>(global.shape.dim(d))), shape, {});
    Value* ok = b_.Compare(ir::CompareDir::kLt, at, limit);
    mask = mask ? b_.Binary(ir::OpKind::kAnd, mask, ok) : ok;
  }
  if (!mask) return local;
  Value* f = b_.BroadcastInDim(b_.Scalar(local->dtype(), fill), shape, {});
  return b_.Select(mask, local, f);
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& a) {
  return std::find(v.begin(), v.end(), a) != v.end();
}

// Axes of `a` not in `b`, in a's order.
std::vector<std::string> Minus(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& x : a)
    if (!Contains(b, x)) out.push_back(x);
  return out;
}

}  // namespace

Value* LocalBuilder::Reshard(Value* v, const TensorType& global, const Sharding& from_in, const Sharding& to_in) {
  const int64_t rank = global.rank();
  Sharding cur = NormalizeSharding(from_in, rank, mesh_);
  const Sharding to = NormalizeSharding(to_in, rank, mesh_);
  if (cur == to) return v;
  const Shape& gs = global.shape;
  auto n_of = [&](const std::vector<std::string>& axes) { return mesh_.AxesSize(axes); };

  // 1. Pending partial sums that `to` does not keep: reduce_scatter into a dim `to` splits over
  //    some of those axes (when that dim is whole now), all_reduce over the rest.
  std::vector<std::string> reduce = Minus(cur.partial, to.partial);
  if (!reduce.empty()) {
    for (int64_t d = 0; d < rank; ++d) {
      const std::vector<std::string>& axes = to.dims[d];
      if (axes.empty() || !cur.dims[d].empty()) continue;
      if (!std::all_of(axes.begin(), axes.end(), [&](const std::string& a) { return Contains(reduce, a); })) continue;
      const int64_t n = n_of(axes), block = BlockSize(gs.dim(d), n);
      if (block * n != gs.dim(d)) {  // pad with zeros to n equal chunks
        std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
        high[d] = block * n - gs.dim(d);
        v = b_.Build1(ir::OpKind::kPad, {v, b_.Scalar(v->dtype(), 0)}, ir::PadAttrs{low, high, interior});
      }
      v = b_.Build1(ir::OpKind::kReduceScatter, {v}, ir::ReduceScatterAttrs{ir::ReduceKind::kSum, d, Groups(axes)});
      cur.dims[d] = axes;
      reduce = Minus(reduce, axes);
      break;
    }
    if (!reduce.empty())
      v = b_.Build1(ir::OpKind::kAllReduce, {v}, ir::AllReduceAttrs{ir::ReduceKind::kSum, Groups(reduce)});
    std::vector<std::string> kept;
    for (const std::string& a : cur.partial)
      if (Contains(to.partial, a)) kept.push_back(a);
    cur.partial = kept;
  }

  // 2a. An axis list moving whole from dim i to dim j, both dividing evenly: one all_to_all.
  for (int64_t i = 0; i < rank; ++i) {
    if (cur.dims[i].empty() || !to.dims[i].empty()) continue;
    for (int64_t j = 0; j < rank; ++j) {
      if (j == i || !cur.dims[j].empty() || to.dims[j] != cur.dims[i]) continue;
      const int64_t n = n_of(cur.dims[i]);
      if (gs.dim(i) % n != 0 || gs.dim(j) % n != 0) continue;
      v = b_.Build1(ir::OpKind::kAllToAll, {v}, ir::AllToAllAttrs{j, i, Groups(cur.dims[i])});
      cur.dims[j] = cur.dims[i];
      cur.dims[i].clear();
      break;
    }
  }

  // 2b. A dim split over [a, b] that `to` splits over [a] only, when it divides evenly: gather over
  //     b alone (the b-blocks of one a-block are contiguous).
  for (int64_t d = 0; d < rank; ++d) {
    const auto& c = cur.dims[d];
    const auto& t = to.dims[d];
    if (t.empty() || c.size() <= t.size() || !std::equal(t.begin(), t.end(), c.begin()) || gs.dim(d) % n_of(c) != 0)
      continue;
    std::vector<std::string> minor(c.begin() + static_cast<int64_t>(t.size()), c.end());
    v = b_.Build1(ir::OpKind::kAllGather, {v}, ir::AllGatherAttrs{d, Groups(minor)});
    cur.dims[d] = t;
  }

  // 2c. Every other dim whose sharding changes: gather it whole (dropping the padding) ...
  auto extendable = [&](int64_t d) {  // split over [a] now, over [a, b] in `to`, evenly
    const auto& c = cur.dims[d];
    const auto& t = to.dims[d];
    return !c.empty() && t.size() > c.size() && std::equal(c.begin(), c.end(), t.begin()) && gs.dim(d) % n_of(t) == 0;
  };
  bool cropped = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (cur.dims[d] == to.dims[d] || cur.dims[d].empty() || extendable(d)) continue;
    v = b_.Build1(ir::OpKind::kAllGather, {v}, ir::AllGatherAttrs{d, Groups(cur.dims[d])});
    cropped = cropped || v->shape().dim(d) != gs.dim(d);
    cur.dims[d].clear();
  }
  if (cropped) {
    std::vector<int64_t> limit = v->shape().dims();
    for (int64_t d = 0; d < rank; ++d)
      if (cur.dims[d].empty()) limit[d] = gs.dim(d);
    v = b_.Build1(ir::OpKind::kSlice, {v},
                  ir::SliceAttrs{std::vector<int64_t>(rank, 0), limit, std::vector<int64_t>(rank, 1)});
  }
  // ... then a dim split over [a] that `to` splits over [a, b], dividing evenly, cuts its b-block
  // out of its a-block (after the gathers: b may have been in use on another dim) ...
  for (int64_t d = 0; d < rank; ++d) {
    if (!extendable(d)) continue;
    const auto& c = cur.dims[d];
    const auto& t = to.dims[d];
    std::vector<std::string> minor(t.begin() + static_cast<int64_t>(c.size()), t.end());
    const int64_t block = gs.dim(d) / n_of(t);
    std::vector<int64_t> sizes = v->shape().dims();
    sizes[d] = block;
    Value* zero = b_.Scalar(DType::kI32, 0);
    std::vector<Value*> operands{v};
    for (int64_t k = 0; k < rank; ++k)
      operands.push_back(k == d ? b_.Mul(ShardIndex(minor), b_.Scalar(DType::kI32, static_cast<double>(block))) : zero);
    v = b_.Build1(ir::OpKind::kDynamicSlice, operands, ir::DynamicSliceAttrs{sizes});
    cur.dims[d] = t;
  }
  // ... and cut this device's block out of each dim `to` splits (padded to whole blocks first).
  std::vector<int64_t> split;
  for (int64_t d = 0; d < rank; ++d)
    if (cur.dims[d] != to.dims[d]) split.push_back(d);
  if (!split.empty()) {
    std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0), sizes = v->shape().dims();
    bool pad = false;
    for (int64_t d : split) {
      const int64_t n = n_of(to.dims[d]), block = BlockSize(gs.dim(d), n);
      high[d] = block * n - gs.dim(d);
      pad = pad || high[d] != 0;
      sizes[d] = block;
    }
    if (pad) v = b_.Build1(ir::OpKind::kPad, {v, b_.Scalar(v->dtype(), 0)}, ir::PadAttrs{low, high, interior});
    std::vector<Value*> operands{v};
    Value* zero = nullptr;
    for (int64_t d = 0; d < rank; ++d) {
      if (std::find(split.begin(), split.end(), d) != split.end()) {
        operands.push_back(BlockOffset(to.dims[d], gs.dim(d)));
      } else {
        if (!zero) zero = b_.Scalar(DType::kI32, 0);
        operands.push_back(zero);
      }
    }
    v = b_.Build1(ir::OpKind::kDynamicSlice, operands, ir::DynamicSliceAttrs{sizes});
    for (int64_t d : split) cur.dims[d] = to.dims[d];
  }

  // 3. Partial axes `to` adds: the full value on the devices at index 0 along them, zeros elsewhere
  //    (-0 for floats: the sum then gives back every value bitwise, -0 included).
  std::vector<std::string> add = Minus(to.partial, cur.partial);
  if (!add.empty()) {
    Value* first = b_.Compare(ir::CompareDir::kEq, ShardIndex(add), b_.Scalar(DType::kI32, 0));
    Value* pred = b_.BroadcastInDim(first, v->shape(), {});
    Value* zeros = b_.BroadcastInDim(b_.Scalar(v->dtype(), ReduceIdentity(ir::ReduceKind::kSum, v->dtype())),
                                     v->shape(), {});
    v = b_.Select(pred, v, zeros);
  }
  return v;
}

}  // namespace internal

ir::Value* Reshard(ir::Builder& b, const ir::Mesh& mesh, ir::Value* local, const ir::TensorType& global,
                   const ir::Sharding& from, const ir::Sharding& to) {
  internal::LocalBuilder lb(b, mesh);
  return lb.Reshard(local, global, from, to);
}

}  // namespace axle::spmd
