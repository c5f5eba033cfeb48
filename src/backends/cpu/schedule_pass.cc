// The CPU backend's schedule as IR: the `schedule` pass writes the executor's plan into the fused
// module (WriteSchedule), and the executor of a scheduled module reads it back (ReadSchedule).
//
// Note [Reading a schedule]
// The `schedule` pass plans the fused module for its target as the executor always did (views,
// pairs, chains, hoisting, fillers and followers, groups: the Notes of views.cc, pairs.cc,
// chains.cc and groups.cc) and writes what it decided into the module (Note [The schedule in the
// IR], ir/module.h):
//
//   module @m {schedule="cpu-avx2-2t"} {
//     func @main {
//       ...
//       %a = dot_general(%x, %w1) {...} sched{pair=[0, 0]} : f32[256,256]     with the next step
//       %b = dot_general(%x, %w2) {...} : f32[256,256]
//       %s = dot_general(%q, %k) {...} sched{chain=[3, 8]} : f32[2,4,32,32]   3 steps in 8 slices
//       %n1 = fusion(%p1, %g1) {...} sched{group=2} : f32[40000]               2 kernels, one loop
//       %q2 = fusion(%qkv) {...} sched{fold=read} : f32[...]     products read %qkv through views
//       %o = dot_general(%q2, %k2) {...} sched{lhs_view=[0, 2304, 1]} : ...    [offset, strides]
//       %p = fusion(%s) {...} sched{at=32768} : ...          its result's arena offset
//       %c = fusion(%a, %b) {...} sched{take=0} : ...        written over operand 0 (in place)
//
// The entry function's node order is the order the steps run in; pair=[fillers, followers] runs
// the product with the next one and then that many kernels beside them (Note [Kernels beside a
// pair], Note [Followers of a pair]); chain=[steps, slices] and group=steps cover the steps that
// follow. A module that carries a schedule is executed as written: `axle opt --passes=schedule`
// prints the decisions, and a file can state or change them. So the executor checks every entry
// before running any: the schedule must be for the executable's target; a region must be made of
// steps that may run that way (two whole products, the second not reading the first; fillers
// that read neither product; chain members that read the chain's values slice by slice; group
// members that read none of one another's results), whatever their sizes (sizes are the
// planner's business, legality the executor's); views are derived from the module again and must
// be exactly the ones written, since a view that no fold produces would read or write the wrong
// elements. A schedule that fails a check is an error naming the node and the entry, never a
// wrong answer. Group pieces, the slots a group's members share and each value's last use follow
// from the steps and are not written. The buffer plan's entries (at, take) are read after the
// plan is derived (Note [Buffers in the schedule], below).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>
#include <queue>
#include <unordered_map>

#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/executor_internal.h"
#include "passes/pass.h"
#include "runtime/profile.h"

namespace axle::runtime {
namespace internal {
namespace {

std::vector<int64_t> ViewInts(const cpu::View& v) {
  std::vector<int64_t> out{v.offset};
  out.insert(out.end(), v.strides.begin(), v.strides.end());
  return out;
}

bool IsViewKey(std::string_view key) { return key == "lhs_view" || key == "rhs_view" || key == "out_view"; }

// "@main: node #7 (dot_general -> %y) at f.axir:12": a scheduled node, for errors.
std::string Where(const Node* n) {
  return fmt::format("@{}: {}{}", n->parent()->name(), DescribeNode(*n),
                     n->loc().line > 0 ? fmt::format(" at {}:{}", n->loc().file, n->loc().line) : "");
}

bool IsBufferKey(std::string_view key) { return key == "at" || key == "take"; }

// Steps whose results the buffer plan places (not bound to an argument or a constant, nor
// another name of their operands' storage).
bool PlacesValues(const Step& st) {
  return st.kind != Step::kParameter && st.kind != Step::kConstant && st.kind != Step::kForward;
}
bool InArena(const passes::BufferPlan::Value& v) {
  return v.storage == passes::BufferPlan::Storage::kArena && v.buffer >= 0;
}

bool ReadsAnyOf(const Step& st, const std::vector<int>& slots) {
  return std::any_of(st.operands.begin(), st.operands.end(),
                     [&](int s) { return std::find(slots.begin(), slots.end(), s) != slots.end(); });
}

}  // namespace

void CpuExecutable::WriteSchedule(ir::Module& out) const {
  ir::Function& f = *out.entry();
  const auto& mine = f_->nodes();
  const auto& theirs = f.nodes();
  AXLE_CHECK(mine.size() == theirs.size(), "WriteSchedule: @{} has {} nodes, the planned module {}", f.name(),
             theirs.size(), mine.size());
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = 0; i < mine.size(); ++i) pos[mine[i].get()] = i;
  auto node = [&](const Node* n) { return theirs[pos.at(n)].get(); };
  for (size_t p = 0; p < steps_.size(); ++p) {
    const Step& st = steps_[p];
    std::vector<ir::ScheduleEntry> e;
    if (st.region >= 0 && regions_[static_cast<size_t>(st.region)].first == p) {
      const Region& r = regions_[static_cast<size_t>(st.region)];
      switch (r.kind) {
        case Region::kPair: e.push_back({"pair", {r.fillers, r.followers}, ""}); break;
        case Region::kChain: e.push_back({"chain", {r.steps, r.slices}, ""}); break;
        case Region::kGroup: e.push_back({"group", {r.steps}, ""}); break;
      }
    }
    if (!st.views.lhs.plain()) e.push_back({"lhs_view", ViewInts(st.views.lhs), ""});
    if (!st.views.rhs.plain()) e.push_back({"rhs_view", ViewInts(st.views.rhs), ""});
    if (!st.views.out.plain()) e.push_back({"out_view", ViewInts(st.views.out), ""});
    // Note [Buffers in the schedule]: where the step's results live and whose storage they take.
    if (PlacesValues(st)) {
      std::vector<int64_t> at, take;
      bool in_arena = false, takes = false;
      for (int s : st.results) {
        at.push_back(InArena(buffer_plan_.values[static_cast<size_t>(s)]) ? buffer_plan_.values[static_cast<size_t>(s)].offset : -1);
        in_arena = in_arena || at.back() >= 0;
      }
      for (const passes::BufferPlan::Take& t : buffer_plan_.takes[p]) {
        take.push_back(t.operand);
        takes = takes || t.operand >= 0;
      }
      if (in_arena) e.push_back({"at", std::move(at), ""});
      if (takes) e.push_back({"take", std::move(take), ""});
    }
    node(st.node)->set_schedule(std::move(e));
  }
  for (const FoldedCopy& c : folded_) node(c.node)->set_schedule({{"fold", {}, c.written ? "write" : "read"}});
  // The order: the steps' nodes in step order, each folded copy as soon as its operands exist
  // (before any step that reads it: a product reading a folded slice reads the slice's input,
  // and a step reading a folded transpose or concatenation reads the buffer its writers filled).
  std::unordered_map<const Node*, int64_t> key;  // step index; -1: a folded copy, first when ready
  for (size_t p = 0; p < steps_.size(); ++p) key[steps_[p].node] = static_cast<int64_t>(p);
  std::unordered_map<const Node*, int> waiting;
  std::unordered_map<const Node*, std::vector<const Node*>> users;
  for (const auto& n : mine) {
    std::vector<const Node*> producers;
    for (const Value* v : n->operands())
      if (std::find(producers.begin(), producers.end(), v->node()) == producers.end()) producers.push_back(v->node());
    waiting[n.get()] = static_cast<int>(producers.size());
    for (const Node* p : producers) users[p].push_back(n.get());
  }
  using Ready = std::pair<int64_t, size_t>;  // (key, position)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  auto key_of = [&](const Node* n) {
    const auto it = key.find(n);
    return it == key.end() ? int64_t{-1} : it->second;
  };
  for (const auto& n : mine)
    if (waiting[n.get()] == 0) ready.push({key_of(n.get()), pos[n.get()]});
  std::vector<const Node*> order;
  while (!ready.empty()) {
    const Node* n = mine[ready.top().second].get();
    ready.pop();
    order.push_back(n);
    for (const Node* u : users[n])
      if (--waiting[u] == 0) ready.push({key_of(u), pos[u]});
  }
  AXLE_CHECK(order.size() == mine.size(), "WriteSchedule: @{}: {} of {} nodes ordered", f.name(), order.size(),
             mine.size());
  // The steps keep their order (each one's operands exist before it in step order).
  std::vector<Node*> reordered;
  int64_t last = -1;
  for (const Node* n : order) {
    if (const int64_t k = key_of(n); k >= 0) {
      AXLE_CHECK(k > last, "WriteSchedule: @{}: step {} would run after step {}", f.name(), k, last);
      last = k;
    }
    reordered.push_back(node(n));
  }
  f.Reorder(reordered);
  out.set_scheduled_for(target_.ToString());
}

void CpuExecutable::ReadSchedule() {
  if (module_->scheduled_for() != target_.ToString())
    Fail("@{} was scheduled for {}, but the {} backend runs it for {}: schedule it for this target "
         "(axle opt --passes=schedule --target={}) or remove its schedule attribute and sched{{...}} entries",
         module_->name(), module_->scheduled_for(), backend_, target_.ToString(), target_.ToString());
  for (const auto& g : module_->functions())
    for (const auto& n : g->nodes())
      if (g.get() != f_ && !n->schedule().empty())
        Fail("@{}: {} of @{} has sched{{...}} entries, but only the entry function's nodes are scheduled", g->name(),
             n->name(), module_->name());
  auto ints = [&](const Node* n, const ir::ScheduleEntry& e, size_t count) {
    if (e.ints.size() != count || !e.word.empty() ||
        std::any_of(e.ints.begin(), e.ints.end(), [](int64_t i) { return i < 0; }))
      Fail("{}: sched{{{}=...}} expects {} non-negative integer{}", Where(n), e.key, count, count == 1 ? "" : "s");
    return e.ints;
  };

  // Folded copies: exactly the ones the views fold (Note [Products into views]), each as written.
  size_t annotated = 0;
  for (const auto& n : f_->nodes())
    if (n->FindSchedule("fold") != nullptr) ++annotated;
  if (annotated > 0) copies_folded_ = FoldViews(steps_, is_result_, &folded_);
  std::unordered_map<const Node*, bool> derived;
  for (const FoldedCopy& c : folded_) derived[c.node] = c.written;
  for (const auto& n : f_->nodes()) {
    const ir::ScheduleEntry* e = n->FindSchedule("fold");
    if (e == nullptr) continue;
    if (e->word != "read" && e->word != "write")
      Fail("{}: sched{{fold=...}} expects read or write", Where(n.get()));
    if (n->schedule().size() != 1)
      Fail("{}: a folded copy runs as no step of its own, so sched{{fold={}}} is its only entry", Where(n.get()), e->word);
    const auto it = derived.find(n.get());
    if (it == derived.end())
      Fail("{}: sched{{fold={}}}, but no product reads or writes this copy's values through a view (Note [Products "
           "into views]): schedule the module again (axle opt --passes=schedule)", Where(n.get()), e->word);
    if (it->second != (e->word == "write"))
      Fail("{}: sched{{fold={}}}, but the products {} this copy's values", Where(n.get()), e->word,
           it->second ? "write" : "read");
  }
  if (derived.size() != annotated)
    for (const FoldedCopy& c : folded_)
      if (c.node->FindSchedule("fold") == nullptr)
        Fail("{}: the schedule folds other copies, and products could {} this one's values through views too, but "
             "it has no sched{{fold={}}}: schedule the module again (axle opt --passes=schedule)",
             Where(c.node), c.written ? "write" : "read", c.written ? "write" : "read");

  // Each step's entries, in order; a region's steps carry none of their own.
  size_t covered = 0;  // steps before this belong to a region already
  const int threads = target_.threads;
  std::unordered_set<int> viewed;  // slots products write through views
  for (const Step& st : steps_)
    if (st.into != nullptr) viewed.insert(st.results.begin(), st.results.end());
  for (size_t p = 0; p < steps_.size(); ++p) {
    Step& st = steps_[p];
    const Node* n = st.node;
    // Views: as derived.
    const cpu::View* views[3] = {&st.views.lhs, &st.views.rhs, &st.views.out};
    const char* view_keys[3] = {"lhs_view", "rhs_view", "out_view"};
    for (int k = 0; k < 3; ++k) {
      const ir::ScheduleEntry* e = n->FindSchedule(view_keys[k]);
      const std::vector<int64_t> want = views[k]->plain() ? std::vector<int64_t>{} : ViewInts(*views[k]);
      if (e == nullptr && !want.empty())
        Fail("{}: the product reads or writes a folded copy's values through a view, but has no sched{{{}=[{}]}}",
             Where(n), view_keys[k], fmt::join(want, ", "));
      if (e != nullptr && (e->ints != want || !e->word.empty()))
        Fail("{}: sched{{{}=[{}]}}, but the folded copies give this product the view [{}] (Note [Products into "
             "views]): schedule the module again (axle opt --passes=schedule)",
             Where(n), view_keys[k], fmt::join(e->ints, ", "), fmt::join(want, ", "));
    }
    for (const ir::ScheduleEntry& e : n->schedule()) {
      if (IsViewKey(e.key) || IsBufferKey(e.key)) continue;  // views: above; buffers: ReadBuffers
      if (e.key != "pair" && e.key != "chain" && e.key != "group")
        Fail("{}: unknown schedule entry '{}' (the CPU schedule has pair, chain, group, fold, lhs_view, rhs_view, "
             "out_view, at and take)", Where(n), e.key);
      if (p < covered)
        Fail("{}: sched{{{}=...}} on a step that already runs in the region before it", Where(n), e.key);
      if (e.key == "pair") {
        const std::vector<int64_t> v = ints(n, e, 2);
        const size_t fillers = static_cast<size_t>(v[0]), followers = static_cast<size_t>(v[1]);
        if (p + 2 + fillers + followers > steps_.size())
          Fail("{}: sched{{pair=[{}, {}]}}: the pair and its kernels would run past the last step", Where(n), v[0], v[1]);
        if (!PairLegal(st, steps_[p + 1]))
          Fail("{}: sched{{pair=...}}: this step and the next are not two whole products of which the second does not "
               "read the first (Note [Products side by side])", Where(n));
        std::vector<int> unready(steps_[p + 1].results);
        for (size_t j = p + 2; j < p + 2 + fillers + followers; ++j) {
          const Step& f = steps_[j];
          const bool filler = j < p + 2 + fillers;
          if (!FillerLegal(f) || ReadsAnyOf(f, unready) || (filler && ReadsAnyOf(f, st.results)))
            Fail("{}: sched{{pair=[{}, {}]}}: {} is not a generated kernel that may run beside the pair (it must read "
                 "neither product's result{})", Where(n), v[0], v[1], Where(f.node),
                 filler ? " nor another filler's" : " that is still running nor a filler's");
          if (filler) unready.insert(unready.end(), f.results.begin(), f.results.end());
        }
        const int pair = static_cast<int>(regions_.size());
        regions_.push_back({.kind = Region::kPair, .steps = static_cast<int>(2 + fillers + followers),
                            .fillers = static_cast<int>(fillers), .followers = static_cast<int>(followers)});
        covered = p + 2 + fillers + followers;
        for (size_t j = p; j < covered; ++j) steps_[j].region = pair;
      } else if (e.key == "chain") {
        const std::vector<int64_t> v = ints(n, e, 2);
        const size_t count = static_cast<size_t>(v[0]);
        const int64_t slices = v[1];
        if (count < 2 || p + count > steps_.size())
          Fail("{}: sched{{chain=[{}, {}]}}: a chain has at least 2 steps, all in the function", Where(n), v[0], v[1]);
        if (ProductCut(st, slices, threads) == Cut::kNone)
          Fail("{}: sched{{chain=[{}, {}]}}: a chain starts at a product cut into {} slices of its batch items or row "
               "blocks for {} threads (Note [Batch-sliced chains])", Where(n), v[0], v[1], slices, threads);
        std::unordered_set<int> internal(st.results.begin(), st.results.end());
        bool linked = false;
        for (size_t j = p + 1; j < p + count; ++j) {
          const Step& m = steps_[j];
          const bool reads = std::any_of(m.operands.begin(), m.operands.end(), [&](int s) { return internal.count(s) > 0; });
          const bool cut = ProductCut(m, slices, threads) != Cut::kNone;
          const bool ok = m.kind != Step::kParameter && m.kind != Step::kConstant && m.kind != Step::kForward &&
                          m.kind != Step::kCollective &&
                          (reads ? ReadsBySlices(m, slices, threads, internal, viewed) && (m.kind != Step::kKernel || cut)
                                 : cut);
          if (!ok)
            Fail("{}: sched{{chain=[{}, {}]}}: {} cannot run in the chain's slices ({})", Where(n), v[0], v[1],
                 Where(m.node),
                 reads ? "it reads the chain's values other than slice by slice"
                       : "it reads none of them and is not a product cut into the same slices");
          linked = linked || reads;
          internal.insert(m.results.begin(), m.results.end());
        }
        if (!linked) Fail("{}: sched{{chain=[{}, {}]}}: no step of the chain reads another", Where(n), v[0], v[1]);
        Region chain{.kind = Region::kChain, .steps = static_cast<int>(count), .slices = slices};
        std::string label;
        for (size_t j = p; j < p + count; ++j) {
          Step& m = steps_[j];
          m.region = static_cast<int>(regions_.size());
          chain.cuts.push_back(ProductCut(m, slices, threads));
          if (profile::Labeling()) label += (j > p ? "; " : "") + m.label;
        }
        if (profile::Labeling()) chain.label = fmt::format("chain/{}{{{}}}", slices, label);
        regions_.push_back(std::move(chain));
        covered = p + count;
      } else {
        const size_t count = static_cast<size_t>(ints(n, e, 1)[0]);
        if (count < 2 || p + count > steps_.size())
          Fail("{}: sched{{group={}}}: a group has at least 2 steps, all in the function", Where(n), count);
        std::vector<int> made;
        for (size_t j = p; j < p + count; ++j) {
          const Step& m = steps_[j];
          if (!Groupable(m) || ReadsAnyOf(m, made))
            Fail("{}: sched{{group={}}}: {} cannot run in the group's loop (a group is generated element-wise kernels "
                 "that read none of one another's results, Note [Independent kernels as one loop])",
                 Where(n), count, Where(m.node));
          made.insert(made.end(), m.results.begin(), m.results.end());
        }
        FinishGroup(steps_, p, p + count);
        covered = p + count;
      }
    }
  }
}

// Note [Buffers in the schedule]
// The schedule pass writes the buffer plan (Note [Buffer assignment]) beside the steps: on each
// step that places values, at=[offset, ...] gives each result's byte offset in the arena (-1: a
// function result with storage of its own), and take=[operand, ...] the operand whose storage a
// result takes in place (-1: none; an argument's only if the caller donated it). They follow
// from the steps, so `axle opt` shows the plan and a .axir test can check it. Reading a scheduled
// module, the executor derives the plan from the steps again (lives, in-place writes) and then
// runs the offsets as written: a moved buffer is fine as long as no two buffers alive at the same
// time share a byte (passes::CheckBufferPlan), and the values of one buffer (in place, or
// written through a view) share an offset. The in-place writes must be exactly the derived ones,
// since they decide which values are one buffer. A schedule written without buffers (by hand, or
// before they were written) runs the plan as derived.
void CpuExecutable::ReadBuffers() {
  bool written = false;
  for (const Step& st : steps_) written = written || st.node->FindSchedule("at") || st.node->FindSchedule("take");
  if (!written) return;
  passes::BufferPlan plan = buffer_plan_;
  std::vector<int64_t> offset(static_cast<size_t>(plan.num_buffers), -1);
  std::vector<const Node*> placed_by(static_cast<size_t>(plan.num_buffers), nullptr);
  for (size_t p = 0; p < steps_.size(); ++p) {
    const Step& st = steps_[p];
    const Node* n = st.node;
    const ir::ScheduleEntry* at = n->FindSchedule("at");
    const ir::ScheduleEntry* take = n->FindSchedule("take");
    if (!PlacesValues(st)) {
      if (at != nullptr || take != nullptr)
        Fail("{}: sched{{{}=...}} on a step whose results are an argument, a constant or its operands under another "
             "name: the buffer plan places nothing here", Where(n), at != nullptr ? "at" : "take");
      continue;
    }
    std::vector<int64_t> derived;
    bool takes = false;
    for (const passes::BufferPlan::Take& t : plan.takes[p]) {
      derived.push_back(t.operand);
      takes = takes || t.operand >= 0;
    }
    if (takes ? take == nullptr || take->ints != derived || !take->word.empty() : take != nullptr)
      Fail("{}: {}, but the in-place rule of Note [Buffer assignment] gives {}: schedule the module again (axle opt "
           "--passes=schedule)", Where(n),
           take != nullptr ? fmt::format("sched{{take=[{}]}}", fmt::join(take->ints, ", ")) : "no sched{take=...}",
           takes ? fmt::format("take=[{}]", fmt::join(derived, ", ")) : "no in-place write");
    bool in_arena = false;
    for (int s : st.results) in_arena = in_arena || InArena(plan.values[static_cast<size_t>(s)]);
    if (!in_arena) {
      if (at != nullptr)
        Fail("{}: sched{{at=...}}, but no result of this step lives in the arena (each is a function result)", Where(n));
      continue;
    }
    if (at == nullptr)
      Fail("{}: no sched{{at=[...]}}, while other steps of the schedule place their results: every step with a "
           "result in the arena says where (Note [Buffers in the schedule])", Where(n));
    if (at->ints.size() != st.results.size() || !at->word.empty())
      Fail("{}: sched{{at=...}} expects {} offset{}, one per result", Where(n), st.results.size(),
           st.results.size() == 1 ? "" : "s");
    for (size_t r = 0; r < st.results.size(); ++r) {
      const passes::BufferPlan::Value& v = plan.values[static_cast<size_t>(st.results[r])];
      const int64_t w = at->ints[r];
      if (!InArena(v)) {
        if (w != -1)
          Fail("{}: sched{{at=...}}: result {} is a function result with storage of its own, so its offset is -1, "
               "not {}", Where(n), r, w);
        continue;
      }
      if (w < 0 || w % passes::kArenaAlign != 0)
        Fail("{}: sched{{at=...}}: result {} at {}: an arena offset is a multiple of 64 (a cache line)", Where(n), r, w);
      int64_t& o = offset[static_cast<size_t>(v.buffer)];
      if (o >= 0 && o != w)
        Fail("{}: sched{{at=...}} puts result {} at {}, but it is one buffer with a value {} placed at {} (in place, or "
             "written through a view)", Where(n), r, w, Where(placed_by[static_cast<size_t>(v.buffer)]), o);
      o = w;
      placed_by[static_cast<size_t>(v.buffer)] = n;
    }
  }
  plan.arena_bytes = 0;
  for (size_t s = 0; s < plan.values.size(); ++s) {
    passes::BufferPlan::Value& v = plan.values[s];
    if (!InArena(v)) continue;
    v.offset = offset[static_cast<size_t>(v.buffer)];
    AXLE_CHECK(v.offset >= 0, "slot {} is in the arena but no step placed it", s);
    plan.arena_bytes = std::max(plan.arena_bytes, v.offset + passes::ArenaAligned(buffer_problem_.values[s].bytes));
  }
  const std::string bad = passes::CheckBufferPlan(buffer_problem_, plan);
  if (!bad.empty())
    Fail("@{}: the schedule's arena offsets (sched{{at=...}}) do not fit: {} (Note [Buffers in the schedule]; the "
         "steps are as in axle compile --emit=buffers): schedule the module again (axle opt --passes=schedule)",
         f_->name(), bad);
  buffer_plan_ = std::move(plan);
}

void WriteSchedule(const Executable& exe, ir::Module& out) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&exe);
  AXLE_CHECK(cpu != nullptr, "WriteSchedule: not a CPU executable");
  cpu->WriteSchedule(out);
}

passes::MemoryProfile CpuExecutable::ProfileMemory(const ir::Function& like) const {
  const auto& mine = f_->nodes();
  const auto& theirs = like.nodes();
  AXLE_CHECK(mine.size() == theirs.size(), "ProfileMemory: @{} has {} nodes, the planned function {}", like.name(),
             theirs.size(), mine.size());
  std::unordered_map<const Node*, const Node*> to_like;
  for (size_t i = 0; i < mine.size(); ++i) to_like[mine[i].get()] = theirs[i].get();
  auto value = [&](const Value* v) { return to_like.at(v->node())->result(static_cast<size_t>(v->index())); };
  passes::MemoryProfile p;
  const int64_t steps = static_cast<int64_t>(steps_.size());
  // Each slot's value (a step's results are its node's or its kernel's outputs; a product written
  // through a view writes `into`), and the step of each node.
  std::vector<const Value*> value_of(slot_bytes_.size(), nullptr);
  for (int64_t t = 0; t < steps; ++t) {
    const Step& st = steps_[static_cast<size_t>(t)];
    std::vector<const Value*> results;
    if (st.kind == Step::kGenerated) results = st.generated->outputs;
    else for (const Value* v : st.node->results()) results.push_back(v);
    p.time[to_like.at(st.node)] = t;
    for (size_t r = 0; r < results.size() && r < st.results.size(); ++r) {
      p.time.emplace(to_like.at(results[r]->node()), t);
      if (value_of[static_cast<size_t>(st.results[r])] == nullptr) value_of[static_cast<size_t>(st.results[r])] = results[r];
    }
    if (st.into != nullptr) value_of[static_cast<size_t>(st.results[0])] = st.into;
  }
  // Nodes that are no step of their own (folded copies, a kernel's inner nodes): the step before.
  int64_t last = 0;
  for (const auto& n : theirs) {
    auto [it, added] = p.time.emplace(n.get(), last);
    last = it->second;
  }
  // Arena bytes in use at each step: each buffer over the union of its values' lives.
  struct Span {
    int64_t begin = -1, end = -1, bytes = 0;
  };
  std::unordered_map<int, Span> buffers;
  for (size_t s = 0; s < slot_bytes_.size(); ++s) {
    const passes::BufferPlan::Value& v = buffer_plan_.values[s];
    if (v.storage != passes::BufferPlan::Storage::kArena || v.buffer < 0 || v.begin < 0) continue;
    Span& b = buffers[v.buffer];
    b.begin = b.begin < 0 ? v.begin : std::min<int64_t>(b.begin, v.begin);
    b.end = std::max<int64_t>(b.end, v.end);
    b.bytes = std::max(b.bytes, passes::ArenaAligned(slot_bytes_[s]));
    if (value_of[s] != nullptr) p.life[value(value_of[s])] = {v.begin, v.end};
  }
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  for (const auto& [id, b] : buffers) {
    delta[static_cast<size_t>(b.begin)] += b.bytes;
    delta[static_cast<size_t>(std::min(b.end, steps - 1)) + 1] -= b.bytes;
  }
  p.SumLive(delta);
  p.allocated = buffer_plan_.arena_bytes;
  return p;
}

passes::MemoryProfile ProfileMemory(const Executable& exe, const ir::Function& like) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&exe);
  AXLE_CHECK(cpu != nullptr, "ProfileMemory: not a CPU executable");
  return cpu->ProfileMemory(like);
}

}  // namespace internal

namespace {

class SchedulePass : public passes::Pass {
 public:
  std::string_view name() const override { return "schedule"; }
  std::string_view summary() const override {
    return "The CPU backend's schedule for the target (--target): the entry's order and sched{...} entries for pairs, "
           "chains, groups and views (Note [Reading a schedule]). Runs on a fused module.";
  }
  void set_context(const passes::PassContext& context) override { context_ = context; }
  bool Run(ir::Module& module) override {
    if (context_.target.kind != "cpu")
      Fail("schedule: the CPU backend's schedule pass cannot schedule for target {}", context_.target.ToString());
    module.set_scheduled_for("");
    for (const auto& f : module.functions())
      for (const auto& n : f->nodes()) n->set_schedule({});
    ScheduleFusedModule(module, context_.target, context_.fast_math);
    return true;
  }

 private:
  passes::PassContext context_;
};

std::unique_ptr<passes::Pass> MakeSchedulePass() { return std::make_unique<SchedulePass>(); }

}  // namespace

void RegisterCpuPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    passes::RegisterPass(MakeSchedulePass);
    // Note [Memory models]: the remat pass measures with this backend's schedule and arena.
    passes::RegisterMemoryModel("cpu", [](const ir::Module& m, const passes::PassContext& c) {
      return ProfileFusedModule(m, c.target, c.fast_math);
    });
  });
}

}  // namespace axle::runtime
