// The CPU executor's plan and executable, shared by executor.cc (steps, buffers, the run loop),
// the planners that mark regions (views.cc, pairs.cc, chains.cc, groups.cc), the schedule's
// writer and reader (schedule_pass.cc, schedule.cc) and the region runner (region.cc). Not part
// of the runtime's interface: include executor.h for that.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cpu/kernels.h"
#include "core/error.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "passes/buffer_assignment.h"
#include "passes/remat.h"
#include "passes/target.h"

namespace axle::runtime::internal {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

// Note [Batch-sliced chains] (chains.cc): how a product is cut into a chain's slices.
enum class Cut { kNone, kItems, kRows };

// Note [Regions]
// A region is consecutive steps that run as one pool call, each planned for the target and
// written in the schedule (Note [Reading a schedule]): a pair of products with the small kernels
// beside it (pairs.cc), a chain cut into slices (chains.cc), or a group of element-wise loops
// (groups.cc). They differ only in what the pool's items are: a pair's are its products and
// fillers, each whole on one thread; a chain's are slices, each running every member's part of
// it in order; a group's are pieces of its members' loops. RunRegion runs all three: it binds
// every member's buffers first (none in place where another member may still read, as the buffer
// plan decides), makes one pool call over the items, and then runs, whole and in order, each
// member that did not finish inside the call (a pair's followers its thread did not reach, a
// chain whose product declined a slice) or whose fast kernel declined (the interpreter computes
// it into the same buffer).
struct Region {
  enum Kind { kPair, kChain, kGroup } kind = kPair;
  size_t first = 0;  // the first member's step (set once the order is final)
  int steps = 0;     // members: steps [first, first + steps); 0: undone while planning
  // kPair: members 0 and 1 are the products; [2, 2 + fillers) run beside them, each whole, by
  // whichever thread is free (Note [Kernels beside a pair]); the next `followers` by the first
  // product's thread while the second runs (Note [Followers of a pair]).
  int fillers = 0, followers = 0;
  // kChain: the members run slice by slice, each product cut into items or row blocks (`cuts`,
  // by member; Note [Batch-sliced chains]).
  int64_t slices = 0;
  std::vector<Cut> cuts{};
  // kGroup: the slots more than one member reads (none of them written in place), the pieces the
  // threads claim (elements [begin, end) of member `member`), and whether they split over the
  // pool (Note [Independent kernels as one loop]).
  struct Piece {
    int member;
    int64_t begin, end;
  };
  std::vector<int> shared{};
  std::vector<Piece> pieces{};
  bool parallel = false;
  // AXLE_PROFILE / AXLE_TRACE: a chain's or group's row, "chain/8{...}", "group/3{...}" (a pair's
  // members have rows of their own).
  std::string label{};
};

struct Step {
  const Node* node = nullptr;  // kGenerated: the kernel's first node (error locations)
  size_t index = 0;            // position in the plan (liveness, the buffer plan's steps)
  enum Kind { kParameter, kConstant, kForward, kKernel, kGenerated, kCollective } kind = kKernel;
  cpu::KernelChoice kernel;                  // kKernel: the hand kernel (fn null: the interpreter's)
  const GeneratedKernel* generated = nullptr;  // kGenerated
  std::vector<int> operands;  // slots
  std::vector<int> results;   // slots
  std::vector<int> release;   // slots whose last use is this step (deduplicated)
  std::shared_ptr<const Literal> constant;  // kConstant
  // Note [Products into views] (views.cc): a product's operands read and its result written
  // in place in larger buffers; with a result view, results[0] is the slot of `into`, the value
  // whose buffer it writes (allocated by the first of its writers).
  cpu::DotViews views;
  const ir::Value* into = nullptr;
  int region = -1;    // Note [Regions]: the region this step runs in (CpuExecutable::regions_), or -1
  std::string label;  // AXLE_PROFILE only
};

// "node #7 (dot_general -> %y)": a node's position in its function and its results (errors).
std::string DescribeNode(const Node& n);

// Whether step p is its region's first member (the step before it is not in that region).
inline bool StartsRegion(const std::vector<Step>& steps, size_t p) {
  return steps[p].region >= 0 && (p == 0 || steps[p - 1].region != steps[p].region);
}

// A kernel step's fast kernel on its operands' buffers, through its product's views when it has
// them (Note [Products into views]); false: no fast path, run the interpreter's kernel.
inline bool RunKernel(const Step& st, cpu::Operands ops, Literal& out) {
  return st.views.plain() ? st.kernel.fn(*st.node, ops, out) : cpu::DotKernel(*st.node, ops, out, st.views);
}

struct SlotState {
  BufferPtr buf;
  // The slot alone holds storage a result may take in place once it dies: a donated argument,
  // or memory of its own (not a range of the arena, whose reuse the buffer plan decides).
  bool writable = false;
  bool donated = false;   // its storage came from a donated argument
  bool counted = false;   // counted in live bytes (a node result)
};

// Note [Literals over an arena]: one run's arena (Note [Buffer assignment]) and a literal over
// each of its values' ranges, made once: a slot binds its value's literal without allocating.
struct Arena {
  ir::LiteralBytes memory;
  std::vector<Literal> views;  // by CpuExecutable::arena_view_
};

// Note [Buffers kept between runs]: bytes all executables keep for their next run, and the most.
std::atomic<int64_t>& KeptBytes();
int64_t MaxKeptBytes();

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::unique_ptr<ir::Module> module, std::vector<PlanItem> items,
                std::vector<GeneratedKernel> generated, std::shared_ptr<const void> keep_alive,
                std::string_view backend, const passes::Target& target)
      : module_(std::move(module)), generated_(std::move(generated)), keep_alive_(std::move(keep_alive)),
        backend_(backend), target_(target) {
    Plan(std::move(items));
  }
  ~CpuExecutable() override { KeptBytes().fetch_sub(kept_bytes_); }

  std::vector<BufferPtr> Execute(std::vector<BufferPtr> args) override;
  std::vector<BufferPtr> ExecuteOnDevice(std::vector<BufferPtr> args, const DeviceContext& device,
                                         ExecuteStats* stats) override;
  ExecuteStats last_stats() const override { return stats_; }
  const CpuScheduleStats& schedule_stats() const { return schedule_stats_; }
  std::string DescribeSchedule() const override;  // schedule.cc
  std::string DescribeBuffers() const override { return buffer_plan_.ToString(buffer_problem_); }
  PlannedBuffers buffers() const { return {&buffer_problem_, &buffer_plan_}; }
  // Note [The schedule in the IR] (schedule_pass.cc): writes this plan into `out`, a module equal
  // to the one it was planned from (its entry's nodes at the same positions): the entry's new
  // order, each step's schedule entries, and the target.
  void WriteSchedule(ir::Module& out) const;
  // Note [Memory models] (passes/remat.h): this plan's steps and arena as the remat pass reads
  // them, for `like`, a function equal to the entry it was planned from (nodes at the same
  // positions): the step each of its nodes runs in, the bytes of arena in use at each step, and
  // the steps each of its arena values is in use.
  passes::MemoryProfile ProfileMemory(const ir::Function& like) const;

 private:
  // The state of one Execute: executes may run concurrently (one per device), so nothing of it
  // lives in the executable.
  struct RunState {
    ExecuteStats stats;
    CpuScheduleStats schedule;
    std::shared_ptr<Arena> arena;
    int64_t live_bytes = 0;
    DeviceContext device;
  };

  void Plan(std::vector<PlanItem> items);
  // The schedule of an unscheduled module: views, pairs, chains, hoisting, fillers, groups, each
  // decided for target_ (Notes in views.cc, pairs.cc, chains.cc, groups.cc).
  void DecideSchedule();
  // A scheduled module's (Note [Reading a schedule], schedule_pass.cc): the steps are in the
  // module's order; each entry is checked and applied.
  void ReadSchedule();
  // After the buffer plan is derived: a scheduled module's arena offsets, checked and taken
  // (Note [Buffers in the schedule], schedule_pass.cc).
  void ReadBuffers();
  // Members [k, j) of a group: a region with the slots more than one reads, its pieces, whether
  // it splits.
  void FinishGroup(std::vector<Step>& steps, size_t k, size_t j);
  // Note [Buffer assignment]: the steps as a buffer problem, and its plan.
  void AssignBuffers(const std::vector<bool>& is_param, const std::vector<bool>& is_constant);
  void MarkChains(std::vector<Step>& steps);        // Note [Batch-sliced chains]
  void MarkGroups(std::vector<Step>& steps);        // Note [Independent kernels as one loop]
  void HoistBesidePairs(std::vector<Step>& steps) const;  // Note [Kernels beside a pair]
  void MarkBesidePairs(std::vector<Step>& steps);   // a pair's fillers and followers
  // After planning or reading: regions_ in step order, each with its first step, none undone.
  void NumberRegions();
  std::vector<BufferPtr> Run(std::vector<BufferPtr> args, RunState& rs);
  void RunGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots);
  // The buffers of a generated kernel's call: the outputs' storage (as the buffer plan says) is
  // bound to their slots. False: nothing to run (a copy whose output is its input's storage).
  struct GeneratedCall {
    std::vector<const void*> in;
    std::vector<void*> out;
  };
  bool BindGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots, GeneratedCall& call);
  static void CallGenerated(const GeneratedKernel& g, const GeneratedCall& call);
  // The same on this thread alone (beside a pair).
  static void CallGeneratedInline(const GeneratedKernel& g, const GeneratedCall& call);
  void RunCollective(RunState& rs, const Step& st, std::vector<SlotState>& slots);
  // Note [Regions]: the region's members as one pool call (region.cc).
  void RunRegion(RunState& rs, const Region& region, std::vector<SlotState>& slots);
  void CheckArguments(const std::vector<BufferPtr>& args) const;
  void Release(RunState& rs, std::vector<SlotState>& slots, int s);
  // Counts the step's results as live (peak bytes included) once it has run.
  void Produced(RunState& rs, const Step& st, std::vector<SlotState>& slots) const;
  int64_t StepBytes(const Step& st) const;  // operands + results (AXLE_PROFILE)
  // A labelled step that ran from t0 to now: a row of AXLE_PROFILE's table, a span of AXLE_TRACE's.
  void Timed(const Step& st, std::chrono::steady_clock::time_point t0, bool parallel) const;
  Error StepError(const Step& st, const Error& e) const;  // e, naming the step's node
  // The storage the buffer plan gives slot s: its range of the run's arena, or (a function
  // result) a new buffer of its own.
  BufferPtr Planned(RunState& rs, int s) const;
  // Result r of st: the dying operand's storage the plan lets it take, when the operand's slot
  // alone holds storage that may be written (its own, or a donated argument's); else Planned.
  BufferPtr ResultStorage(RunState& rs, const Step& st, size_t r, std::vector<SlotState>& slots, bool& donated) const;
  // Binds slot s to `buf` (writable unless it is a range of the arena).
  static void Bind(SlotState& slot, BufferPtr buf, bool donated);
  // The buffer a product with views (Note [Products into views]) writes, bound to its result slot:
  // its `into` value's (allocated by the first of that value's writers), else its own.
  Literal& ViewedProductOut(RunState& rs, const Step& st, std::vector<SlotState>& slots);

  std::unique_ptr<ir::Module> module_;
  std::vector<GeneratedKernel> generated_;
  std::shared_ptr<const void> keep_alive_;  // what the generated kernels' code lives in
  std::string backend_;
  passes::Target target_;  // what the plan's decisions were made for (threads)
  std::string run_label_;  // AXLE_TRACE's span of a whole run: "run @module (backend)"
  const ir::Function* f_ = nullptr;
  std::vector<Step> steps_;
  std::vector<Region> regions_;  // Note [Regions]: by Step::region
  std::vector<int64_t> slot_bytes_;
  std::vector<ir::TensorType> slot_types_;
  std::vector<bool> is_result_;       // slot is a function result (never freed)
  std::vector<int> result_slots_;
  std::vector<ir::TensorType> param_types_;
  std::vector<std::string> param_names_;
  bool has_collectives_ = false;
  int copies_folded_ = 0;  // Note [Products into views]
  std::vector<struct FoldedCopy> folded_;  // which ones, for WriteSchedule
  ExecuteStats stats_;  // of the last Execute (not ExecuteOnDevice)
  CpuScheduleStats schedule_stats_;
  // Note [Buffer assignment] (passes/buffer_assignment.h): where each slot lives.
  passes::BufferProblem buffer_problem_;
  passes::BufferPlan buffer_plan_;
  std::vector<int> arena_view_;  // per slot: its literal in Arena::views, or -1
  // Note [Buffers kept between runs]: a step runs the same executable again and again; the arena
  // of its last run is kept for the next, so a step reuses last step's memory instead of a malloc
  // and a free per intermediate (and fresh pages to fault in). Only from the second run on: a
  // module that runs once (an init) keeps nothing. Devices running the executable at once each
  // take an arena of their own. All executables together keep at most an eighth of the machine's
  // memory (KeptBytes): a program that runs many shapes does not hold every shape's arena.
  std::mutex kept_mu_;
  std::vector<std::shared_ptr<Arena>> kept_;
  int64_t kept_bytes_ = 0;
  int64_t runs_ = 0;
};

// Note [Products into views] (views.cc): a copy that FoldViews removed, and how: its readers
// read its input through views, or (written) its input's writers write its result through views.
struct FoldedCopy {
  const Node* node;
  bool written;
};
// Removes the copies that products can do without; returns how many, and lists them.
int FoldViews(std::vector<Step>& steps, const std::vector<bool>& is_result, std::vector<FoldedCopy>* folded);

// Note [Products side by side] (pairs.cc): marks the pairs for a two-thread target, each a new
// region of `regions`.
void MarkPairs(std::vector<Step>& steps, std::vector<Region>& regions, const passes::Target& target);
// Whether MarkPairs would pair consecutive steps a and b for `target`; PairLegal: whether a and
// b may run as a pair at all (two whole products, b not reading a), whatever their sizes.
bool Pairable(const Step& a, const Step& b, const passes::Target& target);
bool PairLegal(const Step& a, const Step& b);
// Note [Kernels beside a pair]: whether st may run beside a pair's products (a whole generated
// kernel, not a copy), whatever its size.
bool FillerLegal(const Step& st);
Cut ProductCut(const Step& st, int64_t slices, int threads);
// Whether step st, which reads some of `internal` (the slots earlier members of a chain of
// `slices` slices write), reads them slice by slice.
bool ReadsBySlices(const Step& st, int64_t slices, int threads, const std::unordered_set<int>& internal,
                   const std::unordered_set<int>& viewed);
// Note [Independent kernels as one loop] (groups.cc): whether st may join a group (a generated
// element-wise loop in no region).
bool Groupable(const Step& st);

}  // namespace axle::runtime::internal
