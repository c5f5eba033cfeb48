#include "spmd/auto_shard.h"



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
#include "spmd/auto_shard_internal.h"
#include "spmd/mip.h"
#include "spmd/partitioner.h"
#include "spmd/plan_cost.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"
#include "spmd/sharding_rules.h"

namespace axle::spmd {
namespace auto_shard_detail {
namespace {

// Whether two modules of the same nodes give every value the same sharding.
bool SameLayouts(const ir::Module& a, const ir::Module& b) {
  const auto& na = a.entry()->nodes();
  const auto& nb = b.entry()->nodes();
  if (na.size() != nb.size()) return false;
  for (size_t i = 0; i < na.size(); ++i)
    for (size_t r = 0; r < na[i]->num_results(); ++r)
      if (na[i]->result(static_cast<int>(r))->sharding() != nb[i]->result(static_cast<int>(r))->sharding()) return false;
  return true;
}

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

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

std::optional<std::vector<int>> Program::SolveIlp(AutoShardReport& report, const std::vector<int>& start) {
  // Columns: x[set][option] binary; for each reshard and each layout its users may need, the
  // levels of what it costs (below), continuous. Costs in microseconds: CBC's tolerances are
  // absolute.
  Mip p;
  std::vector<int> first_col(sets_.size());
  for (size_t i = 0; i < sets_.size(); ++i) {
    first_col[i] = p.columns();
    const int one = p.AddRow(1, 1);  // one option per set
    for (size_t b = 0; b < sets_[i].options.size(); ++b) {
      const bool off = sets_[i].fixed_k && sets_[i].options[b].k != *sets_[i].fixed_k;
      p.Add(one, p.AddColumn(sets_[i].cost[b] * 1e6, 0, off ? 0 : 1, /*is_integer=*/true), 1);
    }
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
        const int w = p.AddColumn((level - below) * rs.count * 1e6, 0, 1, /*is_integer=*/false);
        for (const Demand& d : rs.demands) {
          if (std::find(d.need.begin(), d.need.end(), static_cast<int>(q)) == d.need.end()) continue;
          const int r = p.AddRow(0, std::numeric_limits<double>::infinity());
          p.Add(r, w, 1);
          const VarSet& v = sets_[static_cast<size_t>(d.v)];
          for (size_t b = 0; b < v.options.size(); ++b)
            if (d.need[b] == static_cast<int>(q)) p.Add(r, first_col[static_cast<size_t>(d.v)] + static_cast<int>(b), -1);
          for (size_t a = 0; a < u.options.size(); ++a)
            if (rs.cost[static_cast<size_t>(u.options[a].k)][q] < level - 1e-12 * std::max(1.0, level))
              p.Add(r, first_col[static_cast<size_t>(rs.u)] + static_cast<int>(a), 1);  // u and v may be one set
        }
        below = level;
      }
    }
  }
  if (options_.memory_bound_bytes > 0) {
    const int r = p.AddRow(-std::numeric_limits<double>::infinity(), static_cast<double>(options_.memory_bound_bytes) / 1e6);
    for (size_t i = 0; i < sets_.size(); ++i)
      for (size_t b = 0; b < sets_[i].options.size(); ++b)
        if (sets_[i].arg_bytes[b] > 0) p.Add(r, first_col[i] + static_cast<int>(b), sets_[i].arg_bytes[b] / 1e6);
  }
  report.columns = p.columns();
  report.rows = p.rows();
  // The best of the other candidates as the start: CBC has a good solution from its first node
  // on, and improves on it.
  std::vector<std::pair<int, double>> from;
  for (size_t i = 0; i < sets_.size(); ++i) from.emplace_back(first_col[i] + start[i], 1);
  const MipOutcome o = SolveMip(p, from, options_.time_limit_s);
  report.solve_s = o.seconds;
  if (!o.x) {
    report.solver = o.status + "; the best other candidate";
    return std::nullopt;
  }
  report.solver = o.status;
  std::vector<int> choice(sets_.size(), 0);
  for (size_t i = 0; i < sets_.size(); ++i) {
    double best = -1;
    for (size_t b = 0; b < sets_[i].options.size(); ++b)
      if ((*o.x)[static_cast<size_t>(first_col[i]) + b] > best) {
        best = (*o.x)[static_cast<size_t>(first_col[i]) + b];
        choice[i] = static_cast<int>(b);
      }
  }
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
  // The data (parameters of rank >= 1 the step does not update) split on dim 0 over all the
  // mesh's devices; the state (parameters the step updates: `tied`) split on its first dim that
  // the devices of a subset S of the axes divide, replicated over the others: S empty is data
  // parallel, S every axis ZeRO-3 / FSDP, S in between hybrid sharding (HSDP: FSDP within a group
  // of devices, data parallel across groups), as a user would write them without knowing the
  // model. Propagation fills in the rest.
  const std::vector<std::string> axes = SplitAxes(mesh_);
  const int64_t devices = mesh_.AxesSize(axes);
  std::vector<bool> state;
  for (const auto& [result, parameter] : options_.tied) {
    if (parameter >= static_cast<int64_t>(state.size())) state.resize(static_cast<size_t>(parameter) + 1, false);
    state[static_cast<size_t>(parameter)] = true;
  }
  std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> out;
  // Every subset of up to 4 axes (mask bit a: axis a in S); of more, the two ends only.
  const bool every_subset = axes.size() <= 4;
  const uint32_t seeds = every_subset ? 1u << axes.size() : 2u;
  for (uint32_t mask = 0; mask < seeds; ++mask) {
    std::vector<std::string> over;  // S
    for (size_t a = 0; a < axes.size(); ++a)
      if (every_subset ? (mask & (1u << a)) != 0 : mask == 1) over.push_back(axes[a]);
    const std::string name = over.empty()          ? "data parallel"
                             : over == axes        ? "fully sharded"
                                                   : fmt::format("fully sharded over {}", fmt::join(over, ","));
    const int64_t state_devices = mesh_.AxesSize(over);
    std::unique_ptr<ir::Module> m = module_.Clone();
    for (ir::Node* p : m->entry()->Parameters()) {
      ir::Value* v = p->result();
      if (v->sharding() || v->type().rank() == 0) continue;
      const int64_t index = p->attrs_as<ir::ParameterAttrs>().index;
      const bool is_state = index < static_cast<int64_t>(state.size()) && state[static_cast<size_t>(index)];
      Sharding sh = Replicated(v->type().rank());
      if (!is_state) {
        if (v->shape().dim(0) % devices == 0) sh.dims[0] = axes;  // the data: dim 0 or nothing
      } else if (!over.empty()) {
        for (int64_t d = 0; d < v->type().rank(); ++d)
          if (v->shape().dim(d) % state_devices == 0) {
            sh.dims[static_cast<size_t>(d)] = over;
            break;
          }
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
    double start_cost = Objective(start->choice);
    for (const Candidate& c : candidates) {
      if (c.as_propagated ||
          (options_.memory_bound_bytes > 0 && ArgumentBytes(c.choice) > static_cast<double>(options_.memory_bound_bytes)))
        continue;
      if (const double cost = Objective(c.choice); cost < start_cost) {
        start = &c;
        start_cost = cost;
      }
    }
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
  std::vector<AutoShardReport::Alternative> evaluated;  // when alternatives are asked for
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
    if (options_.alternatives_within > 0) evaluated.push_back({c.name, std::move(m), cost.step_s()});
  }
  // The runners-up within the asked fraction, cheapest first, each with layouts of its own.
  if (options_.alternatives_within > 0) {
    std::stable_sort(evaluated.begin(), evaluated.end(),
                     [](const auto& a, const auto& b) { return a.evaluated_s < b.evaluated_s; });
    std::vector<const ir::Module*> kept;
    for (AutoShardReport::Alternative& a : evaluated) {
      if (a.evaluated_s > best_s * (1 + options_.alternatives_within)) break;
      if (std::any_of(kept.begin(), kept.end(), [&](const ir::Module* k) { return SameLayouts(*k, *a.module); }))
        continue;
      kept.push_back(a.module.get());
      if (a.name != best_name && static_cast<int>(report.alternatives.size()) < options_.max_alternatives)
        report.alternatives.push_back(a);
    }
    // The chosen one's module may have been passed over as another's twin: drop that twin.
    for (const AutoShardReport::Alternative& a : evaluated)
      if (a.name == best_name)
        std::erase_if(report.alternatives, [&](const auto& o) { return SameLayouts(*o.module, *a.module); });
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


}  // namespace auto_shard_detail

AutoShardReport AutoShard(ir::Module& module, const CostModel& model, const AutoShardOptions& options) {
  if (!module.mesh()) Fail("auto-sharding: module @{} has no mesh", module.name());
  if (module.num_replicas() != 1) Fail("auto-sharding: module @{} is already partitioned", module.name());
  if (module.entry() == nullptr) Fail("auto-sharding: module @{} has no entry function", module.name());
  auto_shard_detail::Program p(module, model, options);
  return p.Run();
}

}  // namespace axle::spmd
