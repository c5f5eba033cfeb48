// Shared by the partitioner's files: the builder of the per-device program with its caches.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/mesh.h"
#include "spmd/shard_util.h"

namespace axle::spmd::internal {

class LocalBuilder {
 public:
  LocalBuilder(ir::Builder& b, const ir::Mesh& mesh) : b_(b), mesh_(mesh) {}
  ir::Builder& b() { return b_; }
  const ir::Mesh& mesh() const { return mesh_; }

  // i32[]: this device's index along `axes` (Mesh::ShardIndex), from replica_id and a constant table.
  ir::Value* ShardIndex(const std::vector<std::string>& axes);
  // i32[]: where this device's block of a dim of `size` sharded over `axes` starts.
  ir::Value* BlockOffset(const std::vector<std::string>& axes, int64_t size);
  // [1]: this device's entry of `table` (one element per device of the mesh), by replica_id.
  ir::Value* PerDevice(ir::Literal table);
  // `local` (shard of `global` in `s`) with every padding position along `dims` replaced by `fill`.
  ir::Value* MaskPadding(ir::Value* local, const ir::TensorType& global, const ir::Sharding& s,
                         const std::vector<int64_t>& dims, double fill);
  // The ops of spmd::Reshard (partitioner.h).
  ir::Value* Reshard(ir::Value* local, const ir::TensorType& global, const ir::Sharding& from, const ir::Sharding& to);

  ir::ReplicaGroups Groups(const std::vector<std::string>& axes) const { return mesh_.GroupsOver(axes); }

 private:
  ir::Builder& b_;
  const ir::Mesh& mesh_;
  ir::Value* replica_id_ = nullptr;
  std::map<std::vector<std::string>, ir::Value*> shard_index_;
};

// The identity of `kind` for `dtype`, as a double Literal::Splat converts (used to mask padding).
double ReduceIdentity(ir::ReduceKind kind, DType dtype);

}  // namespace axle::spmd::internal
