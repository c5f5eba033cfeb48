// A device mesh: the logical N-d arrangement of devices that shardings refer to (docs/ir.md,
// "Meshes"; PyTorch/XLA's xs.Mesh, JAX's jax.sharding.Mesh).
//
//   Mesh mesh({"dp", "tp"}, {2, 4});            // devices 0..7, row-major: tp is the minor axis
//   mesh.AxisSize("tp")                         // 4
//   mesh.Coords(5)                              // {1, 1}
//   mesh.GroupsOver({"tp"})                     // [[0,1,2,3], [4,5,6,7]]
//
// device_ids[p] is the device (= replica id of a partitioned module) at row-major mesh position p;
// it is a permutation of 0..size-1 (the identity when not given). A module carries its mesh as
// module attributes: `module @m {mesh_axes=[dp,tp], mesh_shape=[2,4]}`, plus
// `mesh_devices=[...]` when the order is not the identity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/attrs.h"

namespace axle::ir {

class Mesh {
 public:
  Mesh() = default;
  // Throws axle::Error (naming the mesh) on: no axes, names and sizes of different lengths, an
  // empty or repeated axis name, a size < 1, device_ids not a permutation of 0..size-1.
  Mesh(std::vector<std::string> axis_names, std::vector<int64_t> shape, std::vector<int64_t> device_ids = {});

  const std::vector<std::string>& axis_names() const { return axis_names_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& device_ids() const { return device_ids_; }
  bool identity_order() const;
  int64_t size() const;  // number of devices
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }

  // Index of `axis`, or -1.
  int64_t AxisIndex(const std::string& axis) const;
  bool HasAxis(const std::string& axis) const { return AxisIndex(axis) >= 0; }
  // Size of `axis`; throws axle::Error listing the mesh's axes when it has none such.
  int64_t AxisSize(const std::string& axis) const;
  // The product of the sizes of `axes` (1 for none).
  int64_t AxesSize(const std::vector<std::string>& axes) const;

  // Mesh coordinates of `device` (one per axis) and the device at `coords`.
  std::vector<int64_t> Coords(int64_t device) const;
  int64_t DeviceAt(const std::vector<int64_t>& coords) const;
  // The index of `device` along `axes` taken together, major to minor (what a dimension sharded
  // over `axes` uses to pick its shard): sum over k of coord(axes[k]) * prod(sizes of axes[k+1..]).
  int64_t ShardIndex(int64_t device, const std::vector<std::string>& axes) const;

  // Replica groups of the devices that differ only in their coordinates along `axes` (each group
  // ordered by ShardIndex along `axes`; groups ordered by their first device's mesh position).
  // With no axes: every device alone.
  ReplicaGroups GroupsOver(const std::vector<std::string>& axes) const;

  // "[dp=2, tp=4]", with " devices=[...]" appended when the order is not the identity.
  std::string ToString() const;
  bool operator==(const Mesh&) const = default;

 private:
  std::vector<std::string> axis_names_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> device_ids_;  // row-major position -> device
  std::vector<int64_t> position_of_; // device -> row-major position
};

}  // namespace axle::ir
