// Measures the cost model's figures (spmd/cost_model.h) on this machine and transport, once per
// build and mesh shape: the result is kept in the on-disk cache (docs/spmd.md, "The cost model").
//
//   spmd::CostModel m = detail::CalibratedCostModel({2, 4}, /*devices_sharing_cores=*/8);
//
// What is measured:
//   products: a 1024 x 1024 x 1024 f32 dot_general on the current backend, whole machine (best
//     of three);
//   memory:   an elementwise add of 8 M f32, result bytes per second (best of three);
//   collectives: every kind over in-process virtual devices, for each group size the mesh's axes
//     make (each axis, pairs of axes, all devices), with every device of the mesh (at most 16) in
//     some group at once, at 256 KB and 4 MB per device, each as a chain of collectives with work
//     between them run by the per-op executor, less the same chain without them (the better of
//     two runs); alpha and beta solved from the two sizes with the ring formulas of
//     cost_model.h.
// Virtual devices in one process share its cores, so each device's throughputs are the machine's
// divided by `devices_sharing_cores`. In a run of several processes the collectives are measured
// across them on the run's transport (Gloo), every process taking part, and every process takes
// process 0's figures (and process 0's kept ones, when it has them). On GPUs (NCCL) that is not
// done yet.
#pragma once

#include <cstdint>

#include <vector>
#include "spmd/cost_model.h"

namespace axle::detail {

// The calibrated model for a mesh of `mesh_shape` (from the disk cache when this build measured it
// before; AXLE_CACHE=0 measures every time). Takes seconds: about 60 small programs run.
spmd::CostModel CalibratedCostModel(const std::vector<int64_t>& mesh_shape, int64_t devices_sharing_cores);

}  // namespace axle::detail
