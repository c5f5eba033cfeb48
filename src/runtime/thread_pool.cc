#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <string>

#include "passes/target.h"
#include "runtime/profile.h"

namespace axle::runtime {
namespace {
thread_local bool tls_in_pool_body = false;
thread_local bool tls_inline = false;
thread_local const std::string* tls_call_label = nullptr;  // ThreadPool::CallLabel
thread_local int64_t tls_global_accesses = 0;              // ThreadPool::GlobalAccessesOnThisThread

// Note [Pool spinning] (thread_pool.h).
constexpr int64_t kWorkerSpinMicros = 5000;
constexpr int64_t kCallerSpinMicros = 100;

}  // namespace

ThreadPool::ThreadPool(int num_threads) : shares_(static_cast<size_t>(std::max(1, num_threads))) {
  for (int i = 1; i < std::max(1, num_threads); ++i)
    workers_.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), ("axle-pool-" + std::to_string(i)).substr(0, 15).c_str());
      WorkerLoop(i);
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::Global() {
  // As many threads as the host target says (the compiler plans for the same count); never
  // destroyed: workers may outlive static destruction order otherwise.
  static ThreadPool* pool = new ThreadPool(passes::Target::Host().threads);
  ++tls_global_accesses;
  return *pool;
}

int64_t ThreadPool::GlobalAccessesOnThisThread() { return tls_global_accesses; }

static void Chunk(int64_t n, int64_t parts, int64_t index, int64_t& begin, int64_t& end) {
  begin = n * index / parts;
  end = n * (index + 1) / parts;
}

// Note [Chunks stay on their thread] (thread_pool.h): the next chunk for `self`, from the front of
// its own share, else from the back of another's; false when every chunk of call `gen` is taken.
bool ThreadPool::Claim(uint32_t gen, int self, int64_t* chunk) {
  const int threads = static_cast<int>(shares_.size());
  for (int k = 0; k < threads; ++k) {
    std::atomic<uint64_t>& word = shares_[static_cast<size_t>((self + k) % threads)].word;
    const bool own = k == 0;
    uint64_t w = word.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t front = (w >> 16) & 0xffffu, back = w & 0xffffu;
      if (static_cast<uint32_t>(w >> 32) != gen || front >= back) break;
      const uint64_t next = own ? w + (uint64_t{1} << 16) : w - 1;
      if (word.compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        *chunk = static_cast<int64_t>(own ? front : back - 1);
        return true;
      }
    }
  }
  return false;
}

// Note [Pool chunks] (thread_pool.h): runs chunks of call `gen` until none is left to claim.
void ThreadPool::RunChunks(uint32_t gen, int self, const std::function<void(int64_t, int64_t)>* fn, int64_t n,
                           int64_t chunks, const std::string* label) {
  int64_t ran = 0, c;
  while (Claim(gen, self, &c)) {
    int64_t b, e;
    Chunk(n, chunks, c, b, e);
    std::exception_ptr error;
    const bool nested = tls_in_pool_body;
    tls_in_pool_body = true;
    try {
      if (label != nullptr) {
        const auto t0 = profile::Clock::now();
        (*fn)(b, e);
        profile::TraceSpan(*label, t0, profile::Clock::now());
      } else {
        (*fn)(b, e);
      }
    } catch (...) {
      error = std::current_exception();  // rethrown by the caller of ParallelFor
    }
    tls_in_pool_body = nested;
    if (error) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = error;
    }
    ++ran;
  }
  // One update of the shared count per thread and call, not one per chunk.
  if (ran > 0 && done_.fetch_add(ran, std::memory_order_acq_rel) + ran == chunks) {
    std::lock_guard<std::mutex> lock(mu_);  // the caller checks done_ under mu_ before it sleeps
    done_cv_.notify_one();
  }
}

void ThreadPool::WorkerLoop(int index) {
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    const std::string* label;
    int64_t n, chunks;
    // Crowded (Note [Competing threads]): sleep at once, leaving the core to the competing thread.
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen || Crowded(); }, kWorkerSpinMicros);
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      chunks = chunks_;
      label = label_;
    }
    // The call may be over already (fn null, every chunk claimed): RunChunks then claims nothing.
    RunChunks(static_cast<uint32_t>(seen), index, fn, n, chunks, label);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_parallel, const std::function<void(int64_t, int64_t)>& fn,
                             int chunks_per_thread) {
  if (n <= 0) return;
  if (workers_.empty() || n < min_parallel || n < num_threads() || tls_in_pool_body || tls_inline || Crowded()) {
    fn(0, n);
    return;
  }
  // Note [Pool chunks]: a few chunks per thread, each no smaller than half of min_parallel.
  const int64_t grain = std::max<int64_t>(1, min_parallel / 2);
  const int64_t chunks = std::clamp<int64_t>(n / grain, num_threads(),
                                             std::min<int64_t>(n, int64_t{std::max(1, chunks_per_thread)} * num_threads()));
  std::lock_guard<std::mutex> call_lock(call_mu_);
  dispatches_.fetch_add(1, std::memory_order_relaxed);
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    label_ = tls_call_label;
    n_ = n;
    chunks_ = chunks;
    done_.store(0, std::memory_order_relaxed);
    const int64_t next = generation_.load(std::memory_order_relaxed) + 1;
    gen = static_cast<uint32_t>(next);
    const int64_t threads = num_threads();
    for (int64_t t = 0; t < threads; ++t) {
      const uint64_t front = static_cast<uint64_t>(chunks * t / threads);
      const uint64_t back = static_cast<uint64_t>(chunks * (t + 1) / threads);
      shares_[static_cast<size_t>(t)].word.store(uint64_t{gen} << 32 | front << 16 | back, std::memory_order_relaxed);
    }
    generation_.store(next, std::memory_order_release);  // publishes the shares to spinning workers
  }
  work_cv_.notify_all();
  RunChunks(gen, 0, &fn, n, chunks);
  // Every chunk is claimed; wait for those still running on workers (they use `fn`).
  SpinUntil([&] { return done_.load(std::memory_order_acquire) == chunks; }, kCallerSpinMicros);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
    fn_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::SetThreadInline(bool on) { tls_inline = on; }

ThreadPool::CallLabel::CallLabel(const std::string& label) : previous_(tls_call_label) {
  if (!label.empty() && profile::TraceEnabled()) tls_call_label = &label;
}
ThreadPool::CallLabel::~CallLabel() { tls_call_label = previous_; }

}  // namespace axle::runtime
