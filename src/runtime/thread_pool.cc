#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <string>

#include "runtime/profile.h"

namespace axle::runtime {
namespace {
thread_local bool tls_in_pool_body = false;
thread_local bool tls_inline = false;
thread_local const std::string* tls_call_label = nullptr;  // ThreadPool::CallLabel

// Note [Pool spinning] (thread_pool.h).
constexpr int64_t kWorkerSpinMicros = 5000;
constexpr int64_t kCallerSpinMicros = 100;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
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
  static ThreadPool* pool = [] {
    unsigned hc = std::thread::hardware_concurrency();
    return new ThreadPool(static_cast<int>(std::clamp(hc == 0 ? 1u : hc, 1u, 64u)));
  }();  // never destroyed: workers may outlive static destruction order otherwise
  return *pool;
}

static void Chunk(int64_t n, int64_t parts, int64_t index, int64_t& begin, int64_t& end) {
  begin = n * index / parts;
  end = n * (index + 1) / parts;
}

// Note [Pool chunks] (thread_pool.h): claims chunks of call `gen` until none is left.
void ThreadPool::RunChunks(uint32_t gen, const std::function<void(int64_t, int64_t)>* fn, int64_t n,
                           int64_t chunks, const std::string* label) {
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    do {
      if (static_cast<uint32_t>(t >> 32) != gen || static_cast<int64_t>(t & 0xffffffffu) >= chunks) return;
    } while (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    int64_t b, e;
    Chunk(n, chunks, static_cast<int64_t>(t & 0xffffffffu), b, e);
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
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks done_ under mu_ before it sleeps
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::WorkerLoop(int /*index*/) {
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
    RunChunks(static_cast<uint32_t>(seen), fn, n, chunks, label);
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
    gen = static_cast<uint32_t>(++generation_);
    ticket_.store(uint64_t{gen} << 32, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunChunks(gen, &fn, n, chunks);
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
