// Auto-sharding: the compiler chooses a sharding for every value of a step (docs/spmd.md,
// "Auto-sharding"; XLA's auto-sharding pass and Alpa's intra-operator pass, Zheng et al. 2022).
//
//   module.set_mesh(ir::Mesh({"x", "y"}, {2, 4}));
//   spmd::AutoShardReport r = spmd::AutoShard(module, cost_model, {.memory_bound_bytes = int64_t{2} << 30});
//   spmd::PropagateShardings(module);  // checks; fills partial-sum axes
//   auto local = spmd::Partition(module);
//
// The program: every value of the entry function has a few candidate shardings (each mesh axis on
// one dimension it divides, or on none). A node's strategy is its result's sharding plus, for
// dot_general and sum reductions, the mesh axes its contracted dims are split over (the partial
// sum is then completed: an all-reduce, or a reduce-scatter into a result split over that axis).
// The operands a strategy needs come from the op's sharding rule (sharding_rules.h, backward).
// Costs (cost_model.h): a strategy's compute (flops or bytes over its shards) and its
// collective; each value pays, once per layout its users need, the all-gather or all-to-all that
// makes it (slicing is free), as the partitioner reshards a value once for all such users. The
// integer program picks one strategy per node at least total cost, with the parameters' and
// optimizer state's bytes per device under the memory bound, and the user's annotations fixed.
//
// To keep it small: an elementwise node shares its largest operand's variable (it follows it);
// values whose neighbourhoods are the same to depth 3 (the same op of each layer of a model) share
// one variable, so twelve identical layers are decided once; an updated parameter shares its
// parameter's variable (`tied`), so the state keeps its layout from step to step.
//
// The solver is CBC (coinor-libcbc3, loaded at run time), in a child process killed at the time
// limit, started from the best of the other candidates. The program is an approximation of what
// the partitioner does (it completes partial sums at once, and tied values share a layout), so
// its answer is one candidate: with a greedy pass and plans derived from the program's structure
// (data parallel, fully sharded, and on a mesh of several axes the state sharded over some of
// them with the data over all: hybrid sharding; each also as propagation leaves it), every
// candidate is propagated, partitioned and priced (plan_cost.h), and the cheapest within the
// bound is applied.
// The report names it and each candidate's price.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "spmd/cost_model.h"

namespace axle::spmd {

struct AutoShardOptions {
  // Per device: the bytes of the step's arguments (parameters, optimizer state, batch) at most;
  // 0 = no bound.
  int64_t memory_bound_bytes = 0;
  double time_limit_s = 30;
  bool use_ilp = true;  // false: the greedy alone
  // (result index, parameter index) pairs that must share a sharding: a parameter and its
  // updated value.
  std::vector<std::pair<int64_t, int64_t>> tied;
  // Plans to price with the same program (the manual ones, propagated: modules of the same
  // nodes with every value's sharding), each reported as a line of `reference`.
  std::vector<std::pair<std::string, const ir::Module*>> references;
  // Keep, in the report, the annotated modules of the candidates whose partitioned price is
  // within this fraction of the chosen one's (at most `max_alternatives`, cheapest first, each
  // with layouts of its own), for a caller to time on its devices. 0: none.
  double alternatives_within = 0;
  int max_alternatives = 2;
};

struct AutoShardReport {
  std::string solver;         // "CBC, optimal" | "CBC, time limit" | "greedy (why)"
  double solve_s = 0;         // the solver alone
  double total_s = 0;         // building the program too
  int64_t nodes = 0;          // of the entry function
  int64_t variable_sets = 0;  // decisions after following and tying
  int64_t columns = 0;        // ILP variables (0 for the greedy)
  int64_t rows = 0;
  double objective_s = 0;     // the program's cost of the choice
  double evaluated_s = 0;     // the choice's partitioned program, priced (plan_cost.h)
  std::string chosen;         // which candidate won: "ILP", "greedy", a seed's or a reference's name
  std::vector<std::string> candidates;  // each candidate's evaluated and program cost
  int64_t argument_bytes = 0; // per device, under the choice
  bool memory_bound_met = true;
  // The smallest argument bytes per device any choice reaches (every value split as far as it
  // goes), for the error when the bound cannot be met.
  int64_t smallest_argument_bytes = 0;
  // Per reference plan: "fsdp: 0.0412 s in this program; 3 values disagree ...".
  std::vector<std::string> reference;
  // (name, annotated module, partitioned price) of the runners-up AutoShardOptions asked for.
  struct Alternative {
    std::string name;
    std::shared_ptr<const ir::Module> module;
    double evaluated_s = 0;
  };
  std::vector<Alternative> alternatives;
};

// Gives every value of module.entry() a sharding (values annotated before keep theirs). Throws
// axle::Error when the module has no mesh or is partitioned, and when the memory bound is below
// what any choice reaches (naming the smallest).
AutoShardReport AutoShard(ir::Module& module, const CostModel& model, const AutoShardOptions& options);

}  // namespace axle::spmd
