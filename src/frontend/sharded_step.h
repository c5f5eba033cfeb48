// Running a traced step whose values carry shardings (include/axle/spmd.h) on the process's
// virtual devices: sharding propagation, the partitioner, one compile of the per-device program,
// one ReplicatedExecutable step per Execute (docs/spmd.md, "Sharded steps").
#pragma once

#include <memory>

#include "ir/module.h"
#include "runtime/backend.h"
#include "runtime/collectives.h"

namespace axle::detail {

// When `global` has a mesh of more than one device: propagates its shardings (a copy), partitions
// it and compiles the per-device program with `backend`. The executable takes and returns global
// buffers: Execute splits each argument into its devices' shards (one shared buffer for a
// replicated one), runs the step on all devices and assembles each result from their shards.
// Returns nullptr when `global` needs no partitioning (no mesh, or a mesh of one device).
std::unique_ptr<runtime::Executable> CompileShardedStep(runtime::Backend& backend, const ir::Module& global);

// The collective counters of the last sharded step run by this process (summed over devices),
// and its per-device parameter bytes (for the training log).
runtime::CollectiveStats LastCollectiveStats();

}  // namespace axle::detail
