// The CPU executor: the first backend behind runtime::Backend.
//
// Compile plans the entry function once: each node gets a fast kernel (cpu_kernels.h) or the
// reference interpreter's kernel for that one node (ir::EvaluateNode); each value gets a slot and
// its last use, so intermediates are freed right after it. Execute binds the arguments, runs the
// nodes in order (one kernel per non-trivial node; parameter and constant nodes only bind slots)
// and returns the result buffers.
//
// Buffers. A dying buffer that nothing else references (an intermediate, or a donated argument:
// a BufferPtr with use_count() == 1 on entry) goes to a per-Execute free list and is reused for
// a later result of identical type (the intermediates of one run seed the next run's list: Note
// [Buffers kept between runs]); an elementwise-style kernel may write its result straight
// into a dying operand of the result's type (in place). Constants and shared arguments are never
// written. last_stats(): kernels_run, donated_reused (results written into a donated argument's
// storage, in place or recycled), peak_bytes (peak of the live bytes of node results).
//
// Numerics. Every kernel but one is bitwise equal to the interpreter: elementwise f32 computes in
// float with the same C library calls, f64 in double; reduce sum/max/min accumulate in double in
// row-major order over the reduced dims and round once, exactly as the interpreter does. The
// exception is dot_general: f32/f64 products of at least cpu::BlasMinFlops() multiply-adds go to
// cblas_sgemm/cblas_dgemm, which accumulate in the element type (f32 for f32) in their own blocked
// order instead of the interpreter's double accumulation, so results differ by reassociation
// (typically a few ulps relative to sum |a*b|; more under cancellation; an f32 partial sum may
// overflow to inf where the interpreter's double sum does not). Smaller dots use an exact loop,
// and so do dots with a non-finite operand element (BLAS kernels may skip zero entries, which
// would drop the NaN of 0 * inf).
//
// Devices. Collective nodes are plan steps of their own: the result goes to a fresh or recycled
// buffer through the communicator of the device context (collectives.h); replica_id returns the
// device id. ExecuteOnDevice keeps its state on the stack, so several devices run one executable
// at once; Execute runs a one-replica module with a one-device communicator (devices.h).
//
// Threads. Large elementwise, movement and reduce loops (> kParallelElements) are split over a
// small pool (thread_pool.h, hardware_concurrency threads including the caller). BLAS is called
// from the executing thread only, so OpenBLAS's own pool can use every core.
#include "runtime/cpu_executor.h"

#include <malloc.h>

#include <limits>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "ir/interpreter.h"
#include "runtime/collectives.h"
#include "runtime/cpu_kernels.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {

void RunCollectiveNode(const ir::Node& n, const DeviceContext& device, const ir::Literal& in, ir::Literal& out) {
  Communicator& comm = *device.comm;
  const int d = device.device;
  switch (n.op()) {
    case ir::OpKind::kAllReduce: {
      const auto& a = n.attrs_as<ir::AllReduceAttrs>();
      return comm.AllReduce(d, in, out, a.kind, a.groups);
    }
    case ir::OpKind::kAllGather: {
      const auto& a = n.attrs_as<ir::AllGatherAttrs>();
      return comm.AllGather(d, in, out, a.dim, a.groups);
    }
    case ir::OpKind::kReduceScatter: {
      const auto& a = n.attrs_as<ir::ReduceScatterAttrs>();
      return comm.ReduceScatter(d, in, out, a.kind, a.dim, a.groups);
    }
    case ir::OpKind::kAllToAll: {
      const auto& a = n.attrs_as<ir::AllToAllAttrs>();
      return comm.AllToAll(d, in, out, a.split_dim, a.concat_dim, a.groups);
    }
    case ir::OpKind::kCollectivePermute:
      return comm.CollectivePermute(d, in, out, n.attrs_as<ir::CollectivePermuteAttrs>().pairs);
    default: Fail("internal error: {} is not a collective", n.name());
  }
}

namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

std::string DescribeNode(const Node& n, size_t pos) {
  std::string names;
  for (const Value* v : n.results())
    if (!v->name().empty()) names += (names.empty() ? " %" : ", %") + v->name();
  return fmt::format("node #{} ({}{})", pos, n.name(), names.empty() ? "" : " ->" + names);
}

struct Step {
  const Node* node = nullptr;  // kGenerated: the kernel's first node (error locations)
  size_t pos = 0;              // position in the function (errors) ...
  size_t index = 0;            // ... and in the plan (liveness)
  enum Kind { kParameter, kConstant, kForward, kKernel, kGenerated, kCollective } kind = kKernel;
  cpu::KernelChoice kernel;
  const GeneratedKernel* generated = nullptr;
  std::vector<int> operands;  // slots
  std::vector<int> results;   // slots
  std::vector<int> release;   // slots whose last use is this step (deduplicated)
  int64_t param_index = 0;
  std::shared_ptr<const Literal> constant;
  bool pair_next = false;  // Note [Products side by side]: runs beside the next step
  // Note [Kernels beside a pair]: on a pair's first step, how many of the steps after the pair
  // its two threads run too, whichever is free first.
  int fillers = 0;
  // Note [Followers of a pair]: on a pair's first step, how many of the steps after the fillers
  // the thread that ran the first product may run while the second is still running.
  int followers = 0;
  std::string label;  // AXLE_PROFILE only
};

struct SlotState {
  BufferPtr buf;
  bool writable = false;  // may be overwritten once dead (intermediate or donated storage)
  bool donated = false;   // its storage came from a donated argument
  bool counted = false;   // counted in live bytes (a node result)
};

// Note [Buffers kept between runs]: bytes all executables keep for their next run, and the most.
std::atomic<int64_t>& KeptBytes() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}
int64_t MaxKeptBytes() {
  static const int64_t most = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 8 : int64_t{1} << 30;
  }();
  return most;
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::unique_ptr<ir::Module> module, std::vector<PlanItem> items,
                std::vector<GeneratedKernel> generated, std::shared_ptr<const void> keep_alive,
                std::string_view backend)
      : module_(std::move(module)), generated_(std::move(generated)), keep_alive_(std::move(keep_alive)),
        backend_(backend) {
    Plan(std::move(items));
  }
  ~CpuExecutable() override { KeptBytes().fetch_sub(kept_bytes_); }

  std::vector<BufferPtr> Execute(std::vector<BufferPtr> args) override;
  std::vector<BufferPtr> ExecuteOnDevice(std::vector<BufferPtr> args, const DeviceContext& device,
                                         ExecuteStats* stats) override;
  ExecuteStats last_stats() const override { return stats_; }

 private:
  // The state of one Execute: executes may run concurrently (one per device), so nothing of it
  // lives in the executable.
  struct Free {
    BufferPtr buf;
    bool donated;
  };
  struct RunState {
    ExecuteStats stats;
    std::vector<Free> free;
    int64_t live_bytes = 0;
    DeviceContext device;
  };

  void Plan(std::vector<PlanItem> items);
  bool HoistBesidePairs(std::vector<Step>& steps) const;  // Note [Kernels beside a pair]
  void MarkBesidePairs(std::vector<Step>& steps) const;  // a pair's fillers and followers
  std::vector<BufferPtr> Run(std::vector<BufferPtr> args, RunState& rs);
  void RunGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots);
  // The buffers of a generated kernel's call: the outputs' storage is chosen and bound to their
  // slots. in_place: an output may take a dying input's storage (never beside a pair, whose
  // products may still read that input). False: nothing to run (a copy that took its input).
  struct GeneratedCall {
    std::vector<const void*> in;
    std::vector<void*> out;
  };
  bool BindGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots, bool in_place, GeneratedCall& call);
  static void CallGenerated(const GeneratedKernel& g, const GeneratedCall& call);
  void RunCollective(RunState& rs, const Step& st, std::vector<SlotState>& slots);
  // a, b, the a.fillers steps after b (Note [Kernels beside a pair]) and the a.followers steps
  // after those (Note [Followers of a pair]).
  void RunPair(RunState& rs, const Step* pair, std::vector<SlotState>& slots);
  void CheckArguments(const std::vector<BufferPtr>& args) const;
  void Release(RunState& rs, std::vector<SlotState>& slots, int s);
  // Counts the step's results as live (peak bytes included) once it has run.
  void Produced(RunState& rs, const Step& st, std::vector<SlotState>& slots) const;
  int64_t StepBytes(const Step& st) const;  // operands + results (AXLE_PROFILE)
  // A labelled step that ran from t0 to now: a row of AXLE_PROFILE's table, a span of AXLE_TRACE's.
  void Timed(const Step& st, std::chrono::steady_clock::time_point t0, bool parallel) const;
  Error StepError(const Step& st, const Error& e) const;  // e, naming the step's node
  BufferPtr Allocate(RunState& rs, const ir::TensorType& type, bool& donated);

  std::unique_ptr<ir::Module> module_;
  std::vector<GeneratedKernel> generated_;
  std::shared_ptr<const void> keep_alive_;  // what the generated kernels' code lives in
  std::string backend_;
  std::string run_label_;  // AXLE_TRACE's span of a whole run: "run @module (backend)"
  const ir::Function* f_ = nullptr;
  std::vector<Step> steps_;
  std::vector<int64_t> slot_bytes_;
  std::vector<bool> is_result_;       // slot is a function result (never freed)
  std::vector<int> result_slots_;
  std::vector<ir::TensorType> param_types_;
  std::vector<std::string> param_names_;
  bool has_collectives_ = false;
  ExecuteStats stats_;  // of the last Execute (not ExecuteOnDevice)
  // Note [Buffers kept between runs]: a step runs the same executable again and again; the
  // intermediates its last run freed (not donated arguments) seed the next run's free list, so
  // a step reuses last step's memory instead of a malloc and a free per intermediate (and, past
  // glibc's mmap threshold, fresh pages to fault in). Only from the second run on: a module that
  // runs once (an init) keeps nothing. A run never holds more than its own peak, and the buffers
  // are reused before anything new is allocated, so the peak does not grow. All executables
  // together keep at most an eighth of the machine's memory (KeptBytes): a program that runs many
  // shapes does not hold every shape's intermediates.
  std::mutex kept_mu_;
  std::vector<Free> kept_;
  int64_t kept_bytes_ = 0;
  int64_t runs_ = 0;
};

// Note [Products side by side]
// A backward pass computes each linear layer's two gradient products, dx = dy w^T and
// dw = x^T dy, one after the other; they read the same dy, neither reads the other, and they
// have the same multiply-adds. Split over two threads, each product is cut into two tiles that
// each pack their panels again, and the caller waits for the slower half; run side by side, one
// whole product per thread, neither happens (GPT-2 small's MLP pair, hot, in a C harness on
// MKL: 730-940 us split against 600-610 side by side). So with a pool of two threads, two
// consecutive products of at least kPairMacs multiply-adds each, within 2x of each other, of
// which the second does not read the first and each of whose results is at most
// kPairResultElements (a larger C is better cut into tiles, Note [Product tiles] in cpu_dot.cc:
// GPT-2 124M's LM head weight gradient is 38.6M), run as one pool call of two items, each product one
// BLAS call per batch item on its thread (cpu::ProductsOnOneThread). A pair is fixed when the
// executable is built and each product is computed by the same calls whichever thread (or, when
// the pool is crowded, the caller alone) runs it, so the bits do not depend on the schedule.
constexpr int64_t kPairMacs = int64_t{1} << 20;
constexpr int64_t kPairResultElements = int64_t{1} << 21;  // 8 MB of f32

int64_t ProductMacs(const Node& n) {
  const auto& d = n.attrs_as<ir::DotGeneralAttrs>();
  int64_t k = 1;
  for (int64_t c : d.lhs_contracting) k *= n.operand(0)->shape().dim(c);
  return n.result()->shape().NumElements() * k;
}

void MarkPairs(std::vector<Step>& steps) {
  if (ThreadPool::Global().num_threads() != 2) return;
  auto product = [](const Step& st) {
    return st.kind == Step::kKernel && st.kernel.fn && !st.kernel.in_place && st.node->op() == OpKind::kDotGeneral &&
           ProductMacs(*st.node) >= kPairMacs && st.node->result()->shape().NumElements() <= kPairResultElements;
  };
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    Step& a = steps[k];
    const Step& b = steps[k + 1];
    if (!product(a) || !product(b)) continue;
    const int64_t ma = ProductMacs(*a.node), mb = ProductMacs(*b.node);
    if (std::max(ma, mb) > 2 * std::min(ma, mb)) continue;
    const bool reads_a = std::any_of(b.operands.begin(), b.operands.end(), [&](int s) {
      return std::find(a.results.begin(), a.results.end(), s) != a.results.end();
    });
    if (reads_a) continue;
    a.pair_next = true;
    ++k;  // b is taken
  }
}

// Note [Kernels beside a pair]
// The two products of a pair rarely end together (GPT-2 small: one thread waited 1.4 ms a step
// for the other's product, ~0.07 ms a pair), while small kernels that read neither product sit
// right next to the pair: a bias gradient (a column sum of the dy both products read) just before
// it, and, in the schedule's last place, the global gradient norm's per-parameter sums of squares,
// tiny full reductions that ran one after the other on one thread (27 of them, ~0.25 ms of a
// GPT-2 small step's tail). So HoistBesidePairs moves such steps next to a pair: filler-sized
// steps (generated kernels reading at most kFillerElements elements) right before a pair that
// neither product reads go down to just after it, and each tiny reduction goes up to just after
// the first pair that starts after its inputs exist. Then up to kMaxFillers of the steps right
// after a pair that read neither product nor one another's results join the pair's pool call as
// whole items: the thread that finishes its product first takes the next one. GPT-2 small: 30
// kernels a step beside its 13 pairs (26 sums of squares, the QKV bias gradients and two
// transposes); the sums of squares left in the tail take 0.04 ms instead of 0.27.
// Moving a step up only shortens its inputs' lives and lengthens its tiny results'; moving one
// down lengthens its inputs' lives by a pair. A filler never writes in place (a product may still
// read its input). Every kernel computes the same values whichever thread runs it and however it
// is cut (Note [Pool chunks], thread_pool.h), so the bits do not depend on who took what.
constexpr int kMaxFillers = 8;
constexpr int64_t kFillerElements = int64_t{1} << 18;  // 1 MB of f32 read
constexpr int64_t kTinyResultElements = 64;

// Note [Followers of a pair]
// The backward pass's path runs through a pair's input gradient dx: the steps after a pair (the
// layer norm's backward rows, the bias gradients' column sums) read dx and not the weight
// gradient dw, which only the optimizer reads, at the end. Yet they waited for dw too: on a Zen 1
// host dw (A transposed, OpenBLAS) took 1.9-2.2 ms against dx's 1.8-1.9 (oneDNN), and the thread
// that ran dx sat idle ~1.7 ms a GPT-2 small step at the pairs' ends. So up to kMaxFollowers
// filler-sized steps after a pair's fillers that read neither dw nor a filler's result are the
// pair's followers: the thread that ran dx runs them, each whole and in order, for as long as dw
// is still running, and the steps it did not reach run after the pool call as usual (split).
// Their outputs are bound before the call and never in place, like the fillers'. Whoever runs a
// follower and however it is cut, it computes the same values (Note [Pool chunks]), so the bits
// do not depend on how far the thread got.
constexpr int kMaxFollowers = 8;

bool IsFillerKind(const Step& st, const std::vector<int64_t>& slot_bytes) {
  if (st.kind != Step::kGenerated || st.generated->is_copy || st.generated->fn == nullptr) return false;
  int64_t bytes = 0;
  for (int s : st.operands) bytes += slot_bytes[static_cast<size_t>(s)];
  return bytes <= kFillerElements * 4;
}

bool IsTinyReduction(const Step& st) {
  if (st.kind != Step::kGenerated || st.generated->is_copy) return false;
  for (const ir::Value* v : st.generated->outputs)
    if (v->type().NumElements() > kTinyResultElements) return false;
  return st.generated->reduction;
}

// Moves steps next to the pairs whose pool calls they can join (Note [Kernels beside a pair]):
// the filler-sized steps right before a pair that neither product (nor a later one of them)
// reads go down to just after it, and each tiny reduction goes up to just after the first pair
// that starts after all of its inputs are produced. True when anything moved.
bool CpuExecutable::HoistBesidePairs(std::vector<Step>& steps) const {
  if (ThreadPool::Global().num_threads() != 2) return false;
  const size_t n = steps.size();
  std::vector<size_t> pair_ends;  // positions of the second product of each pair
  for (size_t p = 0; p + 1 < n; ++p)
    if (steps[p].pair_next) pair_ends.push_back(p + 1);
  if (pair_ends.empty()) return false;
  std::vector<std::vector<size_t>> after(n);  // steps to emit after position p (a pair's end)
  std::vector<bool> moves(n, false);
  std::vector<size_t> at(n);  // where each step's results exist once moved
  for (size_t p = 0; p < n; ++p) at[p] = p;
  // Down: the contiguous run of candidates before each pair, nearest first.
  for (size_t end : pair_ends) {
    const size_t a = end - 1;
    std::vector<int> readers(steps[a].operands);
    readers.insert(readers.end(), steps[end].operands.begin(), steps[end].operands.end());
    std::vector<size_t> run;
    for (size_t c = a; c-- > 0;) {
      const Step& st = steps[c];
      if (moves[c] || st.pair_next || !IsFillerKind(st, slot_bytes_) || run.size() >= kMaxFillers) break;
      const bool read = std::any_of(st.results.begin(), st.results.end(), [&](int s) {
        return std::find(readers.begin(), readers.end(), s) != readers.end();
      });
      if (read) break;
      readers.insert(readers.end(), st.operands.begin(), st.operands.end());
      run.push_back(c);
    }
    for (size_t i = run.size(); i-- > 0;) {
      after[end].push_back(run[i]);
      moves[run[i]] = true;
      at[run[i]] = end;
    }
  }
  std::vector<int64_t> producer(slot_bytes_.size(), -1);  // where each slot exists, once moved
  for (size_t p = 0; p < n; ++p)
    for (int s : steps[p].results) producer[static_cast<size_t>(s)] = static_cast<int64_t>(at[p]);
  // Up: after the first pair whose first product comes after the inputs (end - 1 > ready).
  bool any = std::any_of(moves.begin(), moves.end(), [](bool m) { return m; });
  for (size_t p = 0; p < n; ++p) {
    if (moves[p] || !IsTinyReduction(steps[p])) continue;
    int64_t ready = -1;
    for (int s : steps[p].operands) ready = std::max(ready, producer[static_cast<size_t>(s)]);
    auto it = std::upper_bound(pair_ends.begin(), pair_ends.end(), static_cast<size_t>(ready + 1));
    if (it == pair_ends.end() || *it >= p) continue;
    after[*it].push_back(p);
    moves[p] = true;
    for (int s : steps[p].results) producer[static_cast<size_t>(s)] = static_cast<int64_t>(*it);
    any = true;
  }
  if (!any) return false;
  std::vector<Step> order;
  order.reserve(n);
  for (size_t p = 0; p < n; ++p) {
    if (!moves[p]) order.push_back(std::move(steps[p]));
    for (size_t q : after[p]) order.push_back(std::move(steps[q]));
  }
  steps = std::move(order);
  return true;
}

// Counts each pair's fillers (Note [Kernels beside a pair]: they read neither product nor one
// another) and then its followers (Note [Followers of a pair]: they read neither the second
// product nor a filler).
void CpuExecutable::MarkBesidePairs(std::vector<Step>& steps) const {
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    Step& a = steps[k];
    if (!a.pair_next) continue;
    std::vector<int> unready(steps[k + 1].results);  // the second product's and the fillers'
    size_t j = k + 2;
    auto mark = [&](int& count, int most, bool filler) {
      for (; j < steps.size() && count < most; ++j) {
        const Step& f = steps[j];
        if (f.pair_next || !IsFillerKind(f, slot_bytes_)) break;
        const bool reads = std::any_of(f.operands.begin(), f.operands.end(), [&](int s) {
          return std::find(unready.begin(), unready.end(), s) != unready.end() ||
                 (filler && std::find(a.results.begin(), a.results.end(), s) != a.results.end());
        });
        if (reads) break;
        if (filler) unready.insert(unready.end(), f.results.begin(), f.results.end());
        ++count;
      }
    };
    mark(a.fillers, kMaxFillers, /*filler=*/true);
    mark(a.followers, kMaxFollowers, /*filler=*/false);
    k = j - 1;
  }
}

void CpuExecutable::Plan(std::vector<PlanItem> items) {
  f_ = module_->entry();
  if (f_ == nullptr) Fail("{} backend: module @{} has no entry function", backend_, module_->name());
  if (profile::TraceEnabled()) run_label_ = fmt::format("run @{} ({})", module_->name(), backend_);
  std::unordered_map<const Value*, int> slot;
  std::unordered_map<const Node*, size_t> pos_of;
  std::vector<size_t> last_use;
  const auto& nodes = f_->nodes();
  for (size_t pos = 0; pos < nodes.size(); ++pos) pos_of[nodes[pos].get()] = pos;
  const std::vector<Node*> params = f_->Parameters();
  param_types_.resize(params.size());
  param_names_.resize(params.size());
  for (const Node* p : params) {
    const int64_t i = p->attrs_as<ir::ParameterAttrs>().index;
    if (i < 0 || i >= static_cast<int64_t>(params.size()))
      Fail("@{}: parameter index {} out of range 0..{}", f_->name(), i, params.size() - 1);
    param_types_[static_cast<size_t>(i)] = p->result()->type();
    param_names_[static_cast<size_t>(i)] = p->result()->name();
  }
  for (size_t index = 0; index < items.size(); ++index) {
    const PlanItem& item = items[index];
    Step st;
    st.index = index;
    std::vector<const Value*> operands, results;
    if (item.generated >= 0) {
      const GeneratedKernel& g = generated_.at(static_cast<size_t>(item.generated));
      st.kind = Step::kGenerated;
      st.generated = &g;
      st.node = g.first;
      operands = g.inputs;
      results = g.outputs;
    } else {
      st.node = item.node;
      for (const Value* v : item.node->operands()) operands.push_back(v);
      for (const Value* v : item.node->results()) results.push_back(v);
    }
    const Node& n = *st.node;
    st.pos = pos_of.at(&n);
    for (const Value* v : operands) {
      auto it = slot.find(v);
      if (it == slot.end())
        Fail("@{}: {}: an operand is not defined by an earlier node", f_->name(), DescribeNode(n, st.pos));
      st.operands.push_back(it->second);
      last_use[static_cast<size_t>(it->second)] = index;
    }
    for (const Value* v : results) {
      const int s = static_cast<int>(slot_bytes_.size());
      slot[v] = s;
      slot_bytes_.push_back(v->type().ByteSize());
      last_use.push_back(index);
      st.results.push_back(s);
    }
    if (st.kind == Step::kGenerated) {
      if (profile::Labeling()) st.label = st.generated->label;
      steps_.push_back(std::move(st));
      continue;
    }
    switch (n.op()) {
      case OpKind::kParameter:
        st.kind = Step::kParameter;
        st.param_index = n.attrs_as<ir::ParameterAttrs>().index;
        break;
      case OpKind::kConstant:
        st.kind = Step::kConstant;
        st.constant = std::make_shared<const Literal>(n.attrs_as<ir::ConstantAttrs>().value);
        break;
      case OpKind::kOptimizationBarrier: st.kind = Step::kForward; break;
      case OpKind::kAllReduce:
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllToAll:
      case OpKind::kCollectivePermute:
        st.kind = Step::kCollective;
        has_collectives_ = true;
        if (profile::Labeling()) st.label = profile::NodeLabel(n);
        break;
      default:
        if (n.info().traits & ir::kCollective)
          Fail("@{}: {}: the {} backend has no kernel for collective {}", f_->name(), DescribeNode(n, st.pos),
               backend_, n.name());
        st.kind = Step::kKernel;
        if (n.num_results() == 1) st.kernel = cpu::SelectKernel(n);
        if (!st.kernel.fn && !ir::HasInterpreterKernel(n.op()))
          Fail("@{}: {}: no cpu or interpreter kernel for op {}", f_->name(), DescribeNode(n, st.pos), n.name());
        if (profile::Labeling()) st.label = profile::NodeLabel(n);
        break;
    }
    steps_.push_back(std::move(st));
  }
  is_result_.assign(slot_bytes_.size(), false);
  for (const Value* v : f_->results()) {
    auto it = slot.find(v);
    if (it == slot.end()) Fail("@{}: a result is not defined by a node", f_->name());
    result_slots_.push_back(it->second);
    is_result_[static_cast<size_t>(it->second)] = true;
  }
  MarkPairs(steps_);
  // Note [Kernels beside a pair]: the tiny reductions move up beside a pair, so the slots' last
  // uses are counted again in the new order.
  if (HoistBesidePairs(steps_)) {
    for (size_t p = 0; p < steps_.size(); ++p) {
      Step& st = steps_[p];
      st.index = p;
      for (int s : st.operands) last_use[static_cast<size_t>(s)] = p;
      for (int s : st.results) last_use[static_cast<size_t>(s)] = p;
    }
    for (size_t p = 0; p < steps_.size(); ++p)
      for (int s : steps_[p].operands) last_use[static_cast<size_t>(s)] = std::max(last_use[static_cast<size_t>(s)], p);
  }
  for (Step& st : steps_) {
    auto add = [&](int s) {
      if (!is_result_[static_cast<size_t>(s)] && last_use[static_cast<size_t>(s)] == st.index &&
          std::find(st.release.begin(), st.release.end(), s) == st.release.end())
        st.release.push_back(s);
    };
    for (int s : st.operands) add(s);
    for (int s : st.results) add(s);
  }
  MarkBesidePairs(steps_);
}

void CpuExecutable::CheckArguments(const std::vector<BufferPtr>& args) const {
  if (args.size() != param_types_.size())
    Fail("@{}: expected {} arguments, got {}", f_->name(), param_types_.size(), args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string pname = param_names_[k].empty() ? "" : " (%" + param_names_[k] + ")";
    if (!args[k])
      Fail("@{}: argument {} is null, but parameter {}{} expects {}", f_->name(), k, k, pname,
           param_types_[k].ToString());
    if (args[k]->type() != param_types_[k])
      Fail("@{}: argument {} has type {}, but parameter {}{} expects {}", f_->name(), k,
           args[k]->type().ToString(), k, pname, param_types_[k].ToString());
  }
}

void CpuExecutable::Release(RunState& rs, std::vector<SlotState>& slots, int s) {
  SlotState& st = slots[static_cast<size_t>(s)];
  if (!st.buf) return;
  if (st.counted) rs.live_bytes -= slot_bytes_[static_cast<size_t>(s)];
  if (st.writable && st.buf.use_count() == 1) rs.free.push_back({std::move(st.buf), st.donated});
  st = SlotState{};
}

void CpuExecutable::Produced(RunState& rs, const Step& st, std::vector<SlotState>& slots) const {
  for (int s : st.results) {
    slots[static_cast<size_t>(s)].counted = true;
    rs.live_bytes += slot_bytes_[static_cast<size_t>(s)];
  }
  rs.stats.peak_bytes = std::max(rs.stats.peak_bytes, rs.live_bytes);
}

int64_t CpuExecutable::StepBytes(const Step& st) const {
  int64_t bytes = 0;
  for (int s : st.operands) bytes += slot_bytes_[static_cast<size_t>(s)];
  for (int s : st.results) bytes += slot_bytes_[static_cast<size_t>(s)];
  return bytes;
}

void CpuExecutable::Timed(const Step& st, std::chrono::steady_clock::time_point t0, bool parallel) const {
  const auto t1 = std::chrono::steady_clock::now();
  if (profile::Enabled())
    profile::Record(st.label, std::chrono::duration<double>(t1 - t0).count(), StepBytes(st), parallel);
  profile::TraceSpan(st.label, t0, t1);
}

Error CpuExecutable::StepError(const Step& st, const Error& e) const {
  return Error(st.node->loc(), fmt::format("@{}: {}: {}", f_->name(), DescribeNode(*st.node, st.pos), e.message()));
}

// A recycled buffer of the same size, the most recently freed first: it is the likeliest to be
// in cache still (a GPT-2 small step touches ~20 MB, more than a Zen 2's 16 MB L3; the products'
// C is cleared just before BLAS writes it, Note [Zeroing C ourselves]). Oldest first, as before,
// was 1-4% slower in 8 of 10 interleaved pairs of 150-step runs there (34.9K against 35.6K
// tokens/s, medians). Which buffer is reused changes no value.
BufferPtr CpuExecutable::Allocate(RunState& rs, const ir::TensorType& type, bool& donated) {
  const int64_t bytes = type.ByteSize();
  for (size_t i = rs.free.size(); i-- > 0;) {
    if (rs.free[i].buf->type().ByteSize() == bytes) {
      BufferPtr b = std::move(rs.free[i].buf);
      if (b->type() != type) b->Retype(type);
      donated = rs.free[i].donated;
      rs.free.erase(rs.free.begin() + static_cast<std::ptrdiff_t>(i));
      return b;
    }
  }
  donated = false;
  ++rs.stats.new_buffers;
  return std::make_shared<Literal>(Literal::Uninitialized(type));
}

// A generated kernel: each output takes, in order of preference, the storage of a dying input
// of its type that the kernel reads only at the loop index (in place: the loop reads element i
// before it writes element i), a recycled buffer, or new memory.
bool CpuExecutable::BindGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots, bool in_place,
                                  GeneratedCall& call) {
  const GeneratedKernel& g = *st.generated;
  call.in.resize(st.operands.size());
  call.out.resize(st.results.size());
  std::vector<bool> taken(st.operands.size(), false);
  bool aliased = false;
  for (size_t j = 0; j < st.operands.size(); ++j)
    call.in[j] = slots[static_cast<size_t>(st.operands[j])].buf->bytes().data();
  for (size_t r = 0; r < st.results.size(); ++r) {
    const ir::TensorType& type = g.outputs[r]->type();
    BufferPtr buf;
    bool donated = false;
    for (size_t j = 0; j < st.operands.size() && !buf && in_place; ++j) {
      const int s = st.operands[j];
      SlotState& src = slots[static_cast<size_t>(s)];
      if (taken[j] || !g.input_at_index[j] || !src.writable || src.buf.use_count() != 1 ||
          src.buf->dtype() != type.dtype || src.buf->NumElements() != type.NumElements() ||
          std::find(st.release.begin(), st.release.end(), s) == st.release.end())
        continue;
      taken[j] = true;
      buf = src.buf;  // the input slot keeps its reference until released after the step
      donated = src.donated;
      aliased = true;
    }
    if (!buf) buf = Allocate(rs, type, donated);
    if (donated) ++rs.stats.donated_reused;
    if (buf->type() != type) buf->Retype(type);
    call.out[r] = buf->mutable_bytes().data();
    SlotState& res = slots[static_cast<size_t>(st.results[r])];
    res.buf = std::move(buf);
    res.writable = true;
    res.donated = donated;
  }
  return !(g.is_copy && aliased);  // else the output is the input's storage already
}

void CpuExecutable::RunGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots) {
  GeneratedCall call;
  if (!BindGenerated(rs, st, slots, /*in_place=*/true, call)) return;
  CallGenerated(*st.generated, call);
}

// Runs a generated kernel whose buffers are bound, split over the pool when it is large enough.
void CpuExecutable::CallGenerated(const GeneratedKernel& g, const GeneratedCall& call) {
  const GeneratedKernel::Fn fn = g.fn;
  const void* const* pin = call.in.data();
  void* const* pout = call.out.data();
  const int64_t chunk = g.min_chunk > 0 ? g.min_chunk : kParallelElements;
  if (g.elements >= chunk && g.elements > 1) {
    ThreadPool::Global().ParallelFor(g.elements, chunk, [&](int64_t b, int64_t e) { fn(pin, pout, b, e); },
                                     g.chunks_per_thread);
  } else if (g.elements > 0) {
    fn(pin, pout, 0, g.elements);
  }
}

// Note [Products side by side]: two products (kernels of one result, not in place), one per thread,
// then (Note [Kernels beside a pair]) the fillers, each whole, by whichever thread is free, and
// (Note [Followers of a pair]) the followers, by the first product's thread while the second runs.
void CpuExecutable::RunPair(RunState& rs, const Step* pair, std::vector<SlotState>& slots) {
  const Step* st[2] = {&pair[0], &pair[1]};
  const int fillers = pair[0].fillers;
  const int followers = pair[0].followers;
  const int items = 2 + fillers;
  std::vector<const Literal*> ops[2];
  BufferPtr out[2];
  bool donated[2] = {false, false}, done[2] = {false, false};
  std::vector<double> secs(static_cast<size_t>(items + followers), 0.0);
  std::vector<std::exception_ptr> error(static_cast<size_t>(items + followers));
  for (int i = 0; i < 2; ++i) {
    for (int s : st[i]->operands) ops[i].push_back(slots[static_cast<size_t>(s)].buf.get());
    out[i] = Allocate(rs, st[i]->node->result()->type(), donated[i]);
  }
  // The fillers' and followers' outputs are bound before the call (the free list is not thread
  // safe), never in place: the products may read any input while a filler writes. A follower may
  // read the first product, so its slot holds that product's buffer from here on.
  std::vector<GeneratedCall> calls(static_cast<size_t>(fillers + followers));
  std::vector<char> bound(static_cast<size_t>(fillers + followers), 0);
  if (followers > 0) {
    SlotState& r = slots[static_cast<size_t>(st[0]->results[0])];
    r.buf = out[0];
    r.writable = true;
    r.donated = donated[0];
  }
  for (int f = 0; f < fillers + followers; ++f)
    bound[static_cast<size_t>(f)] = BindGenerated(rs, pair[2 + f], slots, /*in_place=*/false, calls[static_cast<size_t>(f)]);
  std::atomic<bool> second_done{false};
  int followed = 0;  // followers run inside the call, by the first product's thread
  auto run = [&](int64_t i) {  // pair[i] whole on this thread, timed; an error is kept for later
    const Step& s = pair[i];
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (i < 2) {
        done[i] = s.kernel.fn(*s.node, ops[i], *out[i]);
      } else if (bound[static_cast<size_t>(i - 2)] && s.generated->elements > 0) {
        const GeneratedCall& c = calls[static_cast<size_t>(i - 2)];
        s.generated->fn(c.in.data(), c.out.data(), 0, s.generated->elements);
      }
    } catch (...) {
      error[static_cast<size_t>(i)] = std::current_exception();
    }
    const auto t1 = std::chrono::steady_clock::now();
    secs[static_cast<size_t>(i)] = std::chrono::duration<double>(t1 - t0).count();
    profile::TraceSpan(s.label, t0, t1);  // on the thread that ran it
  };
  ThreadPool::Global().ParallelFor(items, 1, [&](int64_t lo, int64_t hi) {
    cpu::ProductsOnOneThread alone;
    for (int64_t i = lo; i < hi; ++i) {
      run(i);
      if (i == 1) second_done.store(true, std::memory_order_release);
      if (i != 0 || !done[0] || error[0]) continue;
      while (followed < followers && !second_done.load(std::memory_order_acquire)) {
        const int64_t f = items + followed++;
        run(f);
        if (error[static_cast<size_t>(f)]) break;
      }
    }
  }, items);
  for (int i = 0; i < items + followers; ++i) {
    const Step& s = pair[i];
    ++rs.stats.kernels_run;
    try {
      if (error[static_cast<size_t>(i)]) std::rethrow_exception(error[static_cast<size_t>(i)]);
      if (i < 2) {
        ++rs.stats.products_paired;
        SlotState& r = slots[static_cast<size_t>(s.results[0])];
        if (!done[i]) {
          // The interpreter's values go into the storage the followers' inputs point at.
          ++rs.stats.fallback_kernels;
          const Literal res = std::move(ir::EvaluateNode(*s.node, ops[i], rs.device.device)[0]);
          std::memcpy(out[i]->mutable_bytes().data(), res.bytes().data(), res.bytes().size());
        }
        if (donated[i]) ++rs.stats.donated_reused;
        r.buf = std::move(out[i]);
        r.donated = donated[i];
        r.writable = true;
      } else if (i < items) {
        ++rs.stats.kernels_beside_pairs;
      } else if (i < items + followed) {
        ++rs.stats.followers_beside_pairs;
      } else {  // not reached while the second product ran: split over the pool, as usual
        const auto t0 = std::chrono::steady_clock::now();
        const int64_t splits = ThreadPool::Global().dispatches();
        {
          ThreadPool::CallLabel chunks(s.label);
          if (bound[static_cast<size_t>(i - 2)]) CallGenerated(*s.generated, calls[static_cast<size_t>(i - 2)]);
        }
        if (!s.label.empty()) Timed(s, t0, ThreadPool::Global().dispatches() != splits);
      }
    } catch (const Error& e) {
      throw StepError(s, e);
    }
    Produced(rs, s, slots);
    if (!s.label.empty() && profile::Enabled() && i < items + followed)
      profile::Record(s.label, secs[static_cast<size_t>(i)], StepBytes(s), /*parallel=*/false);
  }
}

// A collective: the result goes to a fresh or recycled buffer (never an operand's storage: the
// group's peers read the operand while this device writes its result).
void CpuExecutable::RunCollective(RunState& rs, const Step& st, std::vector<SlotState>& slots) {
  const Node& n = *st.node;
  const Literal& in = *slots[static_cast<size_t>(st.operands[0])].buf;
  bool donated = false;
  BufferPtr out = Allocate(rs, n.result()->type(), donated);
  RunCollectiveNode(n, rs.device, in, *out);
  if (donated) ++rs.stats.donated_reused;
  SlotState& r = slots[static_cast<size_t>(st.results[0])];
  r.buf = std::move(out);
  r.writable = true;
  r.donated = donated;
}

std::vector<BufferPtr> CpuExecutable::Execute(std::vector<BufferPtr> args) {
  if (module_->num_replicas() != 1)
    Fail("@{}: module @{} is partitioned for {} replicas: run it on {} devices with runtime::ReplicatedExecutable "
         "(devices.h; AXLE_CPU_DEVICES={}), not with Execute",
         f_->name(), module_->name(), module_->num_replicas(), module_->num_replicas(), module_->num_replicas());
  RunState rs;
  // One replica: each collective's groups hold only this device (identity, computed as the
  // interpreter computes it).
  std::unique_ptr<Communicator> local;
  if (has_collectives_) {
    local = NewInProcessCommunicator(1);
    rs.device.comm = local.get();
  }
  std::vector<BufferPtr> out = Run(std::move(args), rs);
  stats_ = rs.stats;
  return out;
}

std::vector<BufferPtr> CpuExecutable::ExecuteOnDevice(std::vector<BufferPtr> args, const DeviceContext& device,
                                                      ExecuteStats* stats) {
  if (device.comm == nullptr) Fail("@{}: ExecuteOnDevice without a communicator", f_->name());
  if (device.comm->num_devices() != module_->num_replicas())
    Fail("@{}: module @{} is partitioned for {} replicas but runs on {} devices", f_->name(), module_->name(),
         module_->num_replicas(), device.comm->num_devices());
  if (device.device < 0 || device.device >= device.comm->num_devices())
    Fail("@{}: device {} is out of range for {} devices", f_->name(), device.device, device.comm->num_devices());
  RunState rs;
  rs.device = device;
  std::vector<BufferPtr> out = Run(std::move(args), rs);
  if (stats) *stats = rs.stats;
  return out;
}

std::vector<BufferPtr> CpuExecutable::Run(std::vector<BufferPtr> args, RunState& rs) {
  CheckArguments(args);
  profile::TraceScope span(run_label_);
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(kept_mu_);  // Note [Buffers kept between runs]
    rs.free = std::move(kept_);
    kept_.clear();
    KeptBytes().fetch_sub(kept_bytes_);
    kept_bytes_ = 0;
    keep = ++runs_ >= 2;
  }
  std::vector<SlotState> slots(slot_bytes_.size());
  std::vector<bool> donated_arg(args.size());
  for (size_t k = 0; k < args.size(); ++k) donated_arg[k] = args[k].use_count() == 1;
  std::vector<const Literal*> ops;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& st = steps_[k];
    if (st.pair_next) {
      RunPair(rs, &st, slots);
      const size_t last = k + 1 + static_cast<size_t>(st.fillers + st.followers);
      for (; k <= last; ++k)
        for (int s : steps_[k].release) Release(rs, slots, s);
      --k;
      continue;
    }
    const Node& n = *st.node;
    ops.clear();
    for (int s : st.operands) ops.push_back(slots[static_cast<size_t>(s)].buf.get());
    switch (st.kind) {
      case Step::kParameter: {
        SlotState& out = slots[static_cast<size_t>(st.results[0])];
        const size_t k = static_cast<size_t>(st.param_index);
        out.buf = std::move(args[k]);
        out.writable = out.donated = donated_arg[k];
        break;
      }
      case Step::kConstant: {
        SlotState& out = slots[static_cast<size_t>(st.results[0])];
        if (is_result_[static_cast<size_t>(st.results[0])])
          out.buf = std::make_shared<Literal>(*st.constant);  // the caller may write results
        else
          out.buf = std::const_pointer_cast<Literal>(st.constant);  // read only: writable = false
        break;
      }
      case Step::kForward:
        for (size_t j = 0; j < st.results.size(); ++j)
          slots[static_cast<size_t>(st.results[j])] = slots[static_cast<size_t>(st.operands[j])];
        for (size_t j = 0; j < st.results.size(); ++j) slots[static_cast<size_t>(st.results[j])].counted = false;
        break;
      case Step::kGenerated: {
        ++rs.stats.kernels_run;
        const auto t0 = st.label.empty() ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
        const int64_t splits = st.label.empty() ? 0 : ThreadPool::Global().dispatches();
        {
          ThreadPool::CallLabel chunks(st.label);
          RunGenerated(rs, st, slots);
        }
        Produced(rs, st, slots);
        if (!st.label.empty()) Timed(st, t0, ThreadPool::Global().dispatches() != splits);
        break;
      }
      case Step::kCollective:
      case Step::kKernel: {
        ++rs.stats.kernels_run;
        bool done = false;
        const auto t0 = st.label.empty() ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
        const int64_t splits = st.label.empty() ? 0 : ThreadPool::Global().dispatches();
        ThreadPool::CallLabel chunks(st.label);
        try {
          if (st.kind == Step::kCollective) {
            RunCollective(rs, st, slots);
            done = true;
          } else if (st.kernel.fn) {  // single-result nodes only
            const ir::TensorType& rtype = n.result()->type();
            BufferPtr out;
            bool out_donated = false;
            if (st.kernel.in_place) {
              for (size_t j = 0; j < st.operands.size() && !out; ++j) {
                const int s = st.operands[j];
                if (st.kernel.in_place_operand >= 0) {
                  // Only that operand, and only when the value is not also another operand
                  // (scatter_add(x, i, x) must not write its updates while reading them).
                  if (static_cast<int>(j) != st.kernel.in_place_operand ||
                      std::count(st.operands.begin(), st.operands.end(), s) != 1)
                    continue;
                }
                SlotState& in = slots[static_cast<size_t>(s)];
                if (in.writable && in.buf.use_count() == 1 && in.buf->type() == rtype &&
                    std::find(st.release.begin(), st.release.end(), s) != st.release.end()) {
                  out = in.buf;  // slot keeps its reference until released below (use_count 2)
                  out_donated = in.donated;
                }
              }
            }
            if (!out) out = Allocate(rs, rtype, out_donated);
            if (st.kernel.fn(n, ops, *out)) {
              if (out_donated) ++rs.stats.donated_reused;
              SlotState& r = slots[static_cast<size_t>(st.results[0])];
              r.buf = std::move(out);
              r.writable = true;
              r.donated = out_donated;
              done = true;
            } else if (out.use_count() == 1) {
              rs.free.push_back({std::move(out), out_donated});
            }
          }
          if (!done) {
            ++rs.stats.fallback_kernels;
            std::vector<Literal> res = ir::EvaluateNode(n, ops, rs.device.device);  // replica_id: the device
            for (size_t j = 0; j < res.size(); ++j) {
              SlotState& r = slots[static_cast<size_t>(st.results[j])];
              r.buf = std::make_shared<Literal>(std::move(res[j]));
              r.writable = true;
            }
          }
        } catch (const Error& e) {
          throw StepError(st, e);
        }
        if (!st.label.empty()) Timed(st, t0, ThreadPool::Global().dispatches() != splits);
        Produced(rs, st, slots);
        break;
      }
    }
    for (int s : st.release) Release(rs, slots, s);
  }
  std::vector<BufferPtr> out;
  out.reserve(result_slots_.size());
  for (int s : result_slots_) out.push_back(slots[static_cast<size_t>(s)].buf);
  if (keep) {
    slots.clear();  // drops the last references of intermediates still in slots
    std::erase_if(rs.free, [](const Free& f) { return f.donated || f.buf.use_count() != 1; });
    int64_t bytes = 0;
    for (const Free& f : rs.free) bytes += static_cast<int64_t>(f.buf->bytes().size());
    std::lock_guard<std::mutex> lock(kept_mu_);
    if (kept_.empty()) {  // else another device's run of this executable kept its own
      if (KeptBytes().fetch_add(bytes) + bytes <= MaxKeptBytes()) {
        kept_ = std::move(rs.free);
        kept_bytes_ = bytes;
      } else {
        KeptBytes().fetch_sub(bytes);
      }
    }
  }
  return out;
}

class CpuBackendImpl final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    std::unique_ptr<ir::Module> clone = module.Clone();
    std::vector<PlanItem> items;
    if (const ir::Function* f = clone->entry())
      for (const auto& n : f->nodes()) items.push_back({n.get(), -1});
    return NewPlannedExecutable(std::move(clone), std::move(items), {}, nullptr, "cpu");
  }
};

}  // namespace

// Note [Keeping freed memory]
// A training step frees and reallocates the same large buffers every step. glibc returns blocks
// above its mmap threshold to the kernel at free() and the next step faults every page in again
// (zeroed by the kernel): on 2 cores that was a third of the step time, spent in the kernel.
// The CPU backend therefore asks glibc to serve every block from the heap and to keep freed
// memory, as PyTorch users do with GLIBC_TUNABLES=glibc.malloc.mmap_max=0:
// glibc.malloc.trim_threshold=... That alone covers only the main arena: a thread that is not
// the main one (the executor thread allocates every kernel's outputs) gets its own arena, made of
// 64 MB heaps that glibc maps with mmap whatever M_MMAP_MAX says and unmaps when they empty; GPT-2
// 124M still faulted in ~200 MB a step (53K faults, all in the BLAS calls' first writes to their
// outputs). So there is one arena: 0 faults a step, step 1.44 -> 1.38 s (3 interleaved pairs), and
// GPT-2 small no slower (small allocations come from each thread's tcache without the arena lock).
// This must happen before any other thread first calls malloc (a thread keeps the arena it got),
// hence a static initializer of the library that holds the CPU backend. Literal storage is
// aligned by hand, not by memalign, for the same reason (Note [Aligning by hand] in
// ir/literal.h). The process's peak heap is unchanged; only its release is.
static bool KeepFreedMemory() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  return true;
}
[[maybe_unused]] static const bool kKeptFreedMemory = KeepFreedMemory();

std::unique_ptr<Executable> NewPlannedExecutable(std::unique_ptr<ir::Module> module, std::vector<PlanItem> items,
                                                 std::vector<GeneratedKernel> generated,
                                                 std::shared_ptr<const void> keep_alive, std::string_view backend) {
  return std::make_unique<CpuExecutable>(std::move(module), std::move(items), std::move(generated),
                                         std::move(keep_alive), backend);
}

Backend& CpuBackend() {
  static CpuBackendImpl* b = new CpuBackendImpl;
  return *b;
}

}  // namespace axle::runtime
