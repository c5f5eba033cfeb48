#include "runtime/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace axle::runtime {
namespace {
thread_local bool tls_in_pool_body = false;

// Note [Pool spinning] (thread_pool.h).
constexpr int64_t kWorkerSpinMicros = 5000;
constexpr int64_t kCallerSpinMicros = 100;

// Spins until done() or `micros` pass, yielding the core to any other runnable thread between
// rounds of checks; true when done() held.
template <typename Done>
bool SpinUntil(Done done, int64_t micros) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
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
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i)
    workers_.emplace_back([this, i] { WorkerLoop(i); });
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

static void Chunk(int64_t n, int parts, int index, int64_t& begin, int64_t& end) {
  begin = n * index / parts;
  end = n * (index + 1) / parts;
}

void ThreadPool::WorkerLoop(int index) {
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; }, kWorkerSpinMicros);
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
    }
    int64_t b, e;
    Chunk(n, num_threads(), index, b, e);
    std::exception_ptr error;
    if (b < e) {
      tls_in_pool_body = true;
      try {
        (*fn)(b, e);
      } catch (...) {
        error = std::current_exception();  // rethrown by the caller of ParallelFor
      }
      tls_in_pool_body = false;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_parallel,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n < min_parallel || n < num_threads() || tls_in_pool_body) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  int64_t b, e;
  Chunk(n, num_threads(), 0, b, e);
  std::exception_ptr error;
  tls_in_pool_body = true;
  try {
    fn(b, e);
  } catch (...) {
    error = std::current_exception();
  }
  tls_in_pool_body = false;
  // Wait for the workers even when our chunk threw: they still use `fn`.
  SpinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; }, kCallerSpinMicros);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
  if (!error) error = error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

}  // namespace axle::runtime
