#include "spmd/propagation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/flags.h"
#include "ir/printer.h"
#include "spmd/sharding_rules.h"

namespace axle::spmd {
namespace {

using ir::Node;
using ir::Sharding;
using ir::Value;
using Axes = std::vector<std::string>;

// "%w (f32[16,32], result 0 of `%w = parameter() ...`)" for messages.
std::string Describe(const Value* v) {
  const std::string name = v->name().empty() ? std::string("value") : "%" + v->name();
  return fmt::format("{} ({}, result {} of `{}`)", name, v->type().ToString(), v->index(), ir::PrintNode(*v->node()));
}

std::string Text(const Sharding& s) { return s.ToString(); }

bool Uses(const Sharding& s, const std::string& axis) {
  if (std::find(s.partial.begin(), s.partial.end(), axis) != s.partial.end()) return true;
  for (const auto& d : s.dims)
    if (std::find(d.begin(), d.end(), axis) != d.end()) return true;
  return false;
}

bool HasAxes(const Sharding& s) {
  if (!s.partial.empty()) return true;
  for (const auto& d : s.dims)
    if (!d.empty()) return true;
  return false;
}

void CheckOne(const Value& v, const ir::Mesh& mesh, std::vector<std::string>& notes) {
  const Sharding& s = *v.sharding();
  auto fail = [&](const std::string& why) {
    Fail("sharding annotation {} on {} is impossible: {}", Text(s), Describe(&v), why);
  };
  if (static_cast<int64_t>(s.dims.size()) != v.type().rank())
    fail(fmt::format("it has {} dimension entries for a value of rank {}; give one entry per dimension ([] = "
                     "replicated)",
                     s.dims.size(), v.type().rank()));
  std::set<std::string> seen;
  auto use = [&](const std::string& axis) {
    if (axis.empty()) fail("it has an empty axis name");
    if (!mesh.HasAxis(axis))
      fail(fmt::format("axis '{}' is not an axis of the module's mesh {}", axis, mesh.ToString()));
    if (!seen.insert(axis).second) fail(fmt::format("mesh axis '{}' is used twice", axis));
  };
  for (const auto& d : s.dims)
    for (const auto& a : d) use(a);
  for (const auto& a : s.partial) use(a);
  for (size_t d = 0; d < s.dims.size(); ++d) {
    const int64_t k = mesh.AxesSize(s.dims[d]);
    if (k > 1 && v.type().shape.dim(d) % k != 0) {
      notes.push_back(fmt::format("{} on {}: dim {} (size {}) is not divisible by its {} shards; the partitioner "
                                  "pads it", Text(s), Describe(&v), d, v.type().shape.dim(d), k));
      if (flags::debug()) fmt::print(stderr, "[axle sharding] note: {}\n", notes.back());
    }
  }
}

// One proposal for a value, with where it came from and what ignoring it would cost.
struct Candidate {
  Sharding sharding;
  int64_t weight = 0;  // bytes of the tensor resharded at that edge when the proposal is not followed
  // Where it came from: forward from operand `index` of `node` (v's producer), or backward from
  // `node`, a user of v as its operand `index`. Put in words only for AXLE_DEBUG.
  bool forward = true;
  const Node* node = nullptr;
  int index = 0;
};

std::string SourceText(const Candidate& c) {
  if (c.forward)
    return fmt::format("forward from operand {} ({})", c.index, c.node->operand(c.index)->sharding()->ToString());
  return fmt::format("backward from `{}` (operand {})", ir::PrintNode(*c.node), c.index);
}

bool UsedOnDims(const Sharding& s, const std::string& axis) {
  for (const auto& d : s.dims)
    if (std::find(d.begin(), d.end(), axis) != d.end()) return true;
  return false;
}

// `base` refined by `c` where they agree: each dim `base` leaves replicated takes c's axes when no
// dim uses them yet; then c's partial axes join where no dim uses them. A layout on a dim beats a
// pending sum over the same axis (the partitioner turns that sum into a reduce_scatter), so an
// axis a dim takes leaves `partial`.
void MergeInto(Sharding& base, const Sharding& c) {
  for (size_t d = 0; d < c.dims.size() && d < base.dims.size(); ++d) {
    if (c.dims[d].empty() || !base.dims[d].empty()) continue;
    bool free = true;
    for (const auto& a : c.dims[d]) free = free && !UsedOnDims(base, a);
    if (free) base.dims[d] = c.dims[d];
  }
  for (const auto& a : c.partial)
    if (!Uses(base, a)) base.partial.push_back(a);
  std::erase_if(base.partial, [&](const std::string& a) { return UsedOnDims(base, a); });
}

// Whether following `chosen` honours proposal `c` (every dim c splits is split the same way).
bool Honours(const Sharding& chosen, const Sharding& c) {
  for (size_t d = 0; d < c.dims.size() && d < chosen.dims.size(); ++d)
    if (!c.dims[d].empty() && c.dims[d] != chosen.dims[d]) return false;
  return true;
}

class Propagator {
 public:
  Propagator(ir::Function& f, const ir::Mesh& mesh) : f_(f), mesh_(mesh) {
    for (const auto& n : f.nodes()) {
      for (size_t i = 0; i < n->num_operands(); ++i) users_[n->operand(i)].push_back({n.get(), static_cast<int>(i)});
      const ShardingRule* rule = GetShardingRule(n->op());
      AXLE_CHECK(rule != nullptr, "op {} has no sharding rule", n->name());
      for (Value* r : n->results()) {
        if (r->sharding()) {
          fixed_.insert(r);  // a user annotation: a hard constraint
        } else if (!rule->replicated_reason.empty()) {
          r->set_sharding(Replicated(r->type().rank()));
          fixed_.insert(r);
          report_.changed = true;
        }
      }
    }
  }

  PropagationReport Run() {
    // Two phases, as GSPMD's propagation priorities: first without the forward proposals of
    // broadcasts that add elements, so a broadcast result takes its users' layout (a bias
    // broadcast over a batch-split activation is split on the batch, and the partitioner gathers
    // the small bias) rather than the small operand's (which would split the broadcast on the
    // feature dim and move the whole activation-sized value); then with every proposal, for the
    // values the first phase left open.
    for (defer_broadcasts_ = true;; defer_broadcasts_ = false) {
      Sweep();
      if (!defer_broadcasts_) break;
    }
    FinalizePartials();
    for (const auto& n : f_.nodes())
      for (Value* r : n->results())
        if (!r->sharding()) {
          r->set_sharding(Replicated(r->type().rank()));
          report_.changed = true;
        }
    return report_;
  }

 private:
  std::vector<MaybeSharding> OperandShardings(const Node& n) const {
    std::vector<MaybeSharding> out;
    for (Value* v : n.operands()) out.push_back(v->sharding());
    return out;
  }
  std::vector<MaybeSharding> ResultShardings(const Node& n) const {
    std::vector<MaybeSharding> out;
    for (Value* v : n.results()) out.push_back(v->sharding());
    return out;
  }

  // Alternating forward and backward sweeps until nothing changes. Each sweep that changes
  // something adds at least one axis to some value; the bound is a safety net.
  void Sweep() {
    const size_t max_sweeps = 2 * (f_.nodes().size() + 2) * (mesh_.axis_names().size() + 1);
    bool changed = true;
    for (size_t sweeps = 0; changed && sweeps < max_sweeps; sweeps += 2) {
      changed = false;
      for (const auto& n : f_.nodes()) changed |= Visit(*n);
      ++report_.sweeps;
      for (auto it = f_.nodes().rbegin(); it != f_.nodes().rend(); ++it) changed |= Visit(**it);
      ++report_.sweeps;
      report_.changed |= changed;
    }
  }

  static bool ExpandingBroadcast(const Node& n) {
    return n.op() == ir::OpKind::kBroadcastInDim &&
           n.operand(0)->type().NumElements() < n.result()->type().NumElements();
  }

  std::vector<Candidate> Candidates(const Node& n, Value* v) {
    std::vector<Candidate> out;
    const ShardingRule* rule = GetShardingRule(n.op());
    std::vector<MaybeSharding> ops = OperandShardings(n);
    const bool deferred = defer_broadcasts_ && ExpandingBroadcast(n);
    for (Proposal& p : deferred ? std::vector<Proposal>{} : rule->forward(n, ops, mesh_)) {
      if (p.target != v->index() || !HasAxes(p.sharding)) continue;
      const Value* from = n.operand(p.source);
      out.push_back({std::move(p.sharding), from->type().ByteSize(), true, &n, p.source});
    }
    auto it = users_.find(v);
    if (it == users_.end()) return out;
    for (auto [user, index] : it->second) {
      const ShardingRule* urule = GetShardingRule(user->op());
      if (urule->backward == nullptr) continue;
      for (Proposal& p : urule->backward(*user, ResultShardings(*user), mesh_)) {
        if (p.target != index || !HasAxes(p.sharding)) continue;
        out.push_back({std::move(p.sharding), v->type().ByteSize(), false, user, index});
      }
    }
    return out;
  }

  bool Visit(const Node& n) {
    bool changed = false;
    for (Value* v : n.results()) {
      if (fixed_.count(v)) continue;
      std::vector<Candidate> cands = Candidates(n, v);
      if (cands.empty()) continue;
      Sharding chosen = Choose(v, cands);
      if (!v->sharding() || *v->sharding() != chosen) {
        v->set_sharding(std::move(chosen));
        changed = true;
      }
    }
    return changed;
  }

  // Picks v's sharding among `cands` (see propagation.h): each candidate, merged with the others
  // in order of weight, is one option; the option with the least cost wins.
  Sharding Choose(Value* v, std::vector<Candidate>& cands) {
    const Sharding base = v->sharding() ? *v->sharding() : Replicated(v->type().rank());
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.weight > b.weight; });
    struct Option {
      Sharding sharding;
      int64_t cost = 0;
      int64_t shards = 0;
    };
    std::vector<Option> options;
    for (size_t k = 0; k < cands.size(); ++k) {
      Option o{base, 0, 0};
      MergeInto(o.sharding, cands[k].sharding);
      for (const Candidate& c : cands) MergeInto(o.sharding, c.sharding);
      for (const Candidate& c : cands)
        if (!Honours(o.sharding, c.sharding)) o.cost += c.weight;
      o.shards = NumShards(o.sharding, mesh_);
      options.push_back(std::move(o));
    }
    size_t best = 0;
    for (size_t k = 1; k < options.size(); ++k) {
      const Option& a = options[k];
      const Option& b = options[best];
      if (a.cost < b.cost || (a.cost == b.cost && a.shards > b.shards)) best = k;
    }
    // A conflict is reported where it is decided: when some proposal loses and v's sharding changes
    // (later sweeps see the same proposals again and keep the decision).
    if (options[best].cost > 0 && options[best].sharding != base) {
      ++report_.conflicts;
      if (flags::debug()) Explain(v, base, cands, options, best);
    }
    return options[best].sharding;
  }

  template <typename Options>
  void Explain(const Value* v, const Sharding& base, const std::vector<Candidate>& cands, const Options& options,
               size_t best) const {
    std::string msg = fmt::format("[axle sharding] conflict at {}\n  current: {}\n", Describe(v), Text(base));
    for (size_t k = 0; k < cands.size(); ++k)
      msg += fmt::format("  candidate {}: {} from {}; ignoring it reshards {} bytes\n", k, Text(cands[k].sharding),
                         SourceText(cands[k]), cands[k].weight);
    for (size_t k = 0; k < options.size(); ++k)
      msg += fmt::format("  option {} (candidate {} first): {} costs {} bytes, {} shards{}\n", k, k,
                         Text(options[k].sharding), options[k].cost, options[k].shards, k == best ? "  <- chosen" : "");
    msg += fmt::format("  chosen: {}: the least bytes to reshard{}\n", Text(options[best].sharding),
                       std::count_if(options.begin(), options.end(),
                                     [&](const auto& o) { return o.cost == options[best].cost; }) > 1
                           ? " (tie: the most shards, then the heaviest candidate)"
                           : "");
    fmt::print(stderr, "{}", msg);
  }

  // The partial axes of a computed value follow from its operands' final shardings: recompute them
  // in one forward sweep (a sweep's early guess may have been made before an operand settled). A
  // function result is returned complete: it gets no partial axes (the partitioner reduces it).
  void FinalizePartials() {
    std::unordered_set<const Value*> results(f_.results().begin(), f_.results().end());
    for (const auto& n : f_.nodes()) {
      const ShardingRule* rule = GetShardingRule(n->op());
      if (rule->forward == nullptr) continue;
      std::vector<Proposal> props = rule->forward(*n, OperandShardings(*n), mesh_);
      for (Value* v : n->results()) {
        if (fixed_.count(v) || !v->sharding()) continue;
        Sharding s = *v->sharding();
        Axes partial;
        for (const Proposal& p : props)
          if (p.target == v->index()) {
            partial = p.sharding.partial;
            break;
          }
        s.partial.clear();
        if (!results.count(v))
          for (const auto& a : partial)
            if (!Uses(s, a)) s.partial.push_back(a);
        if (s != *v->sharding()) {
          v->set_sharding(std::move(s));
          report_.changed = true;
        }
      }
    }
  }

  ir::Function& f_;
  const ir::Mesh& mesh_;
  std::unordered_map<const Value*, std::vector<std::pair<Node*, int>>> users_;
  std::unordered_set<const Value*> fixed_;
  PropagationReport report_;
  bool defer_broadcasts_ = false;
};

}  // namespace

std::vector<std::string> CheckAnnotations(const ir::Module& module) {
  std::vector<std::string> notes;
  const ir::Function& f = *module.entry();
  bool any = false;
  for (const auto& n : f.nodes())
    for (const Value* r : n->results()) any = any || r->sharding().has_value();
  if (!module.mesh()) {
    if (any)
      Fail("module @{} has sharding annotations but no mesh: add {{mesh_axes=[...], mesh_shape=[...]}} to the "
           "module (docs/ir.md, \"Meshes\")",
           module.name());
    return notes;
  }
  for (const auto& n : f.nodes())
    for (const Value* r : n->results())
      if (r->sharding()) CheckOne(*r, *module.mesh(), notes);
  return notes;
}

PropagationReport PropagateShardings(ir::Module& module) {
  if (!module.mesh())
    Fail("sharding propagation: module @{} has no mesh; add {{mesh_axes=[...], mesh_shape=[...]}} to the module "
         "(docs/ir.md, \"Meshes\")",
         module.name());
  if (module.num_replicas() != 1)
    Fail("sharding propagation: module @{} runs on {} replicas: it is already partitioned (per-device shapes); "
         "propagate on the global program (num_replicas 1) before partitioning",
         module.name(), module.num_replicas());
  std::vector<std::string> notes = CheckAnnotations(module);
  Propagator p(*module.entry(), *module.mesh());
  PropagationReport report = p.Run();
  report.notes = std::move(notes);
  return report;
}

}  // namespace axle::spmd
