// Building auto-sharding's program from a module (auto_shard_internal.h): the variable sets,
// their options and costs, and the reshards between them.
#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "ir/op.h"
#include "spmd/auto_shard_internal.h"
#include "spmd/plan_cost.h"
#include "spmd/shard_util.h"
#include "spmd/sharding_rules.h"

namespace axle::spmd::auto_shard_detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Candidates: every mesh axis (of more than one device) on one dimension it divides, or on none;
// a dimension's axes in mesh order. The replicated sharding first.

std::vector<Sharding> EnumerateShardings(const Shape& shape, const ir::Mesh& mesh) {
  const int64_t rank = shape.rank();
  const std::vector<std::string> axes = SplitAxes(mesh);
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

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t HashString(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<std::string> SplitAxes(const ir::Mesh& mesh) {
  std::vector<std::string> axes;
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (mesh.shape()[static_cast<size_t>(a)] > 1) axes.push_back(mesh.axis_names()[static_cast<size_t>(a)]);
  return axes;
}

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
  if (MakesNoData(n.op()) || n.info().Has(ir::kCollective) || fused_.count(&n)) return 0;
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
  fused_ = FusedIntoTheirUser(fn);
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


}  // namespace axle::spmd::auto_shard_detail
