// The region runner (Note [Regions], executor_internal.h): a pair, a chain or a group of steps
// as one pool call. What differs between them is only what the pool's items are; binding the
// members' buffers, finishing the members the call did not, falling back to the interpreter and
// counting are the same code for all three.
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>

#include "backends/cpu/executor_internal.h"
#include "ir/interpreter.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::internal {
namespace {

// AXLE_TRACE: a member's part of a chain's slices on this thread, a span.
struct Span {
  explicit Span(const std::string& l) : label(l), t0(profile::Clock::now()) {}
  ~Span() { profile::TraceSpan(label, t0, profile::Clock::now()); }
  const std::string& label;
  const profile::Clock::time_point t0;
};

}  // namespace

void CpuExecutable::RunRegion(RunState& rs, const Region& region, std::vector<SlotState>& slots) {
  const Step* m = &steps_[region.first];
  const size_t n = static_cast<size_t>(region.steps);
  const auto t0 = std::chrono::steady_clock::now();

  // Every member's buffers, bound before the call: a product's result (through its views when it
  // has them), a generated kernel's inputs and outputs (in place only where the buffer plan lets
  // it: never in a pair or a chain, whose other members may still read any input). A follower
  // may read the first product: its slot holds the product's buffer from here on.
  struct Member {
    std::vector<const Literal*> ops;  // a product's operands
    Literal* out = nullptr;           // a product's result
    GeneratedCall call;               // a generated kernel's buffers
    bool bound = true;                // false: a copy whose output is its input's storage already
    // After the call: finished, not run (or not to the end), or its fast kernel declined (a
    // product's BLAS result was inf or NaN: the interpreter computes it).
    enum State : char { kNotRun, kDone, kDeclined } state = kNotRun;
    bool whole = false;  // ran whole on one thread inside the call, for `secs` (AXLE_PROFILE)
    double secs = 0;
  };
  std::vector<Member> mem(n);
  for (size_t i = 0; i < n; ++i) {
    const Step& st = m[i];
    Member& mi = mem[i];
    try {
      if (st.kind == Step::kGenerated) {
        mi.bound = BindGenerated(rs, st, slots, mi.call);
        continue;
      }
      for (int s : st.operands) mi.ops.push_back(slots[static_cast<size_t>(s)].buf.get());
      if (!st.views.plain()) {
        mi.out = &ViewedProductOut(rs, st, slots);
        continue;
      }
      BufferPtr out = Planned(rs, st.results[0]);
      mi.out = out.get();
      Bind(slots[static_cast<size_t>(st.results[0])], std::move(out), false);
    } catch (const Error& e) {
      throw StepError(st, e);
    }
  }

  // The one pool call. An error is kept by member and thrown after the call, naming its step.
  std::mutex error_mu;
  std::vector<std::exception_ptr> error(n);
  auto fail = [&](size_t i) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (!error[i]) error[i] = std::current_exception();
  };
  // Member i whole on this thread (a pair's items and followers).
  auto whole = [&](size_t i) {
    const Step& st = m[i];
    Member& mi = mem[i];
    const auto a = std::chrono::steady_clock::now();
    try {
      if (st.kind == Step::kGenerated) {
        if (mi.bound) CallGeneratedInline(*st.generated, mi.call);
        mi.state = Member::kDone;
      } else {
        mi.state = RunKernel(st, mi.ops, *mi.out) ? Member::kDone : Member::kDeclined;
      }
    } catch (...) {
      fail(i);
    }
    const auto b = std::chrono::steady_clock::now();
    mi.whole = true;
    mi.secs = std::chrono::duration<double>(b - a).count();
    profile::TraceSpan(st.label, a, b);  // on the thread that ran it
  };
  size_t followed = 0;  // a pair's followers run inside the call
  bool declined = false;  // a chain's product declined a slice
  {
    ThreadPool::CallLabel chunks(region.label);
    switch (region.kind) {
      case Region::kPair: {
        // Items: the two products and the fillers, each whole, by whichever thread is free;
        // after the first product, its thread runs the followers while the second still runs.
        const int64_t items = 2 + region.fillers;
        const size_t followers = static_cast<size_t>(region.followers);
        std::atomic<bool> second_done{false};
        ThreadPool::Global().ParallelFor(items, 1, [&](int64_t lo, int64_t hi) {
          // Each product the calls it makes anywhere, for the target's threads (Note [Products
          // cut for the target]), here one after the other on this thread.
          cpu::ProductsOnOneThread alone;
          cpu::ProductsCutFor cut(target_.threads);
          for (int64_t i = lo; i < hi; ++i) {
            whole(static_cast<size_t>(i));
            if (i == 1) second_done.store(true, std::memory_order_release);
            if (i != 0 || mem[0].state != Member::kDone) continue;
            while (followed < followers && !second_done.load(std::memory_order_acquire)) {
              const size_t f = static_cast<size_t>(items) + followed++;
              whole(f);
              if (mem[f].state != Member::kDone) break;
            }
          }
        }, static_cast<int>(items));
        break;
      }
      case Region::kChain: {
        // Items: slices; each thread runs every member over its slices, in order.
        std::atomic<bool> stop{false};
        const int64_t slices = region.slices;
        ThreadPool::Global().ParallelFor(slices, 1, [&](int64_t lo, int64_t hi) {
          cpu::ProductsOnOneThread alone;
          for (size_t i = 0; i < n && !stop.load(std::memory_order_relaxed); ++i) {
            const Step& st = m[i];
            const Member& mi = mem[i];
            std::optional<Span> span;
            if (profile::TraceEnabled()) span.emplace(st.label);
            try {
              if (st.kind == Step::kGenerated) {
                const GeneratedKernel& g = *st.generated;
                const int64_t per = g.elements / slices;
                if (mi.bound) g.fn(mi.call.in.data(), mi.call.out.data(), lo * per, hi * per);
              } else if (!(region.cuts[i] == Cut::kRows
                               ? cpu::DotRowBlocks(*st.node, mi.ops, *mi.out, lo, hi, static_cast<int>(slices), st.views)
                               : cpu::DotItems(*st.node, mi.ops, *mi.out, lo, hi, st.views))) {
                stop.store(true, std::memory_order_relaxed);
              }
            } catch (...) {
              fail(i);
              stop.store(true, std::memory_order_relaxed);
            }
          }
        });
        // A declined slice leaves the members after it unfinished on some slices (and the threads
        // that saw the stop, any member): all run again, whole and in order.
        declined = stop.load();
        for (Member& mi : mem) mi.state = declined ? Member::kNotRun : Member::kDone;
        break;
      }
      case Region::kGroup: {
        // Items: the pieces of the members' loops.
        auto run = [&](int64_t lo, int64_t hi) {
          for (int64_t p = lo; p < hi; ++p) {
            const Region::Piece& q = region.pieces[static_cast<size_t>(p)];
            const Member& mi = mem[static_cast<size_t>(q.member)];
            if (mi.bound) m[q.member].generated->fn(mi.call.in.data(), mi.call.out.data(), q.begin, q.end);
          }
        };
        const int64_t pieces = static_cast<int64_t>(region.pieces.size());
        if (region.parallel)
          ThreadPool::Global().ParallelFor(pieces, 1, run, static_cast<int>(pieces));
        else
          run(0, pieces);
        for (Member& mi : mem) mi.state = Member::kDone;
        break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!error[i]) continue;
    try {
      std::rethrow_exception(error[i]);
    } catch (const Error& e) {
      throw StepError(m[i], e);
    }
  }

  // The members the call did not finish, whole and in order, as any step runs (split over the
  // pool); a declined product's values from the interpreter, into the buffer the other members'
  // bindings point at.
  int64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Step& st = m[i];
    Member& mi = mem[i];
    ++rs.stats.kernels_run;
    try {
      if (mi.state == Member::kNotRun) {
        const auto a = std::chrono::steady_clock::now();
        const int64_t splits = ThreadPool::Global().dispatches();
        {
          ThreadPool::CallLabel chunks(st.label);
          if (st.kind == Step::kGenerated) {
            if (mi.bound) CallGenerated(*st.generated, mi.call);
          } else if (!RunKernel(st, mi.ops, *mi.out)) {
            mi.state = Member::kDeclined;
          }
        }
        if (!st.label.empty()) Timed(st, a, ThreadPool::Global().dispatches() != splits);
      }
      if (mi.state == Member::kDeclined) {
        ++rs.stats.fallback_kernels;
        const Literal res = std::move(ir::EvaluateNode(*st.node, mi.ops, rs.device.device)[0]);
        std::memcpy(mi.out->mutable_bytes().data(), res.bytes().data(), res.bytes().size());
      }
    } catch (const Error& e) {
      throw StepError(st, e);
    }
    Produced(rs, st, slots);
    if (profile::Enabled() && !st.label.empty() && mi.whole)
      profile::Record(st.label, mi.secs, StepBytes(st), /*parallel=*/false);
    if (profile::Enabled()) bytes += StepBytes(st);
  }
  switch (region.kind) {
    case Region::kPair:
      rs.schedule.products_paired += 2;
      rs.schedule.kernels_beside_pairs += region.fillers;
      rs.schedule.followers_beside_pairs += static_cast<int64_t>(followed);
      break;
    case Region::kChain:
      rs.schedule.chained_kernels += region.steps;
      rs.schedule.chains_rerun += declined ? 1 : 0;
      break;
    case Region::kGroup: rs.schedule.grouped_kernels += region.steps; break;
  }
  // A chain or a group: one row of AXLE_PROFILE and one span of AXLE_TRACE for the call.
  if (region.kind == Region::kPair || region.label.empty()) return;
  const auto t1 = std::chrono::steady_clock::now();
  const bool parallel = region.kind == Region::kChain || region.parallel;
  if (profile::Enabled()) profile::Record(region.label, std::chrono::duration<double>(t1 - t0).count(), bytes, parallel);
  profile::TraceSpan(region.label, t0, t1);
}

}  // namespace axle::runtime::internal
