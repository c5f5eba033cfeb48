// The SPMD partitioner: turns a global program whose values carry shardings into the program
// every device runs on its local shards, with the collectives it needs (docs/spmd.md,
// "Partitioning"; GSPMD's partitioner, Xu et al. 2021).
//
//   module @m {mesh_axes=[x], mesh_shape=[2]} {               module @m {num_replicas=2, mesh_...} {
//     func @main {                                             func @main {
//       %a = parameter() {index=0} : f32[4,8]{[], [x]}   ==>     %a = parameter() {index=0} : f32[4,4]
//       %b = parameter() {index=1} : f32[8,2]{[x], []}           %b = parameter() {index=1} : f32[4,2]
//       %c = dot_general(%a, %b) {...} : f32[4,2]                %0 = dot_general(%a, %b) {...} : f32[4,2]
//       return %c                                                %c = all_reduce(%0) {kind=sum, groups=[[0, 1]]}
//
// The layout of a shard is spmd/shard_util.h's: equal blocks of ceil(size / n), padding at the end.
#pragma once

#include <memory>

#include "ir/builder.h"
#include "ir/mesh.h"
#include "ir/module.h"
#include "passes/pass.h"

namespace axle::spmd {

// The per-device program of `global`'s entry function. `global` must be verified, have a mesh and
// num_replicas 1; a value without a sharding is replicated. The result has the same name and mesh,
// num_replicas = mesh size, local types, no shardings, and only the (partitioned) entry function.
// Parameter i of the result takes each device's ShardLiteral of global argument i in
// ParameterSharding(global, i); result j is each device's shard of global result j in
// ResultSharding(global, j) (AssembleLiteral rebuilds it): the returned value's sharding without
// its partial axes, since a returned partial sum is completed (all_reduce) at the return.
// Throws axle::Error for: no mesh, num_replicas != 1, a parameter with partial axes, a collective
// or replica_id in the global program, a sharding that does not fit its value.
std::unique_ptr<ir::Module> Partition(const ir::Module& global);

// The layouts of the partitioned program's parameters and results (normalized: one entry per dim,
// mesh axes of size 1 dropped, no partial axes), for ShardLiteral / AssembleLiteral.
ir::Sharding ParameterSharding(const ir::Module& global, int64_t index);
ir::Sharding ResultSharding(const ir::Module& global, int64_t index);

// Appends to `b` the ops that turn `local` (a shard, in sharding `from`, of a global value of type
// `global`) into the shard in sharding `to`, and returns it (`local` itself when nothing changes).
// partial -> full: all_reduce (reduce_scatter when `to` splits a dim over the reduced axes);
// sharded -> replicated: all_gather (+ slice off the padding); replicated -> sharded: a local
// dynamic_slice at an offset derived from replica_id; full -> partial: zero on all but one device.
// An axis moving from one dim to another, when both dims divide evenly, is one all_to_all.
ir::Value* Reshard(ir::Builder& b, const ir::Mesh& mesh, ir::Value* local, const ir::TensorType& global,
                   const ir::Sharding& from, const ir::Sharding& to);

// The pass "spmd-partition": replaces the module by Partition(module) (registered by
// spmd::RegisterPasses, spmd/passes.h).
std::unique_ptr<passes::Pass> CreatePartitionPass();

}  // namespace axle::spmd
