// remat: rematerialization under a memory budget (docs/memory.md, "A memory budget").
//
// Note [Rematerialization under a budget]
// A training step keeps its activations from the forward to the backward; its peak is where the
// most of them are in use at once. This pass rewrites the step so that what its backend
// allocates fits PassContext::memory_budget, recomputing values instead of keeping them, the
// most bytes per second of recomputation first (XLA's HloRematerialization does the same,
// greedily). It runs on the fused module (after `fuse`, before `schedule`), whose nodes are the
// kernels and whose values are the buffers a backend plans, and it measures with the target's
// memory model (Note [Memory models], remat.h): the CPU backend's schedule and buffer plan.
//   - a candidate is a kernel with results in use across the peak step: made before it, read
//     after it, not read at it. It is recomputed just before its first user (in node order) that
//     runs after the peak, and every user from there on reads the recomputation, of each of its
//     results (a layer norm's kernel makes its output and its statistics: one recomputation
//     serves both). Its operands no longer in use there are recomputed too (a chain of at most
//     kMaxChain kernels, cloned in order); arguments, constants and values still in use are read
//     as they are.
//   - the pick: most bytes freed per second of recomputation (products at kProductFlops, other
//     kernels at kBytesPerSecond of traffic), kernels that free under 1/kSmallShare of the excess
//     over the budget last (each try costs a plan, and freeing a mask lowers no peak).
//     Collectives, custom calls, barriers, parameters, constants and random bits (their counter
//     advances) are never recomputed, nor is a recomputation.
//   - a try is kept only when the model's plan is better: a lower peak, or the same peak over
//     fewer bytes above the budget (two equal layers each at the peak: one at a time). Else it
//     is undone and the next candidate tried, up to kTriesPerRound a round.
// It stops when the plan's allocation fits. When no candidate improves the plan it is an error
// naming the allocation reached (the smallest budget this pass meets) and the one without it.
// A clone repeats the same kernel on the same values, and a kernel computes the same bits
// wherever the schedule puts it (Note [Products side by side] in backends/cpu/pairs.cc: a
// product's calls do not depend on its neighbours), so the step's results are bitwise unchanged
// (tests/passes/remat_test.cc). No CSE runs after it (CSE would merge a clone into its original).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "core/flags.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/remat.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

constexpr size_t kMaxChain = 12;
constexpr int kTriesPerRound = 24;
constexpr int64_t kSmallShare = 64;
constexpr double kProductFlops = 100e9;   // product FLOP/s of a core, for the cost model only
constexpr double kBytesPerSecond = 10e9;  // other kernels' traffic

int64_t Bytes(const Value* v) { return v->type().ByteSize(); }

bool Recomputable(const Node& n) {
  switch (n.op()) {
    case OpKind::kParameter: case OpKind::kConstant: case OpKind::kCustomCall: case OpKind::kOptimizationBarrier:
    case OpKind::kRngBitGenerator:
      return false;
    default:
      return n.num_results() >= 1 && !n.info().Has(ir::kCollective);
  }
}

// Seconds a core takes to run n again, for ranking only.
double Cost(const Node& n) {
  if (n.op() == OpKind::kDotGeneral) {
    const auto& d = n.attrs_as<ir::DotGeneralAttrs>();
    int64_t k = 1;
    for (int64_t c : d.lhs_contracting) k *= n.operand(0)->shape().dim(c);
    return 2.0 * static_cast<double>(n.result()->type().NumElements()) * static_cast<double>(k) / kProductFlops;
  }
  int64_t bytes = 0;
  for (const Value* v : n.results()) bytes += Bytes(v);
  for (const Value* v : n.operands()) bytes += Bytes(v);
  return static_cast<double>(bytes) / kBytesPerSecond;
}

int64_t Excess(const MemoryProfile& p, int64_t budget) {
  int64_t sum = 0;
  for (int64_t b : p.live) sum += std::max<int64_t>(0, b - budget);
  return sum;
}

// a's plan is better than b's: a lower peak, or the same peak over fewer bytes above the budget.
bool Better(const MemoryProfile& a, const MemoryProfile& b, int64_t budget) {
  if (a.peak != b.peak) return a.peak < b.peak;
  return Excess(a, budget) < Excess(b, budget);
}

struct Candidate {
  const Node* node = nullptr;      // its results in use across the peak are what it frees
  Node* at = nullptr;              // the clones go just before it
  std::vector<const Node*> chain;  // nodes to clone, in node order (`node` last)
  int64_t bytes = 0;               // freed across the peak
  double score = 0;
};

// The step a node runs in (the model's), or -1.
int64_t TimeOf(const MemoryProfile& p, const Node* n) {
  auto it = p.time.find(n);
  return it == p.time.end() ? -1 : it->second;
}

std::vector<Candidate> Candidates(const ir::Function& f, const MemoryProfile& p, int64_t budget,
                                  const std::unordered_set<const Node*>& clones,
                                  const std::unordered_set<const Node*>& rejected) {
  std::unordered_map<const Node*, size_t> pos;
  std::unordered_map<const Value*, std::vector<Node*>> users;  // in node order
  std::unordered_set<const Value*> read_at_peak;
  for (size_t i = 0; i < f.nodes().size(); ++i) {
    Node* n = f.nodes()[i].get();
    pos[n] = i;
    for (const Value* o : n->operands()) {
      users[o].push_back(n);
      if (TimeOf(p, n) == p.peak_at) read_at_peak.insert(o);
    }
  }
  const std::unordered_set<const Value*> results(f.results().begin(), f.results().end());
  // Whether v can be read as it is at step t: an argument, a constant, a function result (own
  // storage to the end), or a value in use until t or later.
  auto available = [&](const Value* v, int64_t t) {
    const OpKind op = v->node()->op();
    if (op == OpKind::kParameter || op == OpKind::kConstant || results.count(v)) return true;
    auto it = p.life.find(v);
    return it != p.life.end() && it->second.second >= t;
  };
  // The kernels whose results are in use across the peak, and those results' bytes.
  std::unordered_map<const Node*, int64_t> freed;
  for (const auto& [v, life] : p.life)
    if (life.first < p.peak_at && life.second > p.peak_at && !read_at_peak.count(v) && !results.count(v))
      freed[v->node()] += Bytes(v);
  std::vector<Candidate> out;
  for (const auto& [node, bytes] : freed) {
    if (rejected.count(node) || clones.count(node) || !Recomputable(*node)) continue;
    // The clones go before the first user (in node order) that runs after the peak.
    Node* at = nullptr;
    for (const Value* r : node->results())
      for (Node* u : users[r])
        if (TimeOf(p, u) > p.peak_at && (at == nullptr || pos[u] < pos[at])) at = u;
    if (at == nullptr) continue;
    const int64_t t = TimeOf(p, at);
    // The chain: the node and, transitively, the producers of operands not available at t.
    std::vector<const Node*> chain;
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> stack{node};
    bool ok = true;
    while (ok && !stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (!Recomputable(*n) || clones.count(n) || seen.size() > kMaxChain || pos[n] >= pos[at]) {
        ok = false;
        break;
      }
      chain.push_back(n);
      for (const Value* o : n->operands())
        if (!available(o, t)) stack.push_back(o->node());
    }
    if (!ok) continue;
    std::sort(chain.begin(), chain.end(), [&](const Node* a, const Node* b) { return pos[a] < pos[b]; });
    double cost = 0;
    for (const Node* c : chain) cost += Cost(*c);
    out.push_back({node, at, std::move(chain), bytes, static_cast<double>(bytes) / (cost + 1e-9)});
  }
  // Best first; but a kernel freeing under kSmallShare of what the peak is over the budget (a mask,
  // an embedding's few rows: cheap, so first by score) only after the others. Ties by position
  // (deterministic, whatever the maps' order).
  const int64_t small = std::max<int64_t>(1, (p.peak - budget) / kSmallShare);
  std::sort(out.begin(), out.end(), [&](const Candidate& a, const Candidate& b) {
    if ((a.bytes < small) != (b.bytes < small)) return b.bytes < small;
    if (a.score != b.score) return a.score > b.score;
    return pos[a.node] < pos[b.node];
  });
  return out;
}

// What Apply did, to undo it.
struct Applied {
  std::vector<Node*> clones;
  std::vector<std::tuple<Node*, size_t, Value*>> redirected;  // user, operand, original value
};

Applied Apply(ir::Function& f, const Candidate& c) {
  Applied done;
  std::unordered_map<const Value*, Value*> clone;
  size_t at = static_cast<size_t>(f.IndexOf(c.at));
  for (const Node* n : c.chain) {
    std::vector<Value*> operands;
    for (Value* o : n->operands()) {
      auto it = clone.find(o);
      operands.push_back(it != clone.end() ? it->second : o);
    }
    std::vector<ir::TensorType> types;
    for (const Value* r : n->results()) types.push_back(r->type());
    Node* copy = f.InsertNode(at++, n->op(), std::move(operands), n->attrs(), types);
    copy->set_loc(n->loc());
    for (size_t i = 0; i < n->num_results(); ++i) {
      copy->result(i)->set_name(n->result(i)->name());
      copy->result(i)->set_sharding(n->result(i)->sharding());
      clone[n->result(i)] = copy->result(i);
    }
    done.clones.push_back(copy);
  }
  // Every user from c.at on reads the clones (c.at is now at position `at`).
  for (size_t i = at; i < f.nodes().size(); ++i) {
    Node* u = f.nodes()[i].get();
    for (size_t j = 0; j < u->num_operands(); ++j)
      if (auto it = clone.find(u->operand(j)); it != clone.end()) {
        done.redirected.emplace_back(u, j, u->operand(j));
        u->set_operand(j, it->second);
      }
  }
  return done;
}

void Undo(ir::Function& f, const Applied& done) {
  for (const auto& [user, j, original] : done.redirected) user->set_operand(j, original);
  for (size_t i = done.clones.size(); i-- > 0;) f.EraseNode(done.clones[i]);
}

// "%h1" (the node's first result, when named), else its op.
std::string Label(const Node& n) {
  return n.num_results() > 0 && !n.result(0)->name().empty() ? "%" + n.result(0)->name() : std::string(n.name());
}

// Sizes as --memory-budget reads them (decimal units).
std::string Size(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} KB", b / 1e3);
  return fmt::format("{} bytes", bytes);
}
// The smallest flag value of two or three digits that is at least `bytes`.
std::string SizeFlag(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f}GB", std::ceil(b / 1e7) / 100);
  if (b >= 1e6) return fmt::format("{:.0f}MB", std::ceil(b / 1e6));
  return fmt::format("{:.0f}KB", std::ceil(b / 1e3));
}

class RematPass : public Pass {
 public:
  std::string_view name() const override { return "remat"; }
  std::string_view summary() const override {
    return "Recomputes activations, most bytes per second first, until the target's plan of the step fits the "
           "memory budget (--memory-budget).";
  }
  void set_context(const PassContext& context) override { context_ = context; }
  bool Run(ir::Module& module) override {
    const int64_t budget = context_.memory_budget;
    if (budget <= 0 || module.entry() == nullptr) return false;
    ir::Function& f = *module.entry();
    const MemoryModel model = MemoryModelFor(context_.target.kind);
    MemoryProfile now = model(module, context_);
    const int64_t before = now.allocated;
    std::unordered_set<const Node*> clones;
    std::unordered_set<const Node*> rejected;  // tried at the current peak
    bool changed = false;
    while (now.allocated > budget) {
      bool kept = false;
      int tries = 0;
      for (const Candidate& c : Candidates(f, now, budget, clones, rejected)) {
        if (tries++ >= kTriesPerRound) break;
        const Applied done = Apply(f, c);
        MemoryProfile next = model(module, context_);
        if (Better(next, now, budget)) {
          if (flags::debug()) {
            std::string chain;
            for (const Node* n : c.chain) chain += " " + Label(*n);
            std::fprintf(stderr, "%s", fmt::format("remat: @{}: recomputing {} kernel(s) ({}) before {} frees {} across "
                                                   "step {}; in use at once {} -> {}\n",
                                                   f.name(), c.chain.size(), chain.substr(1), Label(*c.at),
                                                   Size(c.bytes), now.peak_at, Size(now.peak), Size(next.peak))
                                           .c_str());
          }
          if (next.peak < now.peak) rejected.clear();
          now = std::move(next);
          clones.insert(done.clones.begin(), done.clones.end());
          kept = changed = true;
          break;
        }
        Undo(f, done);
        rejected.insert(c.node);
      }
      if (!kept)
        Fail("remat: the memory budget of {} cannot be met: recomputing what this pass can (values in use across "
             "the peak, from values still in use there) brings @{}'s plan to {} ({} in use at once, at step {}), "
             "from {} without it; give --memory-budget {} or more, or --remat full",
             Size(budget), f.name(), Size(now.allocated), Size(now.peak), now.peak_at, Size(before),
             SizeFlag(now.allocated));
    }
    return changed;
  }

 private:
  PassContext context_;
};

std::mutex& ModelsMu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, MemoryModel>& Models() {
  static std::unordered_map<std::string, MemoryModel> models;
  return models;
}

}  // namespace

void RegisterMemoryModel(std::string_view kind, MemoryModel model) {
  std::lock_guard<std::mutex> lock(ModelsMu());
  Models()[std::string(kind)] = std::move(model);
}

MemoryModel MemoryModelFor(std::string_view kind) {
  std::lock_guard<std::mutex> lock(ModelsMu());
  auto it = Models().find(std::string(kind));
  return it != Models().end() ? it->second : MemoryModel(EstimateMemory);
}

void MemoryProfile::SumLive(const std::vector<int64_t>& delta) {
  live.assign(delta.empty() ? 0 : delta.size() - 1, 0);
  peak = peak_at = 0;
  int64_t sum = 0;
  for (size_t t = 0; t < live.size(); ++t) {
    live[t] = sum += delta[t];
    if (sum > peak) peak = sum, peak_at = static_cast<int64_t>(t);
  }
}

MemoryProfile EstimateMemory(const ir::Module& module, const PassContext&) {
  MemoryProfile p;
  const ir::Function* f = module.entry();
  if (f == nullptr) return p;
  const auto& nodes = f->nodes();
  const int64_t n = static_cast<int64_t>(nodes.size());
  std::unordered_map<const Value*, int64_t> last;
  for (int64_t i = 0; i < n; ++i) {
    p.time[nodes[static_cast<size_t>(i)].get()] = i;
    for (const Value* v : nodes[static_cast<size_t>(i)]->operands()) last[v] = i;
  }
  const std::unordered_set<const Value*> results(f->results().begin(), f->results().end());
  std::vector<int64_t> delta(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const Node& node = *nodes[static_cast<size_t>(i)];
    if (node.op() == OpKind::kParameter || node.op() == OpKind::kConstant) continue;
    for (const Value* r : node.results()) {
      if (results.count(r)) continue;
      auto it = last.find(r);
      const int64_t end = it == last.end() ? i : it->second;
      p.life[r] = {i, end};
      delta[static_cast<size_t>(i)] += Bytes(r);
      delta[static_cast<size_t>(end) + 1] -= Bytes(r);
    }
  }
  p.SumLive(delta);
  p.allocated = p.peak;
  return p;
}

std::unique_ptr<Pass> MakeRematPass() { return std::make_unique<RematPass>(); }

}  // namespace axle::passes
