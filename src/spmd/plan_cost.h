// What a sharding plan costs per device and per step, read off the partitioned program the plan
// produces (docs/spmd.md, "The cost model"): `axle shard-plan` prints it for every plan, and the
// auto-sharding solver's choice is checked against it.
//
//   std::unique_ptr<ir::Module> local = spmd::Partition(global);   // after PropagateShardings
//   spmd::PlanCost c = spmd::EvaluatePartitioned(*local, model);
//   c.step_s();  c.collectives[0].bytes;  c.peak_bytes;
//
// Compute: each dot_general at its flops over the model's product throughput; every other op
// that makes data (not parameters, constants, reshapes, broadcasts, iotas) at its result's bytes
// over the memory bandwidth, as a fused kernel writes each result once -- and an elementwise op
// whose one use is an elementwise op of its shape not at all (loop fusion computes it inside its
// user's kernel). Collectives: the
// alpha-beta model (cost_model.h), each grouped by kind and the mesh axes its replica groups span.
// The step time is compute plus communication: nothing is assumed to overlap. Memory: the step's
// arguments (parameters, optimizer state, the batch) plus the most bytes of intermediate values
// live at once in program order, a reshape sharing its operand's buffer; the unfused program's
// figure, an upper bound on what fusion and the buffer planner arrive at.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/module.h"
#include "spmd/cost_model.h"

namespace axle::spmd {

struct CollectiveCost {
  Collective kind = Collective::kAllReduce;
  std::vector<std::string> axes;  // the mesh axes the groups span
  int64_t count = 0;              // collectives per step
  int64_t bytes = 0;              // bytes moved, summed (an all-gather's result, the others' operand)
  double seconds = 0;             // modelled
};

struct PlanCost {
  double compute_s = 0;
  double collective_s = 0;
  double flops = 0;  // per device
  std::vector<CollectiveCost> collectives;  // by kind, then axes
  int64_t argument_bytes = 0;  // per device: parameters, optimizer state, batch
  int64_t peak_bytes = 0;      // per device: arguments + the most intermediate bytes live at once
  double step_s() const { return compute_s + collective_s; }
  int64_t collective_count() const;
  int64_t collective_bytes() const;
};

// Whether an op makes no data of its own, and so costs nothing in the model: parameters,
// constants, reshapes, broadcasts, iotas, replica ids, optimization barriers (a fused kernel reads
// a broadcast operand in place and writes only its result).
bool MakesNoData(ir::OpKind op);

// The elementwise nodes of `fn` that loop fusion computes inside their user's kernel, never
// writing their result, and so cost nothing either: one result, used once (not returned), by an
// elementwise op of the same shape.
std::unordered_set<const ir::Node*> FusedIntoTheirUser(const ir::Function& fn);

// The cost of `partitioned` (spmd::Partition's output: num_replicas = its mesh's size; an
// unpartitioned module is one device) under `model`. Throws axle::Error when the module has no
// entry function.
PlanCost EvaluatePartitioned(const ir::Module& partitioned, const CostModel& model);

}  // namespace axle::spmd
