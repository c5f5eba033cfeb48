#include "spmd/shard_util.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace axle::spmd {

int64_t BlockSize(int64_t size, int64_t n) { return n <= 1 ? size : (size + n - 1) / n; }

ir::Sharding NormalizeSharding(const std::optional<ir::Sharding>& s, int64_t rank, const ir::Mesh& mesh) {
  ir::Sharding out;
  out.dims.resize(static_cast<size_t>(rank));
  if (!s) return out;
  if (static_cast<int64_t>(s->dims.size()) != rank && !(s->dims.empty() && rank == 0))
    Fail("sharding {} has {} dims for a value of rank {}", s->ToString(), s->dims.size(), rank);
  std::set<std::string> seen;
  auto keep = [&](const std::string& axis) {
    if (!seen.insert(axis).second) Fail("sharding {} uses mesh axis '{}' twice", s->ToString(), axis);
    return mesh.AxisSize(axis) > 1;  // throws naming the mesh's axes when it has no such axis
  };
  for (size_t d = 0; d < s->dims.size(); ++d)
    for (const std::string& a : s->dims[d])
      if (keep(a)) out.dims[d].push_back(a);
  for (const std::string& a : s->partial)
    if (keep(a)) out.partial.push_back(a);
  return out;
}

Shape LocalShape(const Shape& global, const ir::Sharding& s, const ir::Mesh& mesh) {
  std::vector<int64_t> dims = global.dims();
  for (size_t d = 0; d < dims.size() && d < s.dims.size(); ++d) dims[d] = BlockSize(dims[d], mesh.AxesSize(s.dims[d]));
  return Shape(std::move(dims));
}

namespace {

// Calls fn(local_flat, global_flat) for every local element of `device`'s shard that is not padding.
template <typename Fn>
void ForEachShardElement(const Shape& global, const ir::Sharding& s, const ir::Mesh& mesh, int64_t device, Fn fn) {
  const int64_t rank = global.rank();
  Shape local = LocalShape(global, s, mesh);
  if (local.NumElements() == 0) return;
  std::vector<int64_t> offset(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    offset[d] = s.dims[d].empty() ? 0 : mesh.ShardIndex(device, s.dims[d]) * local.dim(d);
  std::vector<int64_t> gstrides = global.Strides();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t flat = 0, n = local.NumElements(); flat < n; ++flat) {
    int64_t g = 0;
    bool valid = true;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t gi = offset[d] + idx[d];
      if (gi >= global.dim(d)) valid = false;
      g += gi * gstrides[d];
    }
    if (valid) fn(flat, g);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < local.dim(d)) break;
      idx[d] = 0;
    }
  }
}

ir::Sharding CheckedFull(const ir::Sharding& s, const ir::TensorType& type, const ir::Mesh& mesh, const char* what) {
  ir::Sharding n = NormalizeSharding(s, type.rank(), mesh);
  if (!n.partial.empty())
    Fail("{}: sharding {} of {} has partial axes; only fully reduced values can be split or assembled", what,
         s.ToString(), type.ToString());
  return n;
}

}  // namespace

ir::Literal ShardLiteral(const ir::Literal& global, const ir::Sharding& s, const ir::Mesh& mesh, int64_t device) {
  ir::Sharding n = CheckedFull(s, global.type(), mesh, "ShardLiteral");
  if (device < 0 || device >= mesh.size()) Fail("ShardLiteral: device {} is not in mesh {}", device, mesh.ToString());
  ir::Literal out(ir::TensorType(global.dtype(), LocalShape(global.shape(), n, mesh)));
  const int64_t es = DTypeSize(global.dtype());
  const uint8_t* src = global.bytes().data();
  uint8_t* dst = out.mutable_bytes().data();
  ForEachShardElement(global.shape(), n, mesh, device,
                      [&](int64_t l, int64_t g) { std::memcpy(dst + l * es, src + g * es, static_cast<size_t>(es)); });
  return out;
}

ir::Literal AssembleLiteral(const std::vector<ir::Literal>& shards, const ir::Sharding& s, const ir::Mesh& mesh,
                            const ir::TensorType& global) {
  ir::Sharding n = CheckedFull(s, global, mesh, "AssembleLiteral");
  if (static_cast<int64_t>(shards.size()) != mesh.size())
    Fail("AssembleLiteral: {} shards for mesh {} of {} devices", shards.size(), mesh.ToString(), mesh.size());
  ir::TensorType local(global.dtype, LocalShape(global.shape, n, mesh));
  ir::Literal out(global);
  const int64_t es = DTypeSize(global.dtype);
  uint8_t* dst = out.mutable_bytes().data();
  std::vector<bool> written(static_cast<size_t>(global.NumElements()), false);
  for (int64_t k = 0; k < mesh.size(); ++k) {
    if (shards[k].type() != local)
      Fail("AssembleLiteral: device {}'s shard is {}, expected {} (global {} with sharding {})", k,
           shards[k].type().ToString(), local.ToString(), global.ToString(), s.ToString());
    const uint8_t* src = shards[k].bytes().data();
    ForEachShardElement(global.shape, n, mesh, k, [&](int64_t l, int64_t g) {
      if (written[g]) return;
      written[g] = true;
      std::memcpy(dst + g * es, src + l * es, static_cast<size_t>(es));
    });
  }
  return out;
}

}  // namespace axle::spmd
