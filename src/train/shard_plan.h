// `axle shard-plan`: what each sharding plan of a training step costs on a mesh, computed without
// running it and for meshes larger than the machine (docs/spmd.md, "axle shard-plan").
//
//   ShardPlanOptions o;  o.config = "124m";  o.mesh_shape = "2x4";
//   ShardPlanReport r = PlanShardings(o);
//   std::cout << r.text;                    // the table; r.plans[i].cost for the figures
//
// The step (forward, backward, clipping, AdamW: the one `axle train` runs) is traced once over
// placeholder weights (frontend/inspect.h), so a plan for GPT-2 124M on 256 devices needs no
// weights in memory. Each plan marks the parameters, their AdamW moments and the batch as
// `axle train --mesh` would; propagation and the partitioner then make the per-device program,
// whose collectives, compute and memory spmd::EvaluatePartitioned prices with the cost model
// calibrated on this machine (frontend/calibrate.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "spmd/auto_shard.h"
#include "spmd/cost_model.h"
#include "spmd/plan_cost.h"

namespace axle::train {

struct ShardPlanOptions {
  std::string model = "auto";  // gpt2 | llama | auto (config.json's family with `init`, else gpt2)
  std::string config = "small";
  std::string init;            // a Hugging Face directory: its config.json (no weights are read)
  int64_t batch = 8;
  int64_t seq = 64;
  std::string precision = "fp32";
  std::string mesh_shape = "8";  // "2x4": the devices and the shape of the two-axis plans
  std::string plan;              // print each parameter's sharding under this plan ("fsdp x tp", "auto")
  bool calibrate = true;         // false: CostModel::Default()
  // The auto plan (spmd/auto_shard.h) beside the manual ones: its memory bound per device
  // (arguments: parameters, optimizer state, batch; 0 = none), solver and time limit.
  bool auto_plan = true;
  int64_t memory_bound_bytes = 0;
  bool use_ilp = true;
  double time_limit_s = 30;
};

struct PlanResult {
  std::string name;  // "dp", "fsdp", "tp", "dp x tp", "fsdp x tp", "dp x fsdp", "auto"
  std::string mesh;  // "fsdp=2,tp=4"; the auto plan's axes are x and y
  spmd::PlanCost cost;
  std::optional<spmd::AutoShardReport> solver;  // the auto plan's
  std::vector<std::pair<std::string, std::string>> parameter_shardings;  // name -> "{[fsdp], [tp]}"
};

struct ShardPlanReport {
  std::vector<PlanResult> plans;  // in the order above, those the mesh shape allows, then auto
  spmd::CostModel model;
  std::string text;  // what `axle shard-plan` prints
};

// Throws axle::Error naming the flag on a bad mesh shape, batch or model.
ShardPlanReport PlanShardings(const ShardPlanOptions& options);

}  // namespace axle::train
