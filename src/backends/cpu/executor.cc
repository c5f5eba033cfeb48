// The CPU executor: the first backend behind runtime::Backend.
//
// Compile plans the entry function once: each node gets a fast kernel (kernels.h) or the
// reference interpreter's kernel for that one node (ir::EvaluateNode); each value gets a slot and
// its last use, so intermediates are freed right after it. Execute binds the arguments, runs the
// nodes in order (one kernel per non-trivial node; parameter and constant nodes only bind slots)
// and returns the result buffers.
//
// Buffers (Note [Buffer assignment], passes/buffer_assignment.h). Once the steps are ordered and
// grouped, the plan's steps become a buffer problem and the compiler's buffer assignment decides
// where every value lives: each intermediate at a static offset of one arena, a function result
// in a buffer of its own, and which results are written in place over a dying operand. Execute
// binds slots as the plan says; the only decision left to run time is donation: a result the
// plan lets take an argument's storage does so when the caller gave that argument up (a
// BufferPtr with use_count() == 1 on entry), else it uses its own planned storage. Constants and
// shared arguments are never written. last_stats(): kernels_run, donated_reused (results written
// into a donated argument's storage), peak_bytes (peak of the live bytes of kernel results, the
// plan's peak_live_bytes), new_buffers (allocations: results, and an arena not kept from the
// last run).
//
// Note [Literals over an arena]
// The arena is one aligned block; a value of it is a Literal that borrows its range
// (Literal::Borrowing), made once per arena, so binding a slot allocates nothing (the slot's
// BufferPtr shares the arena's count). Such a slot is never "writable": a result written over it
// in place takes the same offset by the plan, not the operand's Literal, so no Literal is ever
// retyped; a result is never in the arena, so what Execute returns outlives the next run. A kernel
// the interpreter runs instead (a fallback) returns a Literal of its own, which the slot then
// holds: still correct, since the plan reserved the value's range anyway.
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
// Devices. Collective nodes are plan steps of their own: the result goes to its planned storage
// through the communicator of the device context (collectives.h); replica_id returns the
// device id. ExecuteOnDevice keeps its state on the stack, so several devices run one executable
// at once; Execute runs a one-replica module with a one-device communicator (devices.h).
//
// Threads. Large elementwise, movement and reduce loops (> kParallelElements) are split over a
// small pool (thread_pool.h, hardware_concurrency threads including the caller). BLAS is called
// from the executing thread only, so OpenBLAS's own pool can use every core.
#include "backends/cpu/executor.h"

#include <malloc.h>

#include <limits>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "backends/cpu/blas.h"
#include "backends/cpu/cpu_flags.h"
#include "backends/cpu/executor_internal.h"
#include "backends/cpu/kernels.h"
#include "ir/interpreter.h"
#include "runtime/collectives.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {

namespace internal {

std::string DescribeNode(const Node& n) {
  size_t pos = 0;
  const auto& nodes = n.parent()->nodes();
  while (pos < nodes.size() && nodes[pos].get() != &n) ++pos;
  std::string names;
  for (const Value* v : n.results())
    if (!v->name().empty()) names += (names.empty() ? " %" : ", %") + v->name();
  return fmt::format("node #{} ({}{})", pos, n.name(), names.empty() ? "" : " ->" + names);
}


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

void CpuExecutable::DecideSchedule() {
  if (flags::views()) copies_folded_ = FoldViews(steps_, is_result_, &folded_);
  MarkPairs(steps_, regions_, target_);
  MarkChains(steps_);
  HoistBesidePairs(steps_);
  MarkBesidePairs(steps_);
  MarkGroups(steps_);
}

void CpuExecutable::NumberRegions() {
  std::vector<Region> numbered;
  std::vector<int> renumber(regions_.size(), -1);
  for (size_t p = 0; p < steps_.size(); ++p) {
    const int id = steps_[p].region;
    if (id < 0 || !StartsRegion(steps_, p)) continue;
    Region& r = regions_[static_cast<size_t>(id)];
    AXLE_CHECK(r.steps > 0 && renumber[static_cast<size_t>(id)] < 0, "step {} is in a region that was undone or "
               "runs in two places", p);
    AXLE_CHECK(p + static_cast<size_t>(r.steps) <= steps_.size(), "region at step {} runs past the last step", p);
    for (size_t q = p; q < p + static_cast<size_t>(r.steps); ++q)
      AXLE_CHECK(steps_[q].region == id, "region at step {}: step {} is not in it", p, q);
    renumber[static_cast<size_t>(id)] = static_cast<int>(numbered.size());
    r.first = p;
    numbered.push_back(std::move(r));
  }
  for (Step& st : steps_)
    if (st.region >= 0) st.region = renumber[static_cast<size_t>(st.region)];
  regions_ = std::move(numbered);
}

void CpuExecutable::Plan(std::vector<PlanItem> items) {
  f_ = module_->entry();
  if (f_ == nullptr) Fail("{} backend: module @{} has no entry function", backend_, module_->name());
  if (profile::TraceEnabled()) run_label_ = fmt::format("run @{} ({})", module_->name(), backend_);
  std::unordered_map<const Value*, int> slot;
  std::vector<size_t> last_use;
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
    for (const Value* v : operands) {
      auto it = slot.find(v);
      if (it == slot.end())
        Fail("@{}: {}: an operand is not defined by an earlier node", f_->name(), DescribeNode(n));
      st.operands.push_back(it->second);
      last_use[static_cast<size_t>(it->second)] = index;
    }
    for (const Value* v : results) {
      const int s = static_cast<int>(slot_bytes_.size());
      slot[v] = s;
      slot_bytes_.push_back(v->type().ByteSize());
      slot_types_.push_back(v->type());
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
          Fail("@{}: {}: the {} backend has no kernel for collective {}", f_->name(), DescribeNode(n),
               backend_, n.name());
        st.kind = Step::kKernel;
        if (n.num_results() == 1) st.kernel = cpu::SelectKernel(n);
        if (!st.kernel.fn && !ir::HasInterpreterKernel(n.op()))
          Fail("@{}: {}: no cpu or interpreter kernel for op {}", f_->name(), DescribeNode(n), n.name());
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
  if (module_->scheduled_for().empty()) DecideSchedule();
  else ReadSchedule();
  NumberRegions();
  // Each slot's last use in the final order (steps moved, copies folded), and the slots freed at it.
  std::fill(last_use.begin(), last_use.end(), 0);
  for (size_t p = 0; p < steps_.size(); ++p) {
    Step& st = steps_[p];
    st.index = p;
    for (int s : st.operands) last_use[static_cast<size_t>(s)] = p;
    for (int s : st.results) last_use[static_cast<size_t>(s)] = std::max(last_use[static_cast<size_t>(s)], p);
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
  std::vector<bool> is_param(slot_bytes_.size(), false), is_constant(slot_bytes_.size(), false);
  for (size_t p = 0; p < steps_.size(); ++p) {
    steps_[p].index = p;
    for (int s : steps_[p].results) {
      is_param[static_cast<size_t>(s)] = steps_[p].kind == Step::kParameter;
      is_constant[static_cast<size_t>(s)] = steps_[p].kind == Step::kConstant;
    }
  }
  AssignBuffers(is_param, is_constant);
  if (!module_->scheduled_for().empty()) ReadBuffers();
}

// Note [Buffer assignment]: the executor's steps, in the order it runs them, as the compiler's
// buffer problem. A pair (with its fillers and followers), a chain and a group are regions: their
// steps run at once. In place: a hand kernel that may write over an operand of its result's type
// (one operand only, not repeated, when the kernel names it), and a generated kernel over an
// input it reads only at the loop index, of its output's dtype and element count, unless the
// step runs beside a pair's products or in a chain (which may still read that input), or a
// group's other kernels read it (Region::shared).
void CpuExecutable::AssignBuffers(const std::vector<bool>& is_param, const std::vector<bool>& is_constant) {
  using PV = passes::BufferProblem::Value;
  passes::BufferProblem& pb = buffer_problem_;
  pb.title = fmt::format("@{} for {}", module_->name(), target_.ToString());
  pb.values.resize(slot_bytes_.size());
  for (size_t s = 0; s < slot_bytes_.size(); ++s) {
    PV& v = pb.values[s];
    v.bytes = slot_bytes_[s];
    v.kind = is_result_[s] ? PV::kResult : is_param[s] ? PV::kArgument : is_constant[s] ? PV::kConstant : PV::kTemp;
    v.name = fmt::format("s{}", s);
  }
  pb.steps.resize(steps_.size());
  for (size_t p = 0; p < steps_.size(); ++p) {
    const Step& st = steps_[p];
    passes::BufferProblem::Step& ps = pb.steps[p];
    ps.operands = st.operands;
    ps.results = st.results;
    ps.forward = st.kind == Step::kForward;
    ps.binds = st.kind == Step::kParameter || st.kind == Step::kConstant;
    if (st.kind == Step::kParameter)
      pb.values[static_cast<size_t>(st.results[0])].param = st.node->attrs_as<ir::ParameterAttrs>().index;
    // A region's steps run at once (said on its first); a pair's or a chain's members write
    // nothing in place (another member may still read any input), a group's nothing more than
    // one of them reads.
    const Region* region = st.region >= 0 ? &regions_[static_cast<size_t>(st.region)] : nullptr;
    ps.region = region != nullptr && region->first == p ? region->steps : 1;
    // Names for the plan's text: the values' own, else their slot numbers.
    std::vector<const Value*> named;
    if (st.kind == Step::kGenerated) named = st.generated->outputs;
    else if (st.into == nullptr) named.assign(st.node->results().begin(), st.node->results().end());
    for (size_t r = 0; r < named.size() && r < st.results.size(); ++r)
      if (!named[r]->name().empty() && pb.values[static_cast<size_t>(st.results[r])].name[0] == 's')
        pb.values[static_cast<size_t>(st.results[r])].name = "%" + std::string(named[r]->name());
    if (st.into != nullptr && !st.into->name().empty()) pb.values[static_cast<size_t>(st.results[0])].name = "%" + std::string(st.into->name());
    if (region != nullptr && region->kind != Region::kGroup) continue;
    auto is_shared = [&](int s) {
      return region != nullptr && std::find(region->shared.begin(), region->shared.end(), s) != region->shared.end();
    };
    if (st.kind == Step::kGenerated) {
      const GeneratedKernel& g = *st.generated;
      ps.in_place.resize(st.results.size());
      for (size_t r = 0; r < st.results.size(); ++r)
        for (size_t j = 0; j < st.operands.size(); ++j) {
          const ir::TensorType &in = slot_types_[static_cast<size_t>(st.operands[j])], &out = g.outputs[r]->type();
          if (g.input_at_index[j] && in.dtype == out.dtype && in.NumElements() == out.NumElements() && !is_shared(st.operands[j]))
            ps.in_place[r].push_back(static_cast<int>(j));
        }
    } else if (st.kind == Step::kKernel && st.kernel.fn && st.kernel.in_place && st.views.plain() && st.results.size() == 1) {
      ps.in_place.resize(1);
      for (size_t j = 0; j < st.operands.size(); ++j) {
        const int s = st.operands[j];
        // Only the operand the kernel names, and not one that is also another operand
        // (scatter_add(x, i, x) must not write its updates while reading them).
        if (st.kernel.in_place_operand >= 0 &&
            (static_cast<int>(j) != st.kernel.in_place_operand || std::count(st.operands.begin(), st.operands.end(), s) != 1))
          continue;
        if (slot_types_[static_cast<size_t>(s)] == st.node->result()->type() && !is_shared(s))
          ps.in_place[0].push_back(static_cast<int>(j));
      }
    }
  }
  buffer_plan_ = passes::AssignBuffers(pb);
  arena_view_.assign(slot_bytes_.size(), -1);
  int views = 0;
  for (size_t s = 0; s < slot_bytes_.size(); ++s)
    if (buffer_plan_.values[s].storage == passes::BufferPlan::Storage::kArena && buffer_plan_.values[s].buffer >= 0)
      arena_view_[s] = views++;
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
  st = SlotState{};
}

void CpuExecutable::Produced(RunState& rs, const Step& st, std::vector<SlotState>& slots) const {
  for (int s : st.results) {
    if (slots[static_cast<size_t>(s)].counted) continue;  // a value with several writers (views)
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

Literal& CpuExecutable::ViewedProductOut(RunState& rs, const Step& st, std::vector<SlotState>& slots) {
  SlotState& r = slots[static_cast<size_t>(st.results[0])];
  if (!r.buf) Bind(r, Planned(rs, st.results[0]), false);
  return *r.buf;
}

Error CpuExecutable::StepError(const Step& st, const Error& e) const {
  return Error(st.node->loc(), fmt::format("@{}: {}: {}", f_->name(), DescribeNode(*st.node), e.message()));
}

BufferPtr CpuExecutable::Planned(RunState& rs, int s) const {
  const int view = arena_view_[static_cast<size_t>(s)];
  if (view >= 0) return BufferPtr(rs.arena, &rs.arena->views[static_cast<size_t>(view)]);  // shares the arena's count
  ++rs.stats.new_buffers;
  return std::make_shared<Literal>(Literal::Uninitialized(slot_types_[static_cast<size_t>(s)]));
}

BufferPtr CpuExecutable::ResultStorage(RunState& rs, const Step& st, size_t r, std::vector<SlotState>& slots,
                                       bool& donated) const {
  const passes::BufferPlan::Take& take = buffer_plan_.takes[st.index][r];
  donated = false;
  if (take.operand >= 0) {
    const SlotState& in = slots[static_cast<size_t>(st.operands[static_cast<size_t>(take.operand)])];
    // Else a range of the arena (the plan put the result at the same offset), or an argument the
    // caller did not donate: the result's own planned storage.
    if (in.buf && in.writable && in.buf.use_count() == 1) {
      donated = in.donated;
      BufferPtr buf = in.buf;  // the operand's slot keeps its reference until released after the step
      const ir::TensorType& type = slot_types_[static_cast<size_t>(st.results[r])];
      if (buf->type() != type) buf->Retype(type);
      return buf;
    }
  }
  return Planned(rs, st.results[r]);
}

void CpuExecutable::Bind(SlotState& slot, BufferPtr buf, bool donated) {
  slot.writable = !buf->borrows();
  slot.donated = donated;
  slot.buf = std::move(buf);
}

// A generated kernel: each output gets the storage the buffer plan gives it (in place of a dying
// input, or its own range of the arena).
bool CpuExecutable::BindGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots, GeneratedCall& call) {
  const GeneratedKernel& g = *st.generated;
  call.in.resize(st.operands.size());
  call.out.resize(st.results.size());
  bool aliased = false;
  for (size_t j = 0; j < st.operands.size(); ++j)
    call.in[j] = slots[static_cast<size_t>(st.operands[j])].buf->bytes().data();
  for (size_t r = 0; r < st.results.size(); ++r) {
    bool donated = false;
    BufferPtr buf = ResultStorage(rs, st, r, slots, donated);
    if (donated) ++rs.stats.donated_reused;
    call.out[r] = buf->mutable_bytes().data();
    const int j = buffer_plan_.takes[st.index][r].operand;
    aliased = aliased || (j >= 0 && call.out[r] == call.in[static_cast<size_t>(j)]);
    Bind(slots[static_cast<size_t>(st.results[r])], std::move(buf), donated);
  }
  return !(g.is_copy && aliased);  // else the output is the input's storage already
}

void CpuExecutable::RunGenerated(RunState& rs, const Step& st, std::vector<SlotState>& slots) {
  GeneratedCall call;
  if (!BindGenerated(rs, st, slots, call)) return;
  CallGenerated(*st.generated, call);
}

namespace {
// Note [Column sums by blocks of rows]: the partial sums of a call, P x B doubles, one buffer per
// calling thread (the pool's workers write into the caller's).
std::vector<void*> WithPartials(const GeneratedKernel& g, const std::vector<void*>& out) {
  thread_local std::vector<double> partials;
  partials.resize(static_cast<size_t>(g.row_blocks * g.elements));
  std::vector<void*> with = out;
  with.push_back(partials.data());
  return with;
}
}  // namespace

// Runs a generated kernel whose buffers are bound, split over the pool when it is large enough.
void CpuExecutable::CallGenerated(const GeneratedKernel& g, const GeneratedCall& call) {
  const GeneratedKernel::Fn fn = g.fn;
  const void* const* pin = call.in.data();
  if (g.row_blocks > 1) {
    if (g.elements <= 0) return;
    const std::vector<void*> out = WithPartials(g, call.out);
    void* const* pout = out.data();
    // min_chunk: 1, or more blocks than there are when the sum is too small to split.
    ThreadPool::Global().ParallelFor(g.row_blocks, g.min_chunk, [&](int64_t b, int64_t e) { fn(pin, pout, b, e); },
                                     g.chunks_per_thread);
    fn(pin, pout, -1, -1);
    return;
  }
  void* const* pout = call.out.data();
  const int64_t chunk = g.min_chunk > 0 ? g.min_chunk : kParallelElements;
  if (g.elements >= chunk && g.elements > 1) {
    ThreadPool::Global().ParallelFor(g.elements, chunk, [&](int64_t b, int64_t e) { fn(pin, pout, b, e); },
                                     g.chunks_per_thread);
  } else if (g.elements > 0) {
    fn(pin, pout, 0, g.elements);
  }
}

void CpuExecutable::CallGeneratedInline(const GeneratedKernel& g, const GeneratedCall& call) {
  if (g.elements <= 0) return;
  if (g.row_blocks > 1) {
    const std::vector<void*> out = WithPartials(g, call.out);
    g.fn(call.in.data(), out.data(), 0, g.row_blocks);
    g.fn(call.in.data(), out.data(), -1, -1);
    return;
  }
  g.fn(call.in.data(), call.out.data(), 0, g.elements);
}

// A collective: the result goes to its planned storage (never an operand's storage: the
// group's peers read the operand while this device writes its result).
void CpuExecutable::RunCollective(RunState& rs, const Step& st, std::vector<SlotState>& slots) {
  const Node& n = *st.node;
  const Literal& in = *slots[static_cast<size_t>(st.operands[0])].buf;
  BufferPtr out = Planned(rs, st.results[0]);
  RunCollectiveNode(n, rs.device, in, *out);
  Bind(slots[static_cast<size_t>(st.results[0])], std::move(out), false);
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
  schedule_stats_ = rs.schedule;
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
  cpu::ProductsCutFor cut(target_.threads);  // Note [Products cut for the target]
  profile::TraceScope span(run_label_);
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(kept_mu_);  // Note [Buffers kept between runs]
    if (!kept_.empty()) {
      rs.arena = std::move(kept_.back());
      kept_.pop_back();
      const int64_t bytes = static_cast<int64_t>(rs.arena->memory.size());
      KeptBytes().fetch_sub(bytes);
      kept_bytes_ -= bytes;
    }
    keep = ++runs_ >= 2;
  }
  if (!rs.arena) {  // Note [Literals over an arena]
    rs.arena = std::make_shared<Arena>();
    rs.arena->memory.Allocate(static_cast<size_t>(buffer_plan_.arena_bytes));
    rs.arena->views.reserve(slot_bytes_.size());
    for (size_t s = 0; s < slot_bytes_.size(); ++s)
      if (arena_view_[s] >= 0)
        rs.arena->views.push_back(Literal::Borrowing(slot_types_[s], rs.arena->memory.data() + buffer_plan_.values[s].offset));
    if (buffer_plan_.arena_bytes > 0) ++rs.stats.new_buffers;
  }
  std::vector<SlotState> slots(slot_bytes_.size());
  rs.schedule.copies_folded = copies_folded_;
  std::vector<bool> donated_arg(args.size());
  for (size_t k = 0; k < args.size(); ++k) donated_arg[k] = args[k].use_count() == 1;
  std::vector<const Literal*> ops;
  // Steps k .. k + n - 1 ran as one pool call: their dead slots are released, and k moves past them.
  auto ran = [&](size_t& k, size_t n) {
    for (size_t last = k + n - 1; k <= last; ++k)
      for (int s : steps_[k].release) Release(rs, slots, s);
    --k;
  };
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& st = steps_[k];
    if (st.region >= 0) {  // its first member (the loop skips the others)
      const Region& region = regions_[static_cast<size_t>(st.region)];
      RunRegion(rs, region, slots);
      ran(k, static_cast<size_t>(region.steps));
      continue;
    }
    const Node& n = *st.node;
    ops.clear();
    for (int s : st.operands) ops.push_back(slots[static_cast<size_t>(s)].buf.get());
    switch (st.kind) {
      case Step::kParameter: {
        SlotState& out = slots[static_cast<size_t>(st.results[0])];
        const size_t k = static_cast<size_t>(n.attrs_as<ir::ParameterAttrs>().index);
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
          } else if (st.kernel.fn && !st.views.plain()) {  // Note [Products into views]
            done = RunKernel(st, ops, ViewedProductOut(rs, st, slots));
            AXLE_CHECK(done, "a product with views has no fallback");
          } else if (st.kernel.fn) {  // single-result nodes only
            bool out_donated = false;
            BufferPtr out = ResultStorage(rs, st, 0, slots, out_donated);
            if (st.kernel.fn(n, ops, *out)) {
              if (out_donated) ++rs.stats.donated_reused;
              Bind(slots[static_cast<size_t>(st.results[0])], std::move(out), out_donated);
              done = true;
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
  slots.clear();  // the arena's literals are free for the next run
  if (keep) {
    const int64_t bytes = static_cast<int64_t>(rs.arena->memory.size());
    std::lock_guard<std::mutex> lock(kept_mu_);
    if (KeptBytes().fetch_add(bytes) + bytes <= MaxKeptBytes()) {
      kept_.push_back(std::move(rs.arena));
      kept_bytes_ += bytes;
    } else {
      KeptBytes().fetch_sub(bytes);
    }
  }
  return out;
}

}  // namespace internal

CpuScheduleStats LastScheduleStats(const Executable& exe) {
  const auto* cpu = dynamic_cast<const internal::CpuExecutable*>(&exe);
  return cpu != nullptr ? cpu->schedule_stats() : CpuScheduleStats{};
}

PlannedBuffers BuffersOf(const Executable& exe) {
  const auto* cpu = dynamic_cast<const internal::CpuExecutable*>(&exe);
  return cpu != nullptr ? cpu->buffers() : PlannedBuffers{};
}

namespace {

class CpuBackendImpl final : public Backend {
 public:
  explicit CpuBackendImpl(const passes::Target& target) : target_(target) {}
  std::string_view name() const override { return "cpu"; }
  std::string Describe() const override { return cpu::DescribeBlas(); }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    std::unique_ptr<ir::Module> clone = module.Clone();
    std::vector<PlanItem> items;
    if (const ir::Function* f = clone->entry())
      for (const auto& n : f->nodes()) items.push_back({n.get(), -1});
    return NewPlannedExecutable(std::move(clone), std::move(items), {}, nullptr, "cpu", target_);
  }

 private:
  passes::Target target_;
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
                                                 std::shared_ptr<const void> keep_alive, std::string_view backend,
                                                 const passes::Target& target) {
  return std::make_unique<internal::CpuExecutable>(std::move(module), std::move(items), std::move(generated),
                                                   std::move(keep_alive), backend, target);
}

Backend& CpuBackend() {
  static CpuBackendImpl* b = new CpuBackendImpl(passes::Target::Host());
  return *b;
}

std::unique_ptr<Backend> NewCpuBackend(const passes::Target& target) { return std::make_unique<CpuBackendImpl>(target); }

}  // namespace axle::runtime
