// Virtual CPU devices and their collectives (runtime/devices.h, runtime/collectives.h) against the
// reference interpreter's lockstep evaluation (ir::EvaluateReplicated), bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/compiled_backend.h"
#include "backends/registry.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/collectives.h"
#include "runtime/devices.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"
#include "testing/collective_module.h"
#include "testing/random_module.h"

namespace axle::runtime {
namespace {

using testing::CollectiveModule;

using ir::Builder;
using ir::Literal;
using ir::Module;
using ir::OpKind;
using ir::ReduceKind;
using ir::ReplicaGroups;
using ir::TensorType;
using ir::Value;

// A compiled backend without the disk cache (DiskCache::Default() must stay unread in this binary).
Backend& Compiled() {
  static std::unique_ptr<Backend> b = NewCompiledBackend(nullptr);
  return *b;
}

Backend& BackendNamed(const std::string& name) { return name == "compiled" ? Compiled() : GetBackend(name); }

// The flags these tests need: 8 devices, and exact math in generated code (bitwise comparisons).
class DevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = flags::cpu_devices();
    fast_ = flags::fast_math();
    flags::set_cpu_devices(8);
    flags::set_fast_math(false);
  }
  void TearDown() override {
    flags::set_cpu_devices(devices_);
    flags::set_fast_math(fast_);
  }

 private:
  int64_t devices_ = 1;
  bool fast_ = true;
};

std::vector<std::vector<Literal>> DeviceArguments(const ir::Function& f, int64_t n, uint64_t seed) {
  std::vector<std::vector<Literal>> args;
  for (int64_t d = 0; d < n; ++d) args.push_back(testing::RandomArguments(f, seed * 1000 + static_cast<uint64_t>(d)));
  return args;
}

std::vector<std::vector<BufferPtr>> DeviceBuffers(const std::vector<std::vector<Literal>>& args) {
  std::vector<std::vector<BufferPtr>> out;
  for (const auto& a : args) out.push_back(testutil::Buffers(a));
  return out;
}

// Runs `m` on the devices with `backend` and compares every device's results with the
// interpreter's lockstep evaluation.
void ExpectMatchesInterpreter(const Module& m, const std::string& backend,
                              const std::vector<std::vector<Literal>>& args, const std::string& context) {
  const std::vector<std::vector<Literal>> want = ir::EvaluateReplicated(*m.entry(), args);
  auto exe = ReplicatedExecutable::Compile(BackendNamed(backend), m);
  const std::vector<std::vector<BufferPtr>> got = exe->Execute(DeviceBuffers(args));
  ASSERT_EQ(got.size(), want.size()) << context;
  for (size_t d = 0; d < want.size(); ++d) {
    ASSERT_EQ(got[d].size(), want[d].size()) << context;
    for (size_t i = 0; i < want[d].size(); ++i)
      ASSERT_TRUE(testutil::SameBits(want[d][i], *got[d][i]))
          << context << ": " << backend << ", device " << d << ", result " << i << ": got "
          << got[d][i]->ToString() << ", want " << want[d][i].ToString();
  }
}

class CollectivesOnDevices : public DevicesTest, public ::testing::WithParamInterface<std::tuple<std::string, int>> {};

TEST_P(CollectivesOnDevices, EveryKindAndGroupShapeMatchesTheInterpreter) {
  const auto& [backend, n] = GetParam();
  auto m = CollectiveModule(n);
  ExpectMatchesInterpreter(*m, backend, DeviceArguments(*m->entry(), n, 7), fmt::format("{} devices", n));
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectivesOnDevices,
                         ::testing::Combine(::testing::Values("cpu", "compiled", "interpreter"),
                                            ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           return fmt::format("{}_{}", std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST_F(DevicesTest, StatsCountCollectivesAndPayloadBytes) {
  auto m = Module("stats");
  m.set_num_replicas(4);
  Builder b(m.AddFunction("main"), ir::ShapeContext{4});
  Value* x = b.Parameter(0, TensorType(DType::kF32, Shape{8}), "x");
  Value* s = b.Build1(OpKind::kAllReduce, {x}, ir::AllReduceAttrs{ReduceKind::kSum, {}});
  Value* g = b.Build1(OpKind::kAllGather, {s}, ir::AllGatherAttrs{0, {{0, 1}, {2, 3}}});
  Value* r = b.Build1(OpKind::kReduceScatter, {g}, ir::ReduceScatterAttrs{ReduceKind::kSum, 0, {}});
  Value* p = b.Build1(OpKind::kCollectivePermute, {r}, ir::CollectivePermuteAttrs{{{0, 1}}});
  b.Return({p});
  auto exe = ReplicatedExecutable::Compile(GetBackend("cpu"), m);
  std::vector<std::vector<BufferPtr>> args;
  for (int d = 0; d < 4; ++d)
    args.push_back({std::make_shared<Literal>(Literal::Splat(TensorType(DType::kF32, Shape{8}), d + 1))});
  auto out = exe->Execute(std::move(args));
  // all_reduce: 10 everywhere; all_gather: 16 x 10; reduce_scatter over 4: 4 x 40; permute 0 -> 1.
  EXPECT_EQ(*out[1][0], Literal::Splat(TensorType(DType::kF32, Shape{4}), 40));
  EXPECT_EQ(*out[0][0], Literal::Splat(TensorType(DType::kF32, Shape{4}), 0));
  const CollectiveStats& d0 = exe->last_collective_stats()[0];
  EXPECT_EQ(d0.collectives, 4);
  EXPECT_EQ(d0.all_reduce_bytes, 32);
  EXPECT_EQ(d0.all_gather_bytes, 32);
  EXPECT_EQ(d0.reduce_scatter_bytes, 64);
  EXPECT_EQ(d0.collective_permute_bytes, 16);  // device 0 sends
  EXPECT_EQ(exe->last_collective_stats()[1].collective_permute_bytes, 0);
  const CollectiveStats total = exe->total_collective_stats();
  EXPECT_EQ(total.collectives, 16);
  EXPECT_EQ(total.all_gather_bytes, 4 * 32);
  EXPECT_EQ(exe->last_stats().size(), 4u);
  EXPECT_EQ(exe->last_stats()[2].kernels_run, 4);
}

// Random partitioned programs (collectives with random groups among every other op).
TEST_F(DevicesTest, RandomMultiReplicaModulesMatchTheInterpreter) {
  testing::RegisterTestCustomCalls();
  int checked = 0, with_collectives = 0;
  for (uint64_t seed = 0; seed < 48; ++seed) {
    const int64_t n = std::vector<int64_t>{2, 3, 4, 8}[seed % 4];
    testing::RandomModuleOptions o;
    o.collectives = true;
    o.num_replicas = n;
    o.num_nodes = 16;
    auto m = testing::RandomModule(seed, o);
    const auto args = DeviceArguments(*m->entry(), n, seed);
    try {
      ir::EvaluateReplicated(*m->entry(), args);
    } catch (const Error&) {
      continue;  // a program the interpreter refuses (e.g. over its memory cap)
    }
    for (const auto& node : m->entry()->nodes()) with_collectives += node->info().Has(ir::kCollective) ? 1 : 0;
    const std::string context = fmt::format("seed {}:\n{}", seed, ir::PrintModule(*m));
    ExpectMatchesInterpreter(*m, "cpu", args, context);
    ExpectMatchesInterpreter(*m, "interpreter", args, context);
    if (seed % 8 == 0) ExpectMatchesInterpreter(*m, "compiled", args, context);  // native compiles are slow
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_GT(with_collectives, 20);
}

TEST_F(DevicesTest, RepeatedRunsGiveTheSameBits) {
  auto m = CollectiveModule(8);
  const auto args = DeviceArguments(*m->entry(), 8, 3);
  auto exe = ReplicatedExecutable::Compile(GetBackend("cpu"), *m);
  const auto first = exe->Execute(DeviceBuffers(args));
  for (int run = 0; run < 3; ++run) {
    const auto again = exe->Execute(DeviceBuffers(args));
    for (size_t d = 0; d < first.size(); ++d)
      for (size_t i = 0; i < first[d].size(); ++i)
        ASSERT_EQ(*first[d][i], *again[d][i]) << "run " << run << ", device " << d << ", result " << i;
  }
}

// Large loops on several devices at once share the process-wide thread pool.
TEST_F(DevicesTest, DevicesShareTheThreadPool) {
  Module m("big");
  m.set_num_replicas(4);
  Builder b(m.AddFunction("main"), ir::ShapeContext{4});
  const Shape s{4, 3 * kParallelElements};
  Value* x = b.Parameter(0, TensorType(DType::kF32, s), "x");
  Value* y = b.Mul(b.Add(x, x), x);
  Value* t = b.Transpose(y, {1, 0});
  Value* r = b.Reduce(t, ReduceKind::kSum, {0});
  b.Return({b.Build1(OpKind::kAllReduce, {r}, ir::AllReduceAttrs{ReduceKind::kMax, {}}), y});
  std::vector<std::vector<Literal>> args;
  for (int d = 0; d < 4; ++d) args.push_back({testutil::RandomLiteral(DType::kF32, s, static_cast<uint64_t>(d))});
  ExpectMatchesInterpreter(m, "cpu", args, "big");
  ExpectMatchesInterpreter(m, "compiled", args, "big");
}

// Note [A core per device] (devices.cc): devices that cover the pool's threads run their loops
// inline; the same loop from another thread is split over the pool.
TEST(DevicesInlineTest, DevicesCoveringTheCoresRunTheirLoopsInline) {
  ThreadPool& pool = ThreadPool::Global();
  CpuDevices devices(std::max(2, pool.num_threads()));
  constexpr int64_t kN = int64_t{1} << 20;
  std::atomic<int64_t> covered{0};
  const auto loop = [&] { pool.ParallelFor(kN, 1024, [&](int64_t b, int64_t e) { covered += e - b; }); };
  const int64_t before = pool.dispatches();
  devices.Run([&](int) { loop(); });
  EXPECT_EQ(covered.load(), kN * devices.size());
  EXPECT_EQ(pool.dispatches(), before);
  if (pool.num_threads() > 1) {
    loop();
    EXPECT_EQ(pool.dispatches(), before + 1);
  }
}

TEST(ThreadPoolTest, AChunkThatThrowsIsRethrownAndThePoolStaysUsable) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.ParallelFor(1000, 1, [](int64_t b, int64_t) {
    if (b > 0) Fail("chunk at {} failed", b);
  }), Error);
  EXPECT_THROW(pool.ParallelFor(1000, 1, [](int64_t b, int64_t) {
    if (b == 0) Fail("first chunk failed");
  }), Error);
  std::atomic<int64_t> sum = 0;
  pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

// Note [Chunks stay on their thread]: the caller starts at the front of its own share (chunk 0);
// a worker held up in its first chunk has the rest of its share stolen from the back, and every
// iteration still runs exactly once.
TEST(ThreadPoolTest, ThreadsStartOnTheirOwnShareAndStealTheRest) {
  ThreadPool pool(3);
  constexpr int64_t kN = 12000;  // min_parallel 1000: 12 chunks of 1000, 4 a thread
  const std::thread::id caller = std::this_thread::get_id();
  for (int call = 0; call < 20; ++call) {
    std::vector<std::atomic<int>> seen(kN);
    std::mutex mu;
    std::vector<int64_t> caller_chunks;
    std::atomic<bool> worker_slept{false};
    pool.ParallelFor(kN, 1000, [&](int64_t b, int64_t e) {
      EXPECT_EQ(e - b, 1000);
      if (std::this_thread::get_id() == caller) {
        std::lock_guard<std::mutex> lock(mu);
        caller_chunks.push_back(b / 1000);
      } else if (!worker_slept.exchange(true)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "call " << call << ", i " << i;
    // The caller's own share is chunks 0-3: it runs a prefix of them in order (the rest may be
    // stolen from the back), then only chunks stolen from the workers' shares.
    ASSERT_FALSE(caller_chunks.empty());
    size_t own = 0;
    while (own < caller_chunks.size() && caller_chunks[own] < 4) {
      EXPECT_EQ(caller_chunks[own], static_cast<int64_t>(own)) << "call " << call;
      ++own;
    }
    EXPECT_GE(own, 1u) << "call " << call;
    for (size_t j = own; j < caller_chunks.size(); ++j) EXPECT_GE(caller_chunks[j], 4) << "call " << call;
  }
}

// dispatches() counts the calls split over the pool (AXLE_PROFILE's one-thread column), not those
// run inline: under min_parallel, fewer iterations than threads, or nested in a body.
TEST(ThreadPoolTest, DispatchesCountOnlySplitCalls) {
  ThreadPool pool(2);
  auto nothing = [](int64_t, int64_t) {};
  pool.ParallelFor(10, 100, nothing);  // under min_parallel
  pool.ParallelFor(1, 1, nothing);     // one iteration, two threads
  EXPECT_EQ(pool.dispatches(), 0);
  pool.ParallelFor(1000, 100, [&](int64_t, int64_t) { pool.ParallelFor(1000, 1, nothing); });
  EXPECT_EQ(pool.dispatches(), 1);  // the nested calls ran inline
}

// Note [Competing threads]: while threads outside the pool leave it one core, calls run inline on
// the caller (one call over the whole range); the count going back down splits them again.
TEST(ThreadPoolTest, CallsRunInlineWhileAnotherThreadCompetes) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool other_thread = false;
  auto body = [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.push_back({b, e});
    if (std::this_thread::get_id() != caller) other_thread = true;
  };
  EXPECT_FALSE(pool.Crowded());
  pool.AddCompeting(+1);
  EXPECT_TRUE(pool.Crowded());
  pool.ParallelFor(1000, 10, body);
  EXPECT_EQ(pool.dispatches(), 0);
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 1000}}));
  EXPECT_FALSE(other_thread);
  pool.AddCompeting(-1);
  EXPECT_FALSE(pool.Crowded());
  ranges.clear();
  pool.ParallelFor(1000, 10, body);
  EXPECT_EQ(pool.dispatches(), 1);
  EXPECT_GT(ranges.size(), 1u);
  pool.AddCompeting(-1);  // a host that blocked with no step running: the count dips below zero
  EXPECT_FALSE(pool.Crowded());
  pool.AddCompeting(+1);
  ThreadPool single(1);  // a pool of one thread is never crowded (it never splits anyway)
  single.AddCompeting(+1);
  EXPECT_FALSE(single.Crowded());
}

// Note [Pool chunks]: chunks are claimed dynamically, but their boundaries depend only on the call;
// back-to-back calls must never let a late worker run a finished call's body (its locals are gone).
TEST(ThreadPoolTest, ChunksAreFixedByTheCallAndEachRunsOnceAcrossManyCalls) {
  ThreadPool pool(4);
  std::set<std::pair<int64_t, int64_t>> first;
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 97;
    std::vector<int> hits(static_cast<size_t>(n), 0);  // per call: a stale body would touch a dead vector
    std::mutex mu;
    std::set<std::pair<int64_t, int64_t>> chunks;
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      std::lock_guard<std::mutex> lock(mu);
      chunks.insert({b, e});
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "call " << call << " index " << i;
    if (n == 96) {
      // 4 threads x kChunksPerThread chunks of 6, whichever thread ran them.
      ASSERT_EQ(chunks.size(), static_cast<size_t>(4 * kChunksPerThread)) << "call " << call;
      if (first.empty()) first = chunks;
      ASSERT_EQ(chunks, first) << "call " << call;
    }
  }
  // A large min_parallel keeps chunks at least half of it: 8 chunks of 250 here, not 16.
  std::atomic<int> calls = 0;
  pool.ParallelFor(2000, 500, [&](int64_t b, int64_t e) {
    EXPECT_EQ(e - b, 250);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 8);
  // One chunk per thread on request (column reductions): 4 contiguous shares.
  calls = 0;
  pool.ParallelFor(96, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(e - b, 24);
    ++calls;
  }, /*chunks_per_thread=*/1);
  EXPECT_EQ(calls.load(), 4);
}

// ----- single replica: plain Execute --------------------------------------------------------

TEST_F(DevicesTest, OneReplicaCollectivesRunWithoutDevices) {
  auto m = CollectiveModule(1);
  const auto args = DeviceArguments(*m->entry(), 1, 11);
  const std::vector<Literal> want = ir::Evaluate(*m->entry(), args[0]);
  for (const std::string backend : {"cpu", "compiled", "interpreter"}) {
    const std::vector<BufferPtr> got = BackendNamed(backend).Compile(*m)->Execute(testutil::Buffers(args[0]));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(testutil::SameBits(want[i], *got[i])) << backend << " result " << i << ": " << got[i]->ToString();
  }
}

TEST_F(DevicesTest, PartitionedModuleNeedsDevices) {
  auto m = CollectiveModule(2);
  const auto args = DeviceArguments(*m->entry(), 2, 1);
  for (const std::string backend : {"cpu", "compiled", "interpreter"}) {
    auto exe = BackendNamed(backend).Compile(*m);
    try {
      exe->Execute(testutil::Buffers(args[0]));
      FAIL() << backend << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("partitioned for 2 replicas"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ReplicatedExecutable"), std::string::npos) << e.what();
    }
  }
  flags::set_cpu_devices(1);
  try {
    ReplicatedExecutable::Compile(GetBackend("cpu"), *m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AXLE_CPU_DEVICES=2"), std::string::npos) << e.what();
  }
}

// ----- failures -----------------------------------------------------------------------------

// A module whose custom_call fails on device 2 while the others wait in an all_reduce.
TEST_F(DevicesTest, ADeviceThatFailsStopsTheStepWithOneError) {
  ir::RegisterCustomCall("axle.test.fail_on_negative", [](const std::vector<Literal>& ops, const ir::CustomCallAttrs&,
                                                          const std::vector<TensorType>&) {
    if (ops[0].GetDouble(0) < 0) Fail("negative input");
    return std::vector<Literal>{ops[0]};
  });
  Module m("fails");
  m.set_num_replicas(4);
  Builder b(m.AddFunction("main"), ir::ShapeContext{4});
  Value* x = b.Parameter(0, TensorType(DType::kF32, Shape{4}), "x");
  Value* c = b.Build(OpKind::kCustomCall, {x}, ir::CustomCallAttrs{"axle.test.fail_on_negative", ""},
                     {TensorType(DType::kF32, Shape{4})})[0];
  b.Return({b.Build1(OpKind::kAllReduce, {c}, ir::AllReduceAttrs{ReduceKind::kSum, {}})});
  for (const std::string backend : {"cpu", "compiled", "interpreter"}) {
    auto exe = ReplicatedExecutable::Compile(BackendNamed(backend), m);
    auto args = [&](int bad) {
      std::vector<std::vector<BufferPtr>> a;
      for (int d = 0; d < 4; ++d)
        a.push_back({std::make_shared<Literal>(Literal::Splat(TensorType(DType::kF32, Shape{4}), d == bad ? -1 : d))});
      return a;
    };
    try {
      exe->Execute(args(2));
      FAIL() << backend << ": expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("device 2 failed"), std::string::npos) << what;
      EXPECT_NE(what.find("negative input"), std::string::npos) << what;
    }
    // The devices are usable again.
    auto out = exe->Execute(args(-1));
    EXPECT_EQ(*out[3][0], Literal::Splat(TensorType(DType::kF32, Shape{4}), 6)) << backend;
  }
}

TEST_F(DevicesTest, WrongArgumentsAreClearErrors) {
  auto m = CollectiveModule(2);
  auto exe = ReplicatedExecutable::Compile(GetBackend("cpu"), *m);
  auto args = DeviceBuffers(DeviceArguments(*m->entry(), 2, 5));
  try {
    exe->Execute({args[0]});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("arguments for 1 devices; the module runs on 2"), std::string::npos)
        << e.what();
  }
  args[1].pop_back();
  try {
    exe->Execute(args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 1 failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 7 arguments, got 6"), std::string::npos) << e.what();
  }
}

TEST_F(DevicesTest, DevicesThatDisagreeOnACollectiveFail) {
  CpuDevices devices(2);
  const Literal x = Literal::Splat(TensorType(DType::kF32, Shape{4}), 1);
  try {
    devices.Run([&](int d) {
      Literal out(TensorType(DType::kF32, Shape{d == 0 ? 4 : 8}));
      if (d == 0) devices.comm().AllReduce(d, x, out, ReduceKind::kSum, {});
      else devices.comm().AllGather(d, x, out, 0, {});
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("devices disagree on collective #0"), std::string::npos) << e.what();
  }
  try {
    devices.Run([&](int d) {
      Literal out(x.type());
      if (d == 0) devices.comm().AllReduce(d, x, out, ReduceKind::kSum, {});
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 1 finished its step without completing it"), std::string::npos)
        << e.what();
  }
  try {
    devices.Run([&](int d) {
      Literal out(x.type());
      devices.comm().AllReduce(d, x, out, ReduceKind::kSum, {{0}, {0}});
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("appears in two groups"), std::string::npos) << e.what();
  }
  // Many consecutive collectives on one communicator, groups of one and of two.
  std::vector<Literal> outs(2, Literal(x.type()));
  devices.Run([&](int d) {
    Literal acc = Literal::Splat(x.type(), d + 1);
    for (int k = 0; k < 200; ++k) {
      Literal out(x.type());
      devices.comm().AllReduce(d, acc, out, ReduceKind::kMax, k % 2 ? ReplicaGroups{{0}, {1}} : ReplicaGroups{});
      acc = std::move(out);
    }
    outs[static_cast<size_t>(d)] = std::move(acc);
  });
  EXPECT_EQ(outs[0], Literal::Splat(x.type(), 2));
  EXPECT_EQ(outs[1], Literal::Splat(x.type(), 2));
  EXPECT_EQ(devices.comm().stats(0).collectives, 200);
}

}  // namespace
}  // namespace axle::runtime
