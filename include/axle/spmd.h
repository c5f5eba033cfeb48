// SPMD from the user's side (docs/spmd.md, "The API"): a device mesh, sharding annotations on
// tensors, and the shardings the compiler propagates -- PyTorch/XLA's torch_xla.distributed.spmd
// (xs.Mesh, xs.mark_sharding) and JAX's Mesh / PartitionSpec, in C++.
//
//   axle::spmd::Mesh mesh({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}, {"fsdp", "tp"});
//   axle::spmd::set_global_mesh(mesh);
//   axle::spmd::mark_sharding(w, mesh, {"fsdp", "tp"});        // dim 0 over fsdp, dim 1 over tp
//   axle::spmd::mark_sharding(x, mesh, {{"fsdp", "tp"}, {}});   // dim 0 over both, dim 1 replicated
//   axle::Tensor h = x.matmul(w);
//   axle::spmd::sharding_of(h);          // {[fsdp,tp], [], partial=[fsdp]}... before anything runs
//   std::cout << axle::spmd::visualize_sharding(w);
//
// A partition spec has one entry per tensor dimension (fewer entries: the trailing dimensions are
// replicated, as in JAX); each entry is a mesh axis name, several names (the dimension is split
// over their product, the first major), or {} / nullptr (replicated: PyTorch/XLA's None).
//
// Annotations are part of the program: they enter the traced IR as value shardings, propagate
// through the pending graph (sharding_of shows the result for any tensor, before sync()), and
// change the compiled step's cache key. A sharded step computes exactly what the unsharded one
// computes.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "axle/tensor.h"
#include "ir/mesh.h"
#include "ir/type.h"

namespace axle::spmd {

// One entry of a partition spec: the mesh axes one tensor dimension is split over.
struct Axes {
  Axes() = default;                  // replicated
  Axes(std::nullptr_t) {}            // replicated (PyTorch/XLA's None)
  Axes(const char* axis) : names{axis} {}
  Axes(std::string axis) : names{std::move(axis)} {}
  Axes(std::initializer_list<std::string> axes) : names(axes) {}
  std::vector<std::string> names;
};
using PartitionSpec = std::vector<Axes>;

// "('fsdp', None, ('dp', 'tp'))": a spec as a PyTorch/XLA user writes it (error messages).
std::string SpecString(const PartitionSpec& spec);

// A logical N-d arrangement of devices with named axes. device_ids[p] is the device at row-major
// mesh position p (the last axis is minor), as xs.Mesh(device_ids, mesh_shape, axis_names).
class Mesh {
 public:
  // Throws axle::Error on an impossible mesh (names and shape of different lengths, an axis
  // named twice, a size < 1, device ids not a permutation of 0..n-1).
  Mesh(std::vector<int64_t> device_ids, std::vector<int64_t> mesh_shape, std::vector<std::string> axis_names);
  // Devices 0..n-1 in order.
  Mesh(std::vector<int64_t> mesh_shape, std::vector<std::string> axis_names);

  int64_t size() const { return mesh_.size(); }
  const std::vector<int64_t>& shape() const { return mesh_.shape(); }
  const std::vector<std::string>& axis_names() const { return mesh_.axis_names(); }
  const std::vector<int64_t>& device_ids() const { return mesh_.device_ids(); }
  const ir::Mesh& ir_mesh() const { return mesh_; }
  std::string ToString() const { return mesh_.ToString(); }
  bool operator==(const Mesh&) const = default;

 private:
  ir::Mesh mesh_;
};

// The mesh mark_sharding(t, spec) uses. Throws when the mesh's size is not the number of devices
// (AXLE_CPU_DEVICES / flags::set_cpu_devices).
void set_global_mesh(const Mesh& mesh);
// The global mesh, or nullptr.
const Mesh* get_global_mesh();
void clear_global_mesh();

// Annotates `t` with `spec` over `mesh`. The annotation holds for the tensor's current value
// and, for a materialized tensor (a parameter, say), for every later step that reads it. Throws
// axle::Error naming the tensor and the spec when the spec is impossible: an axis the mesh does
// not have, an axis used twice, more entries than the tensor has dimensions, a mesh whose size is
// not the number of devices, or a tensor already traced with a different mesh. Returns `t`.
const Tensor& mark_sharding(const Tensor& t, const Mesh& mesh, const PartitionSpec& spec);
// On the global mesh; throws when there is none.
const Tensor& mark_sharding(const Tensor& t, const PartitionSpec& spec);
// Gives `t` the annotation `like` has (its mesh and layout; nothing when `like` has none), for
// state kept beside a tensor of the same shape: an optimizer's moments follow their parameter's
// sharding, as FSDP lays them out. Throws when the shapes differ. Returns `t`.
const Tensor& mark_sharding_like(const Tensor& t, const Tensor& like);

// The sharding of `t`: its annotation, or what propagation through the pending graph gives it
// (before anything executes). A tensor of a trace without any annotation is replicated.
ir::Sharding sharding_of(const Tensor& t);

// Auto-sharding (docs/spmd.md, "Auto-sharding"): from now on every step runs over `mesh` with the
// layout of each of its values chosen by the compiler -- an integer program over the strategies
// the op table allows, priced by a cost model measured on this machine (spmd/auto_shard.h) -- as
// PyTorch/XLA's auto-sharding does for a whole program. Annotations made with mark_sharding stay,
// as constraints; a value a step leaves on the devices is read in that layout by the next, so the
// parameters settle after the first step. Throws like set_global_mesh for a mesh that is not the
// process's devices.
struct AutoShardingOptions {
  int64_t memory_bound_bytes = 0;  // per device: parameters, optimizer state, batch (0: none)
  double time_limit_s = 30;        // the ILP solver's
  bool use_ilp = true;             // false: the greedy alone
  // Candidate plans the cost model prices within this fraction of the cheapest (at most two more)
  // are compiled and timed on the devices, and the fastest is kept: the model cannot tell such
  // ties apart. One process only (0: the model decides).
  double time_candidates_within = 0.10;
};
void auto_shard(const Mesh& mesh, const AutoShardingOptions& options = {});
// Ends auto-sharding (steps without annotations run on one device again).
void clear_auto_shard();
// The auto-sharding mesh and options, or nullptr.
const Mesh* get_auto_shard_mesh();
const AutoShardingOptions* get_auto_shard_options();

// The devices' pieces of `t` (running its step if it is pending): out[d] is device d's block, as
// laid out by its sharding, without padding (an uneven split leaves the last blocks smaller or
// empty), like jax.Array.addressable_shards. A tensor without a sharding is one piece.
std::vector<Tensor> local_shards(const Tensor& t);

// The global tensor of `shape` whose device d holds shards[d] (exactly its block of the layout
// `spec` over `mesh`, as local_shards returns it), like jax.make_array_from_single_device_arrays:
// sharded data loading, where each device loads only its slice of the batch. Nothing global is
// built; a step that reads the tensor in this layout takes the shards as they are. For a
// replicated dimension every device gives the whole of it (device 0's copy is used). Throws
// axle::Error naming the device on a wrong shard count, shape or dtype, and on the errors of
// mark_sharding.
Tensor from_local_shards(const std::vector<Tensor>& shards, const Dims& shape, const Mesh& mesh,
                         const PartitionSpec& spec);

// A text table of which devices hold which block of `t` (rank 0-2; higher ranks list blocks),
// like jax.debug.visualize_array_sharding:
//   f32[8,4] {[fsdp], [tp]} on mesh [fsdp=2, tp=2]
//             cols 0-1  cols 2-3
//   rows 0-3  device 0  device 1
//   rows 4-7  device 2  device 3
std::string visualize_sharding(const Tensor& t);

}  // namespace axle::spmd
