// Internals of auto-sharding (auto_shard.h), shared by its two files: auto_shard_program.cc
// builds the program (variables, options, costs, reshards) from a module, auto_shard.cc solves it
// and chooses among the candidates.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "spmd/auto_shard.h"
#include "spmd/cost_model.h"

namespace axle::spmd::auto_shard_detail {

using ir::Sharding;

// The mesh's axes of more than one device, in mesh order.
std::vector<std::string> SplitAxes(const ir::Mesh& mesh);

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};


// ---------------------------------------------------------------------------------------------
// The program.

// One option of a variable set: the sharding of its values (an index into the candidates) and
// the axes its contractions are split over (a partial sum completed by a collective).
struct Option {
  int k = 0;
  std::vector<std::string> partial;
};

struct VarSet {
  int root = 0;                      // the union-find root value
  std::vector<Sharding> cand;        // candidates of its values' shape
  std::vector<Option> options;
  std::vector<double> cost;          // per option, seconds (compute and collectives)
  std::vector<double> arg_bytes;     // per option: the parameters' bytes per device
  std::optional<int> fixed_k;        // an annotation
  int64_t first_node = 0;            // program order
};

// Resharding, as the partitioner does it: each value is resharded once per layout its users
// need, however many users need it. A value of set u has users (sets v) whose options each need
// one of `reqs` (or nothing); for the layouts needed under a choice, u's candidate k pays
// cost[k][r] each. Values with the same u, needs and users share one entry, `count` times.
struct Demand {
  int v = 0;
  std::vector<int> need;  // per option of v: an index into reqs, or -1
};
struct Reshard {
  int u = 0;
  std::vector<Sharding> reqs;
  std::vector<std::vector<double>> cost;  // [candidate of u][req]
  std::vector<Demand> demands;
  double count = 0;
};

class Program {
 public:
  Program(ir::Module& module, const CostModel& model, const AutoShardOptions& options)
      : module_(module), mesh_(*module.mesh()), model_(model), options_(options) {}

  AutoShardReport Run();

 private:
  int ValueId(const ir::Value* v) const { return value_id_.at(v); }
  VarSet& SetOf(const ir::Value* v) { return sets_[static_cast<size_t>(set_of_root_.at(uf_.Find(ValueId(v))))]; }
  int SetIndex(const ir::Value* v) { return set_of_root_.at(uf_.Find(ValueId(v))); }
  const std::vector<Sharding>& Candidates(const Shape& shape);
  void BuildGroups();
  void BuildCosts();
  // Records that user set `v`, under option b, needs operand value `x` laid out `need[b]`.
  void AddDemand(const ir::Value* x, int v, const std::vector<std::optional<Sharding>>& need);
  void BuildReshards();
  double ReshardCost(const Reshard& r, const std::vector<int>& choice) const;
  double ComputeSeconds(const ir::Node& n, const Sharding& result) const;
  std::optional<std::vector<int>> SolveIlp(AutoShardReport& report, const std::vector<int>& start);
  std::vector<int> SolveGreedy();
  double Objective(const std::vector<int>& choice) const;
  void BuildTouching();
  double LocalCost(size_t set, size_t option, std::vector<int>& choice) const;
  // The choice that gives the values `plan`'s shardings (a module of the same nodes), each
  // contraction then split as its neighbours make cheapest; counts the values it cannot follow.
  std::vector<int> ChoiceOf(const ir::Module& plan, int* disagree, int* missing);
  // Plans a user would write, from the program's structure (see Run).
  std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> Seeds() const;
  // The values' shardings under `choice`, written into `m` (a module of the same nodes).
  void Apply(const std::vector<int>& choice, ir::Module& m) const;
  double ArgumentBytes(const std::vector<int>& choice) const;

  ir::Module& module_;
  const ir::Mesh& mesh_;
  const CostModel& model_;
  const AutoShardOptions& options_;
  std::vector<ir::Value*> values_;
  std::unordered_map<const ir::Value*, int> value_id_;
  mutable UnionFind uf_{0};  // Find compresses paths
  std::map<std::vector<int64_t>, std::vector<Sharding>> candidates_;
  std::vector<VarSet> sets_;
  std::unordered_map<int, int> set_of_root_;
  std::unordered_map<int, std::vector<std::pair<int, std::vector<std::optional<Sharding>>>>> demands_;  // by value id
  std::vector<Reshard> reshards_;
  std::vector<std::vector<const Reshard*>> touching_;  // per set: the reshards it takes part in
  std::unordered_set<const ir::Node*> fused_;           // computed in their user's kernel: free
};


}  // namespace axle::spmd::auto_shard_detail
