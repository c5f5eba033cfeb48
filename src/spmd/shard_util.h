// Shard layout helpers: how a global tensor with a Sharding is split over a device mesh
// (docs/spmd.md, "Partitioning").
//
// Dimension d of size S sharded over axes A (n = mesh.AxesSize(A) devices) is cut into n blocks of
// ceil(S / n) elements; device k holds block mesh.ShardIndex(k, A). When n does not divide S the
// last blocks run past the end: those positions are padding (ShardLiteral fills them with zeros;
// the partitioned program keeps them but never lets them reach a valid element).
//
//   Mesh mesh({"x"}, {2});
//   Sharding s{{{"x"}, {}}, {}};                         // f32[7,3]{[x], []}
//   Literal shard = ShardLiteral(global, s, mesh, 1);    // f32[4,3]: rows 4..6 and one zero row
//   Literal back = AssembleLiteral(shards, s, mesh, global.type());
#pragma once

#include <optional>
#include <vector>

#include "ir/literal.h"
#include "ir/mesh.h"
#include "ir/type.h"

namespace axle::spmd {

// ceil(size / n): the block a dimension of `size` split into n parts holds per device.
int64_t BlockSize(int64_t size, int64_t n);

// `s` (nullopt = replicated) as a sharding with exactly `rank` dims and without axes of size 1
// (they do not split anything). Throws axle::Error when `s` has another number of dims, names an
// axis the mesh lacks, or uses an axis twice.
ir::Sharding NormalizeSharding(const std::optional<ir::Sharding>& s, int64_t rank, const ir::Mesh& mesh);

// The per-device shape of a tensor of `global` shape with sharding `s` (normalized or not).
Shape LocalShape(const Shape& global, const ir::Sharding& s, const ir::Mesh& mesh);

// Device `device`'s local shard of `global` (padding positions are zero). Throws axle::Error when
// `s` has partial axes (only fully reduced values can be split) or does not fit the mesh.
ir::Literal ShardLiteral(const ir::Literal& global, const ir::Sharding& s, const ir::Mesh& mesh, int64_t device);

// The global tensor of type `global` from every device's shard (shards[k] = device k's, each of
// the local shape): the inverse of ShardLiteral. Replicated copies are taken from the first device
// holding them; padding is dropped. Throws axle::Error on partial axes, a wrong shard count or type.
ir::Literal AssembleLiteral(const std::vector<ir::Literal>& shards, const ir::Sharding& s, const ir::Mesh& mesh,
                            const ir::TensorType& global);

}  // namespace axle::spmd
