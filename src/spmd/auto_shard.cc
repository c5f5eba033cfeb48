#include "spmd/auto_shard.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "ir/op.h"
#include "spmd/partitioner.h"
#include "spmd/plan_cost.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"
#include "spmd/sharding_rules.h"

namespace axle::spmd {
namespace {

using Clock = std::chrono::steady_clock;
using ir::Sharding;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---------------------------------------------------------------------------------------------
// Candidates: every mesh axis (of more than one device) on one dimension it divides, or on none;
// a dimension's axes in mesh order. The replicated sharding first.

std::vector<Sharding> EnumerateShardings(const Shape& shape, const ir::Mesh& mesh) {
  const int64_t rank = shape.rank();
  std::vector<std::string> axes;
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (mesh.shape()[static_cast<size_t>(a)] > 1) axes.push_back(mesh.axis_names()[static_cast<size_t>(a)]);
  std::vector<Sharding> out;
  std::vector<int64_t> choice(axes.size(), -1);
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == axes.size()) {
      Sharding s = Replicated(rank);
      for (size_t k = 0; k < axes.size(); ++k)
        if (choice[k] >= 0) s.dims[static_cast<size_t>(choice[k])].push_back(axes[k]);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t n = mesh.AxesSize(s.dims[static_cast<size_t>(d)]);
        if (n > 1 && shape.dim(d) % n != 0) return;
      }
      out.push_back(std::move(s));
      return;
    }
    for (int64_t d = -1; d < rank; ++d) {
      choice[i] = d;
      rec(i + 1);
    }
  };
  rec(0);
  return out;
}

std::vector<std::string> SplitAxes(const ir::Mesh& mesh) {
  std::vector<std::string> axes;
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (mesh.shape()[static_cast<size_t>(a)] > 1) axes.push_back(mesh.axis_names()[static_cast<size_t>(a)]);
  return axes;
}

int DimOf(const Sharding& s, const std::string& axis) {
  for (size_t d = 0; d < s.dims.size(); ++d)
    if (std::find(s.dims[d].begin(), s.dims[d].end(), axis) != s.dims[d].end()) return static_cast<int>(d);
  return -1;
}

// Seconds to turn a value of `type` laid out `from` into `to`, as the partitioner does it (Reshard,
// partitioner.h): the axes that leave their dims in one all-gather over their devices together,
// the axes that move between dims in one all-to-all; where an axis joins a dim, each device
// slices what it holds, free.
double ReshardSeconds(const ir::TensorType& type, const Sharding& from, const Sharding& to, const ir::Mesh& mesh,
                      const CostModel& model) {
  if (from.dims == to.dims) return 0;
  const double local = static_cast<double>(type.ByteSize()) / static_cast<double>(NumShards(from, mesh));
  int64_t moved = 1, gathered = 1;
  for (const std::string& a : SplitAxes(mesh)) {
    const int df = DimOf(from, a), dt = DimOf(to, a);
    if (df == dt || df < 0) continue;
    (dt >= 0 ? moved : gathered) *= mesh.AxisSize(a);
  }
  double s = 0;
  if (moved > 1) s += model.CollectiveSeconds(Collective::kAllToAll, moved, static_cast<int64_t>(local));
  if (gathered > 1)
    s += model.CollectiveSeconds(Collective::kAllGather, gathered, static_cast<int64_t>(local * static_cast<double>(gathered)));
  return s;
}

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

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t HashString(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

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
};

const std::vector<Sharding>& Program::Candidates(const Shape& shape) {
  const std::vector<int64_t> key = shape.dims().ToVector();
  auto it = candidates_.find(key);
  if (it == candidates_.end()) it = candidates_.emplace(key, EnumerateShardings(shape, mesh_)).first;
  return it->second;
}

void Program::BuildGroups() {
  ir::Function& fn = *module_.entry();
  for (const auto& n : fn.nodes())
    for (ir::Value* r : n->results()) {
      value_id_[r] = static_cast<int>(values_.size());
      values_.push_back(r);
    }
  uf_ = UnionFind(values_.size());
  // Users of each value: (user node's first result id, operand position).
  std::vector<std::vector<std::pair<int, int>>> users(values_.size());
  for (const auto& n : fn.nodes())
    for (size_t i = 0; i < n->num_operands(); ++i)
      if (n->num_results() > 0) users[static_cast<size_t>(ValueId(n->operand(i)))].push_back({ValueId(n->result(0)), static_cast<int>(i)});
  // Followers: an elementwise node's result shares its largest operand's variable; a barrier's
  // result i its operand i's.
  for (const auto& n : fn.nodes()) {
    if (n->op() == ir::OpKind::kOptimizationBarrier) {
      for (size_t i = 0; i < n->num_results() && i < n->num_operands(); ++i)
        uf_.Union(ValueId(n->result(i)), ValueId(n->operand(i)));
      continue;
    }
    if (!n->info().Has(ir::kElementwise) || n->num_results() != 1 || n->num_operands() == 0) continue;
    const ir::Value* main = nullptr;
    for (ir::Value* o : n->operands())
      if (o->shape() == n->result()->shape() && (main == nullptr || o->type().NumElements() > main->type().NumElements()))
        main = o;
    if (main != nullptr && !(main->sharding() && n->result()->sharding() && *main->sharding() != *n->result()->sharding()))
      uf_.Union(ValueId(n->result()), ValueId(main));
  }
  // A parameter and its updated value.
  const auto params = fn.Parameters();
  for (const auto& [result, parameter] : options_.tied) {
    ir::Node* p = nullptr;
    for (ir::Node* q : params)
      if (q->attrs_as<ir::ParameterAttrs>().index == parameter) p = q;
    if (p == nullptr || result < 0 || result >= static_cast<int64_t>(fn.results().size())) continue;
    const ir::Value* r = fn.results()[static_cast<size_t>(result)];
    if (r->shape() == p->result()->shape()) uf_.Union(ValueId(r), ValueId(p->result()));
  }
  // Layers: values whose neighbourhoods agree to depth 3 (op, result index, type; operands in
  // order; users with their operand positions) share a variable.
  std::vector<uint64_t> sig(values_.size());
  for (const ir::Value* v : values_)
    sig[static_cast<size_t>(ValueId(v))] =
        Mix(Mix(HashString(v->node()->name()), static_cast<uint64_t>(v->index())), HashString(v->type().ToString()));
  for (int round = 0; round < 3; ++round) {
    std::vector<uint64_t> next(sig.size());
    for (const ir::Value* v : values_) {
      const size_t id = static_cast<size_t>(ValueId(v));
      uint64_t h = sig[id];
      for (const ir::Value* o : v->node()->operands()) h = Mix(h, sig[static_cast<size_t>(ValueId(o))]);
      std::vector<uint64_t> us;
      for (const auto& [u, pos] : users[id]) us.push_back(Mix(sig[static_cast<size_t>(u)], static_cast<uint64_t>(pos)));
      std::sort(us.begin(), us.end());
      for (uint64_t u : us) h = Mix(h, u);
      next[id] = h;
    }
    sig = std::move(next);
  }
  std::unordered_map<uint64_t, int> first_with;
  for (const ir::Value* v : values_) {
    if (v->sharding()) continue;  // an annotated value is decided by its annotation alone
    const int id = ValueId(v);
    auto [it, fresh] = first_with.emplace(sig[static_cast<size_t>(id)], id);
    if (!fresh) uf_.Union(id, it->second);
  }
  // The variable sets, in program order of their first value.
  for (size_t i = 0; i < values_.size(); ++i) {
    const int root = uf_.Find(static_cast<int>(i));
    if (set_of_root_.count(root)) continue;
    set_of_root_[root] = static_cast<int>(sets_.size());
    VarSet s;
    s.root = root;
    s.cand = Candidates(values_[static_cast<size_t>(root)]->shape());
    s.first_node = static_cast<int64_t>(i);
    sets_.push_back(std::move(s));
  }
  // Options: each candidate; sets holding a contraction (dot_general, a sum) also each candidate
  // with any subset of the mesh axes split over the contracted dims.
  std::vector<bool> contracts(sets_.size(), false);
  for (const auto& n : fn.nodes()) {
    const bool dot = n->op() == ir::OpKind::kDotGeneral && !n->attrs_as<ir::DotGeneralAttrs>().lhs_contracting.empty();
    const bool sum = n->op() == ir::OpKind::kReduce && n->attrs_as<ir::ReduceAttrs>().kind == ir::ReduceKind::kSum &&
                     !n->attrs_as<ir::ReduceAttrs>().dims.empty();
    if (dot || sum) contracts[static_cast<size_t>(SetIndex(n->result()))] = true;
  }
  const std::vector<std::string> axes = SplitAxes(mesh_);
  for (size_t i = 0; i < sets_.size(); ++i) {
    VarSet& s = sets_[i];
    for (int k = 0; k < static_cast<int>(s.cand.size()); ++k) {
      s.options.push_back({k, {}});
      if (!contracts[i]) continue;
      for (uint32_t mask = 1; mask < (1u << axes.size()); ++mask) {
        Option o{k, {}};
        for (size_t a = 0; a < axes.size(); ++a)
          if (mask & (1u << a)) o.partial.push_back(axes[a]);
        s.options.push_back(std::move(o));
      }
    }
    s.cost.assign(s.options.size(), 0);
    s.arg_bytes.assign(s.options.size(), 0);
  }
  // Annotations fix their set.
  for (const ir::Value* v : values_) {
    if (!v->sharding()) continue;
    VarSet& s = SetOf(v);
    const Sharding want = NormalizeSharding(Sharding{v->sharding()->dims, {}}, v->type().rank(), mesh_);
    auto it = std::find_if(s.cand.begin(), s.cand.end(), [&](const Sharding& c) { return c.dims == want.dims; });
    if (it == s.cand.end()) {
      s.cand.push_back(want);
      s.options.push_back({static_cast<int>(s.cand.size()) - 1, {}});
      s.cost.push_back(0);
      s.arg_bytes.push_back(0);
      it = s.cand.end() - 1;
    }
    s.fixed_k = static_cast<int>(it - s.cand.begin());
  }
}

double Program::ComputeSeconds(const ir::Node& n, const Sharding& result) const {
  const double shards = static_cast<double>(NumShards(result, mesh_));
  if (n.op() == ir::OpKind::kDotGeneral) {
    const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
    double k = 1;
    for (int64_t d : a.lhs_contracting) k *= static_cast<double>(n.operand(0)->shape().dim(d));
    return 2 * static_cast<double>(n.result()->type().NumElements()) * k / shards / model_.product_flops_per_s;
  }
  if (MakesNoData(n.op()) || n.info().Has(ir::kCollective)) return 0;
  double bytes = 0;
  for (const ir::Value* r : n.results()) bytes += static_cast<double>(r->type().ByteSize());
  return bytes / shards / model_.memory_bytes_per_s;
}

void Program::AddDemand(const ir::Value* x, int v, const std::vector<std::optional<Sharding>>& need) {
  demands_[ValueId(x)].emplace_back(v, need);
}

void Program::BuildReshards() {
  std::map<std::string, size_t> index;  // a reshard's structure -> its entry
  for (auto& [id, demands] : demands_) {
    const ir::Value* x = values_[static_cast<size_t>(id)];
    Reshard r;
    r.u = SetIndex(x);
    const VarSet& su = sets_[static_cast<size_t>(r.u)];
    std::string key = fmt::format("{}|{}", r.u, x->type().ToString());
    for (const auto& [v, need] : demands) {
      Demand d{v, {}};
      for (const std::optional<Sharding>& n : need) {
        if (!n) {
          d.need.push_back(-1);
          continue;
        }
        auto it = std::find_if(r.reqs.begin(), r.reqs.end(), [&](const Sharding& q) { return q.dims == n->dims; });
        if (it == r.reqs.end()) {
          r.reqs.push_back(*n);
          it = r.reqs.end() - 1;
        }
        d.need.push_back(static_cast<int>(it - r.reqs.begin()));
      }
      key += fmt::format("|{}:{}", v, fmt::join(d.need, ","));
      r.demands.push_back(std::move(d));
    }
    for (const Sharding& q : r.reqs) key += "|" + q.ToString();
    bool any = false;
    r.cost.assign(su.cand.size(), std::vector<double>(r.reqs.size(), 0));
    for (size_t k = 0; k < su.cand.size(); ++k)
      for (size_t q = 0; q < r.reqs.size(); ++q) {
        r.cost[k][q] = ReshardSeconds(x->type(), su.cand[k], r.reqs[q], mesh_, model_);
        any = any || r.cost[k][q] > 0;
      }
    if (!any) continue;
    auto [it, fresh] = index.emplace(key, reshards_.size());
    if (fresh) reshards_.push_back(std::move(r));
    reshards_[it->second].count += 1;
  }
}

double Program::ReshardCost(const Reshard& r, const std::vector<int>& choice) const {
  const int k = sets_[static_cast<size_t>(r.u)].options[static_cast<size_t>(choice[static_cast<size_t>(r.u)])].k;
  double total = 0;
  std::vector<char> paid(r.reqs.size(), 0);
  for (const Demand& d : r.demands) {
    const int q = d.need[static_cast<size_t>(choice[static_cast<size_t>(d.v)])];
    if (q < 0 || paid[static_cast<size_t>(q)]) continue;
    paid[static_cast<size_t>(q)] = 1;
    total += r.cost[static_cast<size_t>(k)][static_cast<size_t>(q)];
  }
  return total * r.count;
}

void Program::BuildCosts() {
  ir::Function& fn = *module_.entry();
  for (const auto& n : fn.nodes()) {
    if (n->num_results() == 0) continue;
    if (n->op() == ir::OpKind::kParameter) {
      VarSet& s = SetOf(n->result());
      for (size_t b = 0; b < s.options.size(); ++b)
        s.arg_bytes[b] += static_cast<double>(n->result()->type().ByteSize()) /
                          static_cast<double>(NumShards(s.cand[static_cast<size_t>(s.options[b].k)], mesh_));
      continue;
    }
    const int v = SetIndex(n->result());
    VarSet& s = sets_[static_cast<size_t>(v)];
    const ShardingRule* rule = GetShardingRule(n->op());
    const bool opaque = rule == nullptr || !rule->replicated_reason.empty() || n->num_results() != 1;
    if (opaque && n->op() != ir::OpKind::kOptimizationBarrier) {
      // Whole values in and out: every result replicated, every operand gathered.
      for (ir::Value* r : n->results()) {
        VarSet& rs = SetOf(r);
        for (size_t b = 0; b < rs.options.size(); ++b)
          if (!IsReplicated(rs.cand[static_cast<size_t>(rs.options[b].k)]) || !rs.options[b].partial.empty())
            rs.cost[b] += 1e3;  // not a choice
      }
      for (ir::Value* o : n->operands())
        AddDemand(o, v, std::vector<std::optional<Sharding>>(s.options.size(), Replicated(o->type().rank())));
      continue;
    }
    if (n->op() == ir::OpKind::kOptimizationBarrier) continue;  // its results follow its operands
    const bool follower = n->info().Has(ir::kElementwise);
    std::vector<std::vector<std::optional<Sharding>>> need(n->num_operands(),
                                                           std::vector<std::optional<Sharding>>(s.options.size()));
    for (size_t b = 0; b < s.options.size(); ++b) {
      const Option& opt = s.options[b];
      const Sharding& result = s.cand[static_cast<size_t>(opt.k)];
      const bool dot = n->op() == ir::OpKind::kDotGeneral;
      const bool sum = n->op() == ir::OpKind::kReduce && n->attrs_as<ir::ReduceAttrs>().kind == ir::ReduceKind::kSum;
      if (!opt.partial.empty() && !dot && !sum) {
        // A contraction's option on a node that has none: the same as its full-sum twin, but
        // never cheaper (so that twins do not tie).
        s.cost[b] += 1e-9;
      }
      double cost = ComputeSeconds(*n, result);
      // What the operands must be: the rule's projection of the result (without the axes the
      // contraction is split over), plus those axes on the contracted dims.
      Sharding projected = result;
      std::vector<std::string> scatter;  // partial axes the result is split over: a reduce-scatter
      if (dot || sum)
        for (const std::string& a : opt.partial) {
          const int d = DimOf(projected, a);
          if (d >= 0) {
            auto& axes = projected.dims[static_cast<size_t>(d)];
            axes.erase(std::find(axes.begin(), axes.end(), a));
            scatter.push_back(a);
          }
        }
      std::vector<MaybeSharding> res = {projected};
      if (dot) res[0]->partial = opt.partial;
      std::vector<Proposal> props = rule->backward ? rule->backward(*n, res, mesh_) : std::vector<Proposal>{};
      for (size_t i = 0; i < n->num_operands(); ++i) need[i][b] = Replicated(n->operand(i)->type().rank());
      for (const Proposal& p : props)
        if (p.target >= 0 && static_cast<size_t>(p.target) < n->num_operands())
          need[static_cast<size_t>(p.target)][b] = Sharding{p.sharding.dims, {}};
      bool valid = true;
      if (sum && !opt.partial.empty()) {
        // The summed dims take the partial axes: the first one they divide.
        const auto& rdims = n->attrs_as<ir::ReduceAttrs>().dims;
        Sharding& op = *need[0][b];
        const int64_t size = mesh_.AxesSize(opt.partial);
        bool placed = false;
        for (int64_t d : rdims)
          if (op.dims[static_cast<size_t>(d)].empty() && n->operand(0)->shape().dim(d) % size == 0) {
            op.dims[static_cast<size_t>(d)] = opt.partial;
            placed = true;
            break;
          }
        valid = placed;
      }
      if (dot && !opt.partial.empty()) {
        // The rule puts the partial axes on the first contracted dim: they must divide it.
        const auto& a = n->attrs_as<ir::DotGeneralAttrs>();
        const int64_t size = mesh_.AxesSize(opt.partial);
        valid = n->operand(0)->shape().dim(a.lhs_contracting[0]) % size == 0;
      }
      // Operands must each be a valid layout (an axis used once) for the option to be.
      for (size_t i = 0; i < n->num_operands() && valid; ++i) {
        std::vector<std::string> seen;
        for (const auto& d : need[i][b]->dims)
          for (const auto& a : d) {
            if (std::find(seen.begin(), seen.end(), a) != seen.end()) valid = false;
            seen.push_back(a);
          }
      }
      if (!valid) {
        s.cost[b] += 1e3;
        for (auto& per_operand : need) per_operand[b].reset();
        continue;
      }
      if (!opt.partial.empty() && (dot || sum)) {
        // Completing the partial sum: a reduce-scatter over the axes the result is split over,
        // an all-reduce over the others; the full result's local bytes.
        const double local = static_cast<double>(n->result()->type().ByteSize()) /
                             static_cast<double>(NumShards(projected, mesh_));
        std::vector<std::string> reduce;
        for (const auto& a : opt.partial)
          if (std::find(scatter.begin(), scatter.end(), a) == scatter.end()) reduce.push_back(a);
        if (!scatter.empty())
          cost += model_.CollectiveSeconds(Collective::kReduceScatter, mesh_.AxesSize(scatter), static_cast<int64_t>(local));
        if (!reduce.empty())
          cost += model_.CollectiveSeconds(Collective::kAllReduce, mesh_.AxesSize(reduce),
                                           static_cast<int64_t>(local / static_cast<double>(mesh_.AxesSize(scatter))));
      }
      s.cost[b] += cost;
    }
    for (size_t i = 0; i < n->num_operands(); ++i) {
      // A follower's main operand is the same variable: AddEdge pays only the diagonal, zero.
      if (follower && SetIndex(n->operand(i)) == v && n->operand(i)->shape() == n->result()->shape()) continue;
      AddDemand(n->operand(i), v, need[i]);
    }
  }
}

double Program::Objective(const std::vector<int>& choice) const {
  double total = 0;
  for (size_t i = 0; i < sets_.size(); ++i) total += sets_[i].cost[static_cast<size_t>(choice[i])];
  for (const Reshard& r : reshards_) total += ReshardCost(r, choice);
  return total;
}

void Program::BuildTouching() {
  touching_.assign(sets_.size(), {});
  for (const Reshard& r : reshards_) {
    std::vector<int> sets = {r.u};
    for (const Demand& d : r.demands) sets.push_back(d.v);
    std::sort(sets.begin(), sets.end());
    sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
    for (int i : sets) touching_[static_cast<size_t>(i)].push_back(&r);
  }
}

double Program::LocalCost(size_t set, size_t option, std::vector<int>& choice) const {
  const int keep = choice[set];
  choice[set] = static_cast<int>(option);
  double c = sets_[set].cost[option];
  for (const Reshard* r : touching_[set]) c += ReshardCost(*r, choice);
  choice[set] = keep;
  return c;
}

std::vector<int> Program::SolveGreedy() {
  // Undecided sets count as their first option (replicated, which needs and costs nothing extra
  // from most neighbours) until decided.
  std::vector<int> choice(sets_.size(), 0);
  auto allowed = [&](size_t i, size_t b) {
    return !sets_[i].fixed_k || sets_[i].options[b].k == *sets_[i].fixed_k;
  };
  auto local = [&](size_t i, size_t b) { return LocalCost(i, b, choice); };
  auto decide = [&](size_t i) {
    double best = std::numeric_limits<double>::infinity();
    int pick = 0;
    for (size_t b = 0; b < sets_[i].options.size(); ++b) {
      if (!allowed(i, b)) continue;
      const double c = local(i, b);
      if (c < best - 1e-15) {
        best = c;
        pick = static_cast<int>(b);
      }
    }
    choice[i] = pick;
  };
  for (size_t i = 0; i < sets_.size(); ++i) decide(i);
  for (int sweep = 0; sweep < 4; ++sweep)
    for (size_t i = 0; i < sets_.size(); ++i) decide(i);
  // The memory bound: move the sets whose arguments shrink most per second of cost added.
  if (options_.memory_bound_bytes > 0) {
    auto bytes = [&] {
      double t = 0;
      for (size_t i = 0; i < sets_.size(); ++i) t += sets_[i].arg_bytes[static_cast<size_t>(choice[i])];
      return t;
    };
    while (bytes() > static_cast<double>(options_.memory_bound_bytes)) {
      double best_ratio = std::numeric_limits<double>::infinity();
      size_t best_i = 0;
      int best_b = -1;
      for (size_t i = 0; i < sets_.size(); ++i) {
        const size_t now = static_cast<size_t>(choice[i]);
        const double here = local(i, now);
        for (size_t b = 0; b < sets_[i].options.size(); ++b) {
          const double saved = sets_[i].arg_bytes[now] - sets_[i].arg_bytes[b];
          if (saved <= 0 || !allowed(i, b)) continue;
          const double ratio = std::max(0.0, local(i, b) - here) / saved;
          if (ratio < best_ratio) {
            best_ratio = ratio;
            best_i = i;
            best_b = static_cast<int>(b);
          }
        }
      }
      if (best_b < 0) break;  // nothing shrinks further
      choice[best_i] = best_b;
    }
  }
  return choice;
}

// CBC's C interface, loaded at run time (Debian's coinor-libcbc3: libCbcSolver.so.3); absent, the
// greedy decides.
struct Cbc {
  using Model = void;
  Model* (*newModel)();
  void (*loadProblem)(Model*, int, int, const int*, const int*, const double*, const double*, const double*,
                      const double*, const double*, const double*);
  void (*setInteger)(Model*, int);
  void (*setMaximumSeconds)(Model*, double);
  void (*setLogLevel)(Model*, int);
  void (*setMIPStartI)(Model*, int, const int*, const double*);
  void (*setParameter)(Model*, const char*, const char*);
  int (*solve)(Model*);
  const double* (*getColSolution)(Model*);
  int (*isProvenOptimal)(Model*);
  int (*numberSavedSolutions)(Model*);
  double (*getObjValue)(Model*);
  void (*deleteModel)(Model*);

  static const Cbc* Get(std::string* why) {
    static std::string error;
    static const Cbc* cbc = [] () -> const Cbc* {
      void* h = dlopen("libCbcSolver.so.3", RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) h = dlopen("libCbcSolver.so", RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        error = "libCbcSolver.so.3 is not installed (apt-get install coinor-libcbc3)";
        return nullptr;
      }
      auto* c = new Cbc;
      bool ok = true;
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        ok = ok && fn != nullptr;
      };
      sym(c->newModel, "Cbc_newModel");
      sym(c->loadProblem, "Cbc_loadProblem");
      sym(c->setInteger, "Cbc_setInteger");
      sym(c->setMaximumSeconds, "Cbc_setMaximumSeconds");
      sym(c->setLogLevel, "Cbc_setLogLevel");
      sym(c->setMIPStartI, "Cbc_setMIPStartI");
      sym(c->setParameter, "Cbc_setParameter");
      sym(c->solve, "Cbc_solve");
      sym(c->getColSolution, "Cbc_getColSolution");
      sym(c->isProvenOptimal, "Cbc_isProvenOptimal");
      sym(c->numberSavedSolutions, "Cbc_numberSavedSolutions");
      sym(c->getObjValue, "Cbc_getObjValue");
      sym(c->deleteModel, "Cbc_deleteModel");
      if (!ok) {
        error = "libCbcSolver lacks a function of CBC's C interface this code calls";
        return nullptr;
      }
      return c;
    }();
    if (cbc == nullptr && why) *why = error;
    return cbc;
  }
};

std::optional<std::vector<int>> Program::SolveIlp(AutoShardReport& report, const std::vector<int>& start) {
  std::string why;
  const Cbc* cbc = Cbc::Get(&why);
  if (cbc == nullptr) {
    report.solver = "greedy (" + why + ")";
    return std::nullopt;
  }
  // Columns: x[set][option] binary; for each reshard and each layout its users may need, the
  // levels of what it costs (below), continuous.
  std::vector<int> first_col(sets_.size());
  int cols = 0;
  std::vector<double> obj, lb, ub;
  std::vector<std::vector<std::pair<int, double>>> col_entries;  // per column: (row, coef)
  for (size_t i = 0; i < sets_.size(); ++i) {
    first_col[i] = cols;
    for (size_t b = 0; b < sets_[i].options.size(); ++b) {
      obj.push_back(sets_[i].cost[b] * 1e6);  // microseconds: CBC's tolerances are absolute
      const bool off = sets_[i].fixed_k && sets_[i].options[b].k != *sets_[i].fixed_k;
      lb.push_back(0);
      ub.push_back(off ? 0 : 1);
      col_entries.emplace_back();
      ++cols;
    }
  }
  const int x_cols = cols;
  std::vector<double> row_lb, row_ub;
  auto new_row = [&](double lo, double hi) {
    row_lb.push_back(lo);
    row_ub.push_back(hi);
    return static_cast<int>(row_lb.size()) - 1;
  };
  for (size_t i = 0; i < sets_.size(); ++i) {
    const int r = new_row(1, 1);
    for (size_t b = 0; b < sets_[i].options.size(); ++b) col_entries[static_cast<size_t>(first_col[i]) + b].push_back({r, 1});
  }
  for (const Reshard& rs : reshards_) {
    const VarSet& u = sets_[static_cast<size_t>(rs.u)];
    for (size_t q = 0; q < rs.reqs.size(); ++q) {
      // Exactly what the producer's layout costs, in levels: the distinct nonzero costs
      // c_1 < c_2 < ... of turning its candidates into q. w_j >= (a user's options needing q) -
      // (producer options costing less than c_j), one row per user; the objective pays
      // (c_j - c_j-1) for each w_j, so a producer costing c_j pays c_j in all.
      std::vector<double> levels;
      for (size_t k = 0; k < u.cand.size(); ++k)
        if (rs.cost[k][q] > 0) levels.push_back(rs.cost[k][q]);
      std::sort(levels.begin(), levels.end());
      levels.erase(std::unique(levels.begin(), levels.end(),
                               [](double a, double b) { return b - a <= 1e-12 * std::max(1.0, std::abs(b)); }),
                   levels.end());
      double below = 0;
      for (double level : levels) {
        const int w = cols++;
        obj.push_back((level - below) * rs.count * 1e6);
        lb.push_back(0);
        ub.push_back(1);
        col_entries.emplace_back();
        for (const Demand& d : rs.demands) {
          bool needs = false;
          for (int n : d.need) needs = needs || n == static_cast<int>(q);
          if (!needs) continue;
          const int r = new_row(0, std::numeric_limits<double>::infinity());
          col_entries[static_cast<size_t>(w)].push_back({r, 1});
          const VarSet& v = sets_[static_cast<size_t>(d.v)];
          std::map<int, double> coef;  // columns of this row (u and v may be the same set)
          for (size_t b = 0; b < v.options.size(); ++b)
            if (d.need[b] == static_cast<int>(q)) coef[first_col[static_cast<size_t>(d.v)] + static_cast<int>(b)] -= 1;
          for (size_t a = 0; a < u.options.size(); ++a)
            if (rs.cost[static_cast<size_t>(u.options[a].k)][q] < level - 1e-12 * std::max(1.0, level))
              coef[first_col[static_cast<size_t>(rs.u)] + static_cast<int>(a)] += 1;
          for (const auto& [col, c] : coef)
            if (c != 0) col_entries[static_cast<size_t>(col)].push_back({r, c});
        }
        below = level;
      }
    }
  }
  if (options_.memory_bound_bytes > 0) {
    const int r = new_row(-std::numeric_limits<double>::infinity(), static_cast<double>(options_.memory_bound_bytes) / 1e6);
    for (size_t i = 0; i < sets_.size(); ++i)
      for (size_t b = 0; b < sets_[i].options.size(); ++b)
        if (sets_[i].arg_bytes[b] > 0)
          col_entries[static_cast<size_t>(first_col[i]) + b].push_back({r, sets_[i].arg_bytes[b] / 1e6});
  }
  std::vector<int> col_start{0}, index;
  std::vector<double> value;
  for (const auto& entries : col_entries) {
    for (const auto& [r, coef] : entries) {
      index.push_back(r);
      value.push_back(coef);
    }
    col_start.push_back(static_cast<int>(index.size()));
  }
  report.columns = cols;
  report.rows = static_cast<int64_t>(row_lb.size());
  Cbc::Model* m = cbc->newModel();
  cbc->loadProblem(m, cols, static_cast<int>(row_lb.size()), col_start.data(), index.data(), value.data(), lb.data(),
                   ub.data(), obj.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < x_cols; ++c) cbc->setInteger(m, c);
  cbc->setLogLevel(m, 0);
  // The best of the other candidates as the start: CBC then has a good solution from its first
  // node on, and improves on it.
  std::vector<int> start_cols;
  std::vector<double> start_vals;
  for (size_t i = 0; i < sets_.size(); ++i) {
    start_cols.push_back(first_col[i] + start[i]);
    start_vals.push_back(1);
  }
  cbc->setMIPStartI(m, static_cast<int>(start_cols.size()), start_cols.data(), start_vals.data());
  // CBC runs in a child process: its time limit is checked between nodes, and a node of a hard
  // relaxation can run on for minutes, so the parent takes the child's answer (one option per set
  // and whether it is proven optimal) through a pipe, or kills it at the deadline.
  const Clock::time_point t0 = Clock::now();
  std::optional<std::vector<int>> choice;
  int fds[2];
  if (pipe(fds) != 0) Fail("auto-sharding: pipe() failed: {}", std::strerror(errno));
  const pid_t child = fork();
  if (child < 0) Fail("auto-sharding: fork() failed: {}", std::strerror(errno));
  if (child == 0) {
    close(fds[0]);
    cbc->solve(m);
    std::vector<int32_t> out(sets_.size() + 1, -1);
    const double* sol = cbc->getColSolution(m);
    if (sol != nullptr && cbc->numberSavedSolutions(m) > 0) {
      out[0] = cbc->isProvenOptimal(m) ? 1 : 0;
      for (size_t i = 0; i < sets_.size(); ++i) {
        double best = -1;
        for (size_t b = 0; b < sets_[i].options.size(); ++b)
          if (sol[first_col[i] + static_cast<int>(b)] > best) {
            best = sol[first_col[i] + static_cast<int>(b)];
            out[i + 1] = static_cast<int32_t>(b);
          }
      }
    }
    const char* p = reinterpret_cast<const char*>(out.data());
    size_t left = out.size() * sizeof(int32_t);
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::vector<int32_t> in(sets_.size() + 1, -1);
  size_t got = 0;
  const size_t want = in.size() * sizeof(int32_t);
  bool timed_out = false;
  while (got < want) {
    const double left_s = options_.time_limit_s + 2 - Since(t0);  // CBC's own limit, then a grace
    if (left_s <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(std::ceil(left_s * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(in.data()) + got, want - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  if (got < want) kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  report.solve_s = Since(t0);
  if (got == want && in[0] >= 0) {
    choice.emplace(sets_.size(), 0);
    for (size_t i = 0; i < sets_.size(); ++i) (*choice)[i] = in[i + 1];
    report.solver = in[0] == 1 ? "CBC, optimal" : "CBC, stopped at the time limit";
  } else {
    report.solver = timed_out ? "CBC stopped at the time limit without an answer; the best other candidate"
                              : "CBC found no solution; the best other candidate";
  }
  cbc->deleteModel(m);
  return choice;
}

std::vector<int> Program::ChoiceOf(const ir::Module& plan, int* disagree, int* missing) {
  std::vector<const ir::Value*> theirs;
  for (const auto& n : plan.entry()->nodes())
    for (const ir::Value* r : n->results()) theirs.push_back(r);
  AXLE_CHECK(theirs.size() == values_.size(), "auto-sharding: a reference plan of another program");
  std::vector<int> choice(sets_.size(), -1);
  for (size_t i = 0; i < values_.size(); ++i) {
    const int set = SetIndex(values_[i]);
    const VarSet& s = sets_[static_cast<size_t>(set)];
    const std::optional<Sharding>& h = theirs[i]->sharding();
    const Sharding want = NormalizeSharding(h ? Sharding{h->dims, {}} : std::optional<Sharding>{},
                                            values_[i]->type().rank(), mesh_);
    int pick = -1;
    for (size_t b = 0; b < s.options.size() && pick < 0; ++b)
      if (s.cand[static_cast<size_t>(s.options[b].k)].dims == want.dims) pick = static_cast<int>(b);
    if (pick < 0) {
      ++*missing;
      continue;
    }
    int& c = choice[static_cast<size_t>(set)];
    if (c >= 0 && sets_[static_cast<size_t>(set)].options[static_cast<size_t>(c)].k != s.options[static_cast<size_t>(pick)].k)
      ++*disagree;
    if (c < 0) c = pick;
  }
  for (size_t i = 0; i < choice.size(); ++i)
    if (choice[i] < 0) choice[i] = sets_[i].fixed_k ? *sets_[i].fixed_k : 0;
  // Each contraction's split: the one its neighbours make cheapest, keeping the layout.
  for (int sweep = 0; sweep < 2; ++sweep)
    for (size_t i = 0; i < sets_.size(); ++i) {
      const int k = sets_[i].options[static_cast<size_t>(choice[i])].k;
      double best = std::numeric_limits<double>::infinity();
      int pick = choice[i];
      for (size_t b = 0; b < sets_[i].options.size(); ++b) {
        if (sets_[i].options[b].k != k) continue;
        const double c = LocalCost(i, b, choice);
        if (c < best - 1e-15) {
          best = c;
          pick = static_cast<int>(b);
        }
      }
      choice[i] = pick;
    }
  return choice;
}

std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> Program::Seeds() const {
  // The state (parameters the step updates: `tied`) replicated, or split on its first dim that
  // all the mesh's devices divide; the data (other parameters of rank >= 1) split on dim 0 over
  // all of them: data parallel and ZeRO-3 / FSDP, as a user would write them without knowing the
  // model. Propagation fills in the rest.
  std::vector<std::string> axes = SplitAxes(mesh_);
  const int64_t devices = mesh_.AxesSize(axes);
  std::vector<bool> state;
  for (const auto& [result, parameter] : options_.tied) {
    if (parameter >= static_cast<int64_t>(state.size())) state.resize(static_cast<size_t>(parameter) + 1, false);
    state[static_cast<size_t>(parameter)] = true;
  }
  std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> out;
  for (const char* name : {"data parallel", "fully sharded"}) {
    std::unique_ptr<ir::Module> m = module_.Clone();
    for (ir::Node* p : m->entry()->Parameters()) {
      ir::Value* v = p->result();
      if (v->sharding() || v->type().rank() == 0) continue;
      const int64_t index = p->attrs_as<ir::ParameterAttrs>().index;
      const bool is_state = index < static_cast<int64_t>(state.size()) && state[static_cast<size_t>(index)];
      Sharding sh = Replicated(v->type().rank());
      for (int64_t d = 0; d < v->type().rank(); ++d) {
        if (is_state && std::string_view(name) == "data parallel") break;
        if (v->shape().dim(d) % devices == 0) {
          sh.dims[static_cast<size_t>(d)] = axes;
          break;
        }
        if (!is_state) break;  // the data: dim 0 or nothing
      }
      v->set_sharding(sh);
    }
    try {
      PropagateShardings(*m);
    } catch (const Error&) {
      continue;  // a layout propagation cannot complete: not a seed
    }
    out.emplace_back(name, std::move(m));
  }
  return out;
}

void Program::Apply(const std::vector<int>& choice, ir::Module& m) const {
  size_t i = 0;
  for (const auto& n : m.entry()->nodes())
    for (ir::Value* v : n->results()) {
      const ir::Value* ours = values_[i++];
      if (ours->sharding()) {
        v->set_sharding(ours->sharding());
        continue;
      }
      const size_t set = static_cast<size_t>(set_of_root_.at(uf_.Find(value_id_.at(ours))));
      const VarSet& s = sets_[set];
      v->set_sharding(s.cand[static_cast<size_t>(s.options[static_cast<size_t>(choice[set])].k)]);
    }
}

double Program::ArgumentBytes(const std::vector<int>& choice) const {
  double args = 0;
  for (size_t i = 0; i < sets_.size(); ++i) args += sets_[i].arg_bytes[static_cast<size_t>(choice[i])];
  return args;
}

AutoShardReport Program::Run() {
  const Clock::time_point t0 = Clock::now();
  AutoShardReport report;
  report.nodes = static_cast<int64_t>(module_.entry()->nodes().size());
  BuildGroups();
  BuildCosts();
  BuildReshards();
  report.variable_sets = static_cast<int64_t>(sets_.size());
  // The smallest arguments any choice reaches.
  double smallest = 0;
  for (const VarSet& s : sets_) {
    double m = std::numeric_limits<double>::infinity();
    for (size_t b = 0; b < s.options.size(); ++b)
      if (!s.fixed_k || s.options[b].k == *s.fixed_k) m = std::min(m, s.arg_bytes[b]);
    smallest += m;
  }
  report.smallest_argument_bytes = static_cast<int64_t>(smallest);
  if (options_.memory_bound_bytes > 0 && smallest > static_cast<double>(options_.memory_bound_bytes))
    Fail("auto-sharding: a memory bound of {:.1f} MB per device cannot be met on mesh {}: the step's arguments "
         "(parameters, optimizer state, batch) need at least {:.1f} MB per device split as far as they go; give a "
         "bound of {:.1f} MB or more, or more devices",
         static_cast<double>(options_.memory_bound_bytes) / 1e6, mesh_.ToString(), smallest / 1e6, smallest / 1e6);
  BuildTouching();
  // Candidates: the solver's choice, the greedy's, the seeds' and the caller's references, each
  // made the best it can be in this program. The program prices a resharding at its cheapest
  // source and a contraction's collective on its own, so the winner is the one whose partitioned
  // program (propagated, partitioned, priced by EvaluatePartitioned) is cheapest.
  struct Candidate {
    std::string name;
    std::vector<int> choice;
    const ir::Module* as_propagated = nullptr;  // a seed taken as propagation left it
  };
  std::vector<Candidate> candidates;
  {
    const Clock::time_point g0 = Clock::now();
    candidates.push_back({"greedy", SolveGreedy()});
    report.solve_s += Since(g0);
  }
  std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> seeds = Seeds();
  std::vector<std::pair<std::string, const ir::Module*>> starts;
  for (const auto& [name, m] : seeds) {
    starts.emplace_back(name, m.get());
    // A seed as propagation completed it: the same layouts where the program's variables are
    // shared between values that propagation told apart.
    candidates.push_back({name + " (as propagated)", {}, m.get()});
  }
  for (const auto& r : options_.references) starts.push_back(r);
  for (const auto& [name, plan] : starts) {
    int disagree = 0, missing = 0;
    std::vector<int> c = ChoiceOf(*plan, &disagree, &missing);
    const bool reference = std::any_of(options_.references.begin(), options_.references.end(),
                                       [&](const auto& r) { return r.second == plan; });
    if (reference)
      report.reference.push_back(fmt::format("{}: {:.4f} s in this program; {} values disagree with their "
                                             "decision's others, {} have no candidate",
                                             name, Objective(c), disagree, missing));
    candidates.push_back({name, std::move(c)});
  }
  if (options_.use_ilp) {
    // The ILP starts from the candidate the program prices lowest (within the memory bound).
    const Candidate* start = &candidates.front();
    for (const Candidate& c : candidates)
      if (!c.as_propagated && (options_.memory_bound_bytes <= 0 || ArgumentBytes(c.choice) <= static_cast<double>(options_.memory_bound_bytes)) &&
          Objective(c.choice) < Objective(start->choice))
        start = &c;
    const std::vector<int> from = start->choice;
    if (std::optional<std::vector<int>> c = SolveIlp(report, from)) candidates.insert(candidates.begin(), {"ILP", *c});
  } else {
    report.solver = "greedy (asked for)";
  }
  double best_s = std::numeric_limits<double>::infinity();
  const std::vector<int>* best = nullptr;
  std::string best_name;
  std::vector<std::string> tried;
  const Candidate* best_candidate = nullptr;
  for (const Candidate& c : candidates) {
    std::unique_ptr<ir::Module> m = c.as_propagated ? c.as_propagated->Clone() : module_.Clone();
    if (!c.as_propagated) {
      if (options_.memory_bound_bytes > 0 && ArgumentBytes(c.choice) > static_cast<double>(options_.memory_bound_bytes))
        continue;
      if (std::any_of(candidates.cbegin(), candidates.cbegin() + (&c - candidates.data()),
                      [&](const Candidate& o) { return !o.as_propagated && o.choice == c.choice; }))
        continue;  // the same choice as an earlier candidate
      Apply(c.choice, *m);
    }
    spmd::PlanCost cost;
    try {
      PropagateShardings(*m);
      cost = EvaluatePartitioned(*Partition(*m), model_);
    } catch (const Error& e) {
      tried.push_back(fmt::format("{} fails to partition: {}", c.name, e.what()));
      continue;
    }
    if (c.as_propagated && options_.memory_bound_bytes > 0 && cost.argument_bytes > options_.memory_bound_bytes) continue;
    tried.push_back(c.as_propagated ? fmt::format("{} {:.4f} s", c.name, cost.step_s())
                                    : fmt::format("{} {:.4f} s ({:.4f} s in the program)", c.name, cost.step_s(),
                                                  Objective(c.choice)));
    if (cost.step_s() < best_s) {
      best_s = cost.step_s();
      best_candidate = &c;
      best_name = c.name;
    }
  }
  if (best_candidate && !best_candidate->as_propagated) best = &best_candidate->choice;
  report.chosen = best_name;
  report.candidates = std::move(tried);
  report.evaluated_s = best_s;
  if (best_candidate && best_candidate->as_propagated) {
    // The seed's layouts onto our values, node by node (the same program).
    std::vector<const ir::Value*> theirs;
    for (const auto& n : best_candidate->as_propagated->entry()->nodes())
      for (const ir::Value* r : n->results()) theirs.push_back(r);
    for (size_t i = 0; i < values_.size(); ++i)
      if (!values_[i]->sharding() && theirs[i]->sharding())
        values_[i]->set_sharding(theirs[i]->sharding());  // partial sums included: completed where used
    int disagree = 0, missing = 0;
    const std::vector<int> c = ChoiceOf(*best_candidate->as_propagated, &disagree, &missing);
    report.objective_s = Objective(c);
    report.argument_bytes = static_cast<int64_t>(ArgumentBytes(c));
  } else {
    if (best == nullptr) {  // nothing within the bound partitions (should not happen): the greedy's
      best = &candidates.front().choice;
      report.chosen = candidates.front().name;
    }
    report.objective_s = Objective(*best);
    report.argument_bytes = static_cast<int64_t>(ArgumentBytes(*best));
    Apply(*best, module_);
  }
  report.memory_bound_met =
      options_.memory_bound_bytes <= 0 || report.argument_bytes <= options_.memory_bound_bytes;
  report.total_s = Since(t0);
  return report;
}

}  // namespace

AutoShardReport AutoShard(ir::Module& module, const CostModel& model, const AutoShardOptions& options) {
  if (!module.mesh()) Fail("auto-sharding: module @{} has no mesh", module.name());
  if (module.num_replicas() != 1) Fail("auto-sharding: module @{} is already partitioned", module.name());
  if (module.entry() == nullptr) Fail("auto-sharding: module @{} has no entry function", module.name());
  Program p(module, model, options);
  return p.Run();
}

}  // namespace axle::spmd
