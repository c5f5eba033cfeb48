// AXLE_PROFILE's table (runtime/profile.h): per-label sums, and the time of the calls that ran on
// one thread apart from the total; AXLE_TRACE's timeline: spans per thread, as Chrome trace JSON.
#include "runtime/profile.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/cpu_flags.h"
#include "ir/parser.h"
#include "runtime/backend.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::profile {
namespace {

TEST(ProfileTest, ReportSumsCallsAndShowsTheOneThreadTime) {
  Reset();
  EXPECT_EQ(Report(), "");
  Record("dot_general f32[4,4], f32[4,4] -> f32[4,4]", 0.003, 192);             // split
  Record("dot_general f32[4,4], f32[4,4] -> f32[4,4]", 0.001, 192, false);      // inline
  Record("reduce{mul}[1] f32", 0.0006, 1000, false);
  const std::string r = Report();
  EXPECT_NE(r.find("3 kernel calls, 0.005 s in 2 distinct kernels, 0.002 s of it on one thread"), std::string::npos)
      << r;
  EXPECT_NE(r.find("1-thr ms"), std::string::npos) << r;
  // calls, total ms, share, GB/s (384 bytes in 4 ms), one-thread ms, label; the larger total first.
  const size_t dot = r.find("        2        4.0  87.0%     0.0       1.0  dot_general"),
               red = r.find("        1        0.6  13.0%     0.0       0.6  reduce{mul}[1] f32");
  EXPECT_NE(dot, std::string::npos) << r;
  EXPECT_NE(red, std::string::npos) << r;
  EXPECT_LT(dot, red) << r;
  Reset();
  EXPECT_EQ(Report(), "");
}

// The trace's spans: name -> threads (by the thread_name metadata) it ran on.
std::map<std::string, std::multiset<std::string>> SpansByName(const nlohmann::json& doc) {
  std::map<int, std::string> thread;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M") thread[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
  std::map<std::string, std::multiset<std::string>> spans;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    EXPECT_TRUE(thread.count(e.at("tid").get<int>())) << e.dump();
    spans[e.at("name").get<std::string>()].insert(thread[e.at("tid").get<int>()]);
  }
  return spans;
}

struct TraceOn {
  TraceOn() { SetTraceForTesting(true), ResetTrace(); }
  ~TraceOn() { SetTraceForTesting(false), ResetTrace(); }
};

TEST(TraceTest, SpansAreChromeTraceEventsOnTheirThreads) {
  TraceOn on;
  const auto t0 = Clock::now();
  TraceSpan("first", t0, t0 + std::chrono::microseconds(250));
  std::thread([&] {
    pthread_setname_np(pthread_self(), "trace-test");
    TraceScope s("second");
  }).join();
  { TraceScope none(""); }  // an empty name records nothing
  const nlohmann::json doc = nlohmann::json::parse(TraceJson());
  const auto spans = SpansByName(doc);
  ASSERT_EQ(spans.size(), 2u) << doc.dump();
  EXPECT_EQ(spans.at("second"), std::multiset<std::string>{"trace-test"});
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("name") == "first") {
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 250.0);
    }
  }
  EXPECT_EQ(doc.at("otherData").at("dropped_spans"), 0);
  SetTraceForTesting(false);
  TraceSpan("off", t0, t0);
  EXPECT_EQ(SpansByName(nlohmann::json::parse(TraceJson())).count("off"), 0u);
}

// A compiled run: one span for the run, one per kernel on the executing thread, and (with a pool
// of two) chunks of the split loop on the pool's worker, under the kernel's label. Kernel by
// kernel: with chains (Note [Batch-sliced chains]) the product and the loop after it are one
// chain, whose span is the executing thread's and whose members' spans are on the threads that
// ran their slices.
TEST(TraceTest, ACompiledRunHasItsKernelsAndThePoolsChunks) {
  struct Restore {
    bool chains = flags::chains();
    ~Restore() { flags::set_chains(chains); }
  } restore;
  for (bool chained : {false, true}) {
    flags::set_chains(chained);
    TraceOn on;
    auto m = ir::ParseModule(R"(module @traced {
    func @main {
      %x = parameter() {index=0} : f32[512,256]
      %w = parameter() {index=1} : f32[256,256]
      %d = dot_general(%x, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[512,256]
      %e = exp(%d) : f32[512,256]
      %s = add(%e, %x) : f32[512,256]
      return %s
    }
  })");
    std::unique_ptr<Backend> compiled = NewCompiledBackend(nullptr);  // no disk cache in this binary
    auto exe = compiled->Compile(*m);
    std::vector<BufferPtr> args = {std::make_shared<ir::Literal>(ir::TensorType(DType::kF32, Shape{512, 256})),
                                   std::make_shared<ir::Literal>(ir::TensorType(DType::kF32, Shape{256, 256}))};
    exe->Execute(args);
    const auto spans = SpansByName(nlohmann::json::parse(TraceJson()));
    ASSERT_EQ(spans.count("run @traced (compiled)"), 1u);
    const std::string exec_thread = *spans.at("run @traced (compiled)").begin();
    const std::string dot = "dot_general f32[512,256], f32[256,256] -> f32[512,256]";
    ASSERT_EQ(spans.count(dot), 1u);
    std::string fused, chain;
    for (const auto& [name, threads] : spans) {
      if (name.rfind("fused{", 0) == 0) fused = name;
      if (name.rfind("chain/", 0) == 0) chain = name;
    }
    ASSERT_FALSE(fused.empty());
    if (!chained || ThreadPool::Global().num_threads() < 2) {
      EXPECT_TRUE(spans.at(dot).count(exec_thread));
      EXPECT_TRUE(spans.at(fused).count(exec_thread));
    } else {
      ASSERT_FALSE(chain.empty());
      EXPECT_TRUE(spans.at(chain).count(exec_thread));
      EXPECT_NE(chain.find(dot), std::string::npos) << chain;
      EXPECT_NE(chain.find(fused), std::string::npos) << chain;
    }
  }
}

// A worker's chunks carry the label of the caller's CallLabel; without one they are not recorded.
TEST(TraceTest, PoolChunksCarryTheCallersLabel) {
  ThreadPool& pool = ThreadPool::Global();
  if (pool.num_threads() < 2) GTEST_SKIP() << "one thread: no workers";
  TraceOn on;
  // Two chunks, each waiting (up to 10 s) until both have started: a worker runs one of them.
  auto both = [&](const std::string& label) {
    std::atomic<int> started{0};
    ThreadPool::CallLabel l(label);
    pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
      started.fetch_add(1);
      SpinUntil([&] { return started.load() == 2; }, 10'000'000);
    }, 1);
    return started.load();
  };
  ASSERT_EQ(both("labelled call"), 2);
  ASSERT_EQ(both(""), 2);
  const auto spans = SpansByName(nlohmann::json::parse(TraceJson()));
  ASSERT_EQ(spans.size(), 1u);
  ASSERT_EQ(spans.count("labelled call"), 1u);
  EXPECT_EQ(spans.at("labelled call").size(), 1u);  // the worker's chunk; the caller's is not a span
  EXPECT_EQ(spans.at("labelled call").begin()->rfind("axle-pool", 0), 0u) << *spans.at("labelled call").begin();
}

}  // namespace
}  // namespace axle::runtime::profile
