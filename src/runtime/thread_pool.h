// A tiny fork-join pool for the CPU executor's large loops.
//
// ParallelFor splits [0, n) into a few contiguous chunks per thread, which the pool's workers and
// the calling thread claim one at a time, and returns when all are done (Note [Pool chunks]).
// Loops under `min_parallel` iterations run inline on the caller. The pool has hardware_concurrency() threads in all (the
// caller counts as one). A backend's library calls run single-threaded inside ParallelFor
// bodies: the pool, not the library's own threads, parallelizes them (the CPU backend's products:
// Note [BLAS threads]).
//
// Note [Pool spinning]: a step is hundreds of kernels back to back, with short serial stretches
// between parallel ones (small kernels run inline, buffers are set up). A worker that sleeps on the
// condition variable in such a gap lets its vCPU halt, and waking it took up to 1-2.5 ms on this
// VM: GPT-2 small's first parallel kernel of each step (a 256 KB gather, 27 us inline) took 1.2-2.6
// ms. So a worker first spins for up to kWorkerSpinMicros (5 ms) on the call counter, yielding
// between rounds so that a runnable thread (the host tracing the next step) still gets the core,
// and only then sleeps; the caller spins up to 100 us for the last chunk. GPT-2 small, medians of
// 5 interleaved runs of 150 steps, in three batches: 27.7 / 25.4 / 31.7 ms a step without
// spinning, 24.2 / 21.8 / 28.1 with a 5 ms spin (29.1 with the yield, in the third batch).
//
// Note [Pool chunks]: the chunks are claimed, not assigned to threads once and for all. The
// host thread (tracing the next step) and the pool's threads are three runnable threads on two
// cores: a worker the kernel has not scheduled yet used to hold back its fixed half of a loop for
// up to a scheduler time slice while the caller, done with its own half, waited. GPT-2 small's
// first kernels of each step, which run while the host traces, took 0.66-0.71 ms for 64K
// elements (~20 us alone). Now the caller takes the chunks nobody has started: GPT-2 small,
// medians of 6 interleaved runs of 60 steps, 38.5 -> 34.4 ms a step. Chunk boundaries
// depend only on n, min_parallel and the thread count, never on which thread runs what, so
// results stay bitwise deterministic. A chunk is at least min_parallel / 2 iterations and there
// are at most kChunksPerThread per thread. Each share (below) carries the call's generation, so a
// worker that wakes after its call ended claims nothing of the next one.
//
// Note [Chunks stay on their thread]: each thread has a share of a call's chunks (the caller the
// first, worker i the i-th, in order), claims from the front of its own share and, once that is
// empty, steals from the back of another's. Two calls over the same n are cut the same way, so in
// a chain of same-sized kernels each thread reads mostly what it wrote itself, from its own cache.
// Until session 26 all chunks were claimed in turn from one shared counter, and which thread ran
// which chunk was random: half of every kernel's input came from the other core's cache. That
// costs little when the two cores share an L3 (session 25 measured no gain from shares on such a
// host), but a VM's two vCPUs are not always on one core complex: on the host of session 26 a
// cache line took 50-70 ns there and back between them for minutes, then 360-400 ns for minutes
// (the hypervisor moved a vCPU to another complex), and GPT-2 small's step went from 10.5 to 17
// ms, the split elementwise kernels 3-5x slower (the AdamW update 7 -> 36 us a call). Each
// thread also adds its finished chunks to the shared count once a call, not once a chunk.
//
// Note [Competing threads]: a lazy step runs on the execution thread while the host thread traces
// the next one, so the pool's threads plus the host are three runnable threads on two cores.
// Whichever of them the kernel leaves waiting, a split call may wait for it: a worker that claimed
// a chunk and then lost its core holds the caller until it is scheduled again, and the host's
// tracing (~3 ms a step) landed in the middle of the split calls. GPT-2 small's first kernel of
// each step (a 256 KB gather, ~20 us alone) took 1.2-1.5 ms a call. So the pool counts the
// threads outside it that compete for the cores right now (AddCompeting: the lazy executor counts
// the host while a step runs and the host is not blocked waiting for a result), and while they
// leave it no more than one core, ParallelFor runs its calls inline and the workers stop spinning.
// Results do not change: every kernel computes the same values whatever the chunks (the chunks
// themselves still depend only on the sizes and the thread count).
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace axle::runtime {

// Spins until done() or `deadline`, yielding the core to any other runnable thread between rounds
// of checks; true when done() held. The pool's workers and callers (Note [Pool spinning]) and the
// in-process collectives (Note [Collectives spin first], collectives.cc) wait this way first.
template <typename Done>
bool SpinUntil(Done done, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    sched_yield();
  }
}
template <typename Done>
bool SpinUntil(Done done, int64_t micros) {
  return SpinUntil(done, std::chrono::steady_clock::now() + std::chrono::microseconds(micros));
}

// Chunks a call is cut into, at most, per thread (Note [Pool chunks]).
inline constexpr int kChunksPerThread = 4;

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads in all, the caller included.
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n). Not reentrant: a body must not
  // call ParallelFor on the same pool (a nested call runs inline). Thread-safe: calls from
  // several threads (the devices of devices.h) take turns. When a chunk throws, the other chunks
  // still finish and the first exception is rethrown to the caller.
  // At most chunks_per_thread chunks per thread (1: one contiguous share per thread).
  void ParallelFor(int64_t n, int64_t min_parallel, const std::function<void(int64_t, int64_t)>& fn,
                   int chunks_per_thread = kChunksPerThread);

  // The process-wide pool used by the CPU kernels, of Target::Host().threads threads. Only code
  // that executes reads it: the compiler and the executor's planning read a passes::Target.
  static ThreadPool& Global();
  // How many times this thread has called Global() (a test compiles and plans modules and
  // checks that none of it asked for the pool).
  static int64_t GlobalAccessesOnThisThread();

  // Calls so far that were split over the pool rather than run inline (AXLE_PROFILE tells the
  // kernels that ran on one thread from those that used them all).
  int64_t dispatches() const { return dispatches_.load(std::memory_order_relaxed); }

  // Every ParallelFor called from this thread runs inline (CpuDevices: a device thread per core).
  static void SetThreadInline(bool on);

  // AXLE_TRACE: while one is alive, the chunks that workers run for this thread's ParallelFor
  // calls are spans named `label` in the trace (profile.h). An empty label records nothing.
  class CallLabel {
   public:
    explicit CallLabel(const std::string& label);
    ~CallLabel();
    CallLabel(const CallLabel&) = delete;
    CallLabel& operator=(const CallLabel&) = delete;

   private:
    const std::string* previous_;
  };

  // Note [Competing threads]: threads outside the pool that now compete for its cores (+1 when
  // one starts, -1 when it blocks or ends; the count may dip below zero in between).
  void AddCompeting(int delta) { competing_.fetch_add(delta, std::memory_order_relaxed); }
  // True when the competing threads leave the pool at most one core.
  bool Crowded() const {
    return competing_.load(std::memory_order_relaxed) >= num_threads() - 1 && !workers_.empty();
  }

 private:
  void WorkerLoop(int index);
  void RunChunks(uint32_t gen, int self, const std::function<void(int64_t, int64_t)>* fn, int64_t n, int64_t chunks,
                 const std::string* label = nullptr);
  bool Claim(uint32_t gen, int self, int64_t* chunk);

  // Note [Chunks stay on their thread]: thread t's share of the current call's chunks, as
  // (call generation << 32) | (front << 16) | back; t claims from the front, others steal from
  // the back. One cache line each, so a thread claiming its own chunks touches no other's line.
  struct alignas(64) Share {
    std::atomic<uint64_t> word{0};
  };

  std::vector<std::thread> workers_;
  std::mutex mu_;                 // guards everything below, and serialises ParallelFor calls
  std::mutex call_mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  const std::string* label_ = nullptr;  // CallLabel of the current call's caller (AXLE_TRACE)
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  std::atomic<int64_t> generation_{0};  // written under mu_; read while spinning
  std::vector<Share> shares_;           // one per thread, the caller's first
  std::atomic<int64_t> done_{0};        // chunks of the current call finished
  std::atomic<int64_t> dispatches_{0};
  std::atomic<int> competing_{0};
  std::exception_ptr error_;  // the first exception a worker's chunk threw
  bool stop_ = false;
};

// Note [Competing threads]: adds `delta` to the global pool's competing count for its lifetime.
class CompetingScope {
 public:
  explicit CompetingScope(int delta) : delta_(delta) { ThreadPool::Global().AddCompeting(delta_); }
  ~CompetingScope() { ThreadPool::Global().AddCompeting(-delta_); }
  CompetingScope(const CompetingScope&) = delete;
  CompetingScope& operator=(const CompetingScope&) = delete;

 private:
  int delta_;
};

// Elements above which the kernels split loops over the pool.
inline constexpr int64_t kParallelElements = 32 * 1024;

}  // namespace axle::runtime
