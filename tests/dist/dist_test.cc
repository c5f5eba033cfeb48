// Runs of several processes (include/axle/distributed.h, src/dist/), through the harness of
// harness.h: collectives, rendezvous, and the failures of a process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "axle/distributed.h"
#include "backends/registry.h"
#include "core/error.h"
#include "core/flags.h"
#include "dist/launch_env.h"
#include "dist/tcp_store.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "runtime/devices.h"
#include "runtime/world.h"
#include "testing/collective_module.h"
#include "testing/random_module.h"
#include "harness.h"

namespace axle {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace dist_testing;  // NOLINT: the harness


// --- What the processes run ---------------------------------------------------------------------

// Every collective kind and group shape on the run's devices, through ReplicatedExecutable (so
// through CpuDevices and the world's communicator), against the interpreter's lockstep evaluation
// of all devices, bit for bit.
TEST(DistWorker, CollectivesMatchTheInterpreter) {
  WORKER_ONLY("CollectivesMatchTheInterpreter");
  ASSERT_TRUE(distributed::Init());
  const int64_t n = distributed::world_devices();
  flags::set_fast_math(false);
  auto m = testing::CollectiveModule(n);
  std::vector<std::vector<ir::Literal>> args;
  for (int64_t d = 0; d < n; ++d) args.push_back(testing::RandomArguments(*m->entry(), 7000 + static_cast<uint64_t>(d)));
  const std::vector<std::vector<ir::Literal>> want = ir::EvaluateReplicated(*m->entry(), args);
  for (const char* backend : {"cpu", "interpreter"}) {
    auto exe = runtime::ReplicatedExecutable::Compile(runtime::GetBackend(backend), *m);
    std::vector<std::vector<runtime::BufferPtr>> mine;
    const int64_t first = runtime::FirstLocalDevice();
    for (int64_t d = first; d < first + exe->num_devices(); ++d) {
      std::vector<runtime::BufferPtr> a;
      for (const ir::Literal& l : args[static_cast<size_t>(d)]) a.push_back(std::make_shared<ir::Literal>(l));
      mine.push_back(std::move(a));
    }
    const auto got = exe->Execute(std::move(mine));
    ASSERT_EQ(static_cast<int64_t>(got.size()), exe->num_devices());
    for (size_t k = 0; k < got.size(); ++k) {
      const size_t d = static_cast<size_t>(first) + k;
      ASSERT_EQ(got[k].size(), want[d].size());
      for (size_t i = 0; i < want[d].size(); ++i)
        ASSERT_TRUE(got[k][i]->bytes().size() == want[d][i].bytes().size() &&
                    std::equal(want[d][i].bytes().begin(), want[d][i].bytes().end(), got[k][i]->bytes().begin()))
            << backend << ", device " << d << ", result " << i << ": got " << got[k][i]->ToString() << ", want "
            << want[d][i].ToString();
    }
  }
  // The host exchange too: every process's bytes, in rank order.
  const std::string mine = fmt::format("rank {}", distributed::rank());
  const auto all = runtime::GetWorld()->AllGatherBytes({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()},
                                                       "the test's ranks");
  ASSERT_EQ(static_cast<int>(all.size()), distributed::world_size());
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(std::string(all[r].begin(), all[r].end()), fmt::format("rank {}", r));
  distributed::barrier("the end of the test");
  std::printf("DistWorker done\n");
}

// A step of one all_reduce of an f32[size] over every device of the run, compiled for them.
std::unique_ptr<runtime::ReplicatedExecutable> AllReduceOnEveryDevice(int64_t size, ir::ReduceKind kind) {
  const int64_t n = distributed::world_devices();
  ir::Module m("all_reduce");
  m.set_num_replicas(n);
  ir::Builder b(m.AddFunction("main"), ir::ShapeContext{n});
  ir::Value* x = b.Parameter(0, ir::TensorType(DType::kF32, Shape{size}), "x");
  b.Return({b.Build1(ir::OpKind::kAllReduce, {x}, ir::AllReduceAttrs{kind, {}})});
  return runtime::ReplicatedExecutable::Compile(runtime::GetBackend("cpu"), m);
}

// An all_reduce step again and again, until a peer disappears.
TEST(DistWorker, StepsUntilAPeerDies) {
  WORKER_ONLY("StepsUntilAPeerDies");
  ASSERT_TRUE(distributed::Init());
  auto exe = AllReduceOnEveryDevice(1024, ir::ReduceKind::kSum);
  std::printf("ready\n");
  std::fflush(stdout);
  try {
    for (int64_t step = 0;; ++step) {
      std::vector<std::vector<runtime::BufferPtr>> args;
      for (int d = 0; d < exe->num_devices(); ++d)
        args.push_back({std::make_shared<ir::Literal>(ir::Literal::Splat(ir::TensorType(DType::kF32, Shape{1024}), 1))});
      exe->Execute(std::move(args));
    }
  } catch (const Error& e) {
    std::printf("stopped: %s\n", e.what());
    std::fflush(stdout);
    std::exit(3);  // atexit: rank 0 keeps the store up for the others (Note [Who failed])
  }
}

// Rank 1 runs another program than the others.
TEST(DistWorker, ProgramsThatDiffer) {
  WORKER_ONLY("ProgramsThatDiffer");
  ASSERT_TRUE(distributed::Init());
  const int64_t size = distributed::rank() == 1 ? 16 : 8;
  auto exe = AllReduceOnEveryDevice(size, ir::ReduceKind::kMax);
  try {
    std::vector<std::vector<runtime::BufferPtr>> args;
    args.push_back({std::make_shared<ir::Literal>(ir::Literal::Splat(ir::TensorType(DType::kF32, Shape{size}), 1))});
    exe->Execute(std::move(args));
  } catch (const Error& e) {
    std::printf("stopped: %s\n", e.what());
    std::fflush(stdout);
    std::_Exit(3);
  }
  std::_Exit(0);
}

// --- The tests ------------------------------------------------------------------------------------

TEST_F(DistTest, CollectivesAcrossTwoProcessesOfOneDevice) { RunAll(2, 1, "CollectivesMatchTheInterpreter"); }
TEST_F(DistTest, CollectivesAcrossTwoProcessesOfTwoDevices) { RunAll(2, 2, "CollectivesMatchTheInterpreter"); }
TEST_F(DistTest, CollectivesAcrossFourProcessesOfOneDevice) { RunAll(4, 1, "CollectivesMatchTheInterpreter"); }
TEST_F(DistTest, CollectivesAcrossFourProcessesOfTwoDevices) { RunAll(4, 2, "CollectivesMatchTheInterpreter"); }

TEST_F(DistTest, AFileStoreWorksAsRendezvous) {
  RunAll(2, 2, "CollectivesMatchTheInterpreter", {{"AXLE_RENDEZVOUS", "file:" + (dir_ / "store").string()}});
}

// SIGKILL one rank at a random moment of its steps, 20 times: every other rank stops with an
// error naming the killed process, long before the collective timeout.
TEST_F(DistTest, AKilledRankIsNamedByEverySurvivor) {
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    const int n = 3, victim = static_cast<int>(rng() % n);
    const auto start = Clock::now();
    std::vector<Child> children =
        Start(n, 1 + round % 2, "StepsUntilAPeerDies", dir_.string(), {{"AXLE_COLLECTIVE_TIMEOUT", "20"}});
    // Wait until every rank steps (its "ready" line), then a random moment more.
    for (const Child& c : children)
      while (ReadLog(c).find("ready") == std::string::npos && Clock::now() - start < std::chrono::seconds(60))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));
    const auto killed_at = Clock::now();
    ::kill(children[static_cast<size_t>(victim)].pid, SIGKILL);
    WaitAll(children, std::chrono::seconds(120), start);
    const double kill_s = std::chrono::duration<double>(killed_at - start).count();
    for (int r = 0; r < n; ++r) {
      const Child& c = children[static_cast<size_t>(r)];
      if (r == victim) {
        EXPECT_TRUE(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL);
        continue;
      }
      const std::string log = ReadLog(c);
      EXPECT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3)
          << "round " << round << ", rank " << r << " (victim " << victim << ") ended with " << c.status << ":\n" << log;
      EXPECT_THAT(log, HasSubstr(fmt::format("process {} is lost", victim)))
          << "round " << round << ", rank " << r << ":\n" << log;
      // Within the collective timeout (AXLE_COLLECTIVE_TIMEOUT=20 here) plus the time to report; in
      // practice at once (Note [Who failed]).
      EXPECT_LT(c.exit_s - kill_s, 20 + 10) << "round " << round << ", rank " << r << " took that long to notice:\n"
                                            << log;
    }
  }
}

// A rank that stops answering (SIGSTOP): the others give up after the collective timeout and
// name it.
TEST_F(DistTest, AHungRankIsNamedAfterTheTimeout) {
  const int n = 3, victim = 1;
  const auto start = Clock::now();
  std::vector<Child> children = Start(n, 1, "StepsUntilAPeerDies", dir_.string(), {{"AXLE_COLLECTIVE_TIMEOUT", "3"}});
  for (const Child& c : children)
    while (ReadLog(c).find("ready") == std::string::npos && Clock::now() - start < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(children[victim].pid, SIGSTOP);
  const auto stopped_at = Clock::now();
  // The survivors end on their own; then the stopped one is killed.
  for (int r : {0, 2}) {
    int status = 0;
    while (::waitpid(children[static_cast<size_t>(r)].pid, &status, WNOHANG) == 0 &&
           Clock::now() - stopped_at < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    children[static_cast<size_t>(r)].status = status;
    children[static_cast<size_t>(r)].pid = -1;
  }
  const double took = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  ::kill(children[victim].pid, SIGKILL);
  ::waitpid(children[victim].pid, nullptr, 0);
  EXPECT_LT(took, 30);
  for (int r : {0, 2}) {
    const std::string log = ReadLog(children[static_cast<size_t>(r)]);
    EXPECT_TRUE(WIFEXITED(children[static_cast<size_t>(r)].status) && WEXITSTATUS(children[static_cast<size_t>(r)].status) == 3) << log;
    EXPECT_THAT(log, HasSubstr("process 1 is lost")) << "rank " << r << ":\n" << log;
  }
}

TEST_F(DistTest, ProcessesRunningDifferentProgramsFailWithBothDescriptions) {
  const auto start = Clock::now();
  std::vector<Child> children = Start(2, 1, "ProgramsThatDiffer", dir_.string());
  WaitAll(children, std::chrono::seconds(120), start);
  bool named = false;
  for (const Child& c : children) {
    EXPECT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3) << ReadLog(c);
    const std::string log = ReadLog(c);
    named |= log.find("disagree") != std::string::npos && log.find("f32[8]") != std::string::npos &&
             log.find("f32[16]") != std::string::npos;
  }
  EXPECT_TRUE(named) << ReadLog(children[0]) << ReadLog(children[1]);
}

// --- Launchers' variables -------------------------------------------------------------------------

struct EnvScope {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  explicit EnvScope(const std::map<std::string, std::string>& vars) {
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE", "SLURM_STEP_ID", "SLURM_NTASKS",
                          "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NNODES", "SLURM_JOB_ID", "PMI_SIZE", "PMI_RANK",
                          "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "AXLE_LAUNCH_ID"}) {
      saved.emplace_back(k, flags::LauncherVariable(k));
      ::unsetenv(k);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvScope() {
    for (const auto& [k, v] : saved) v ? (void)::setenv(k.c_str(), v->c_str(), 1) : (void)::unsetenv(k.c_str());
  }
};

TEST(LaunchEnvTest, ReadsEveryLaunchersVariables) {
  if (!Worker().empty()) GTEST_SKIP();
  {
    EnvScope e({});
    EXPECT_EQ(dist::DetectLaunchEnv().size, 1);
  }
  {
    EnvScope e({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "x"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
    const dist::LaunchEnv l = dist::DetectLaunchEnv();
    EXPECT_EQ(l.launcher, "torchrun");
    EXPECT_EQ(l.rank, 2);
    EXPECT_EQ(l.size, 4);
    EXPECT_EQ(l.rendezvous, "tcp:node0:29501");  // Note [torchrun's store]
  }
  {
    EnvScope e({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"PMIX_NAMESPACE", "prterun-host-123@1"}});
    const dist::LaunchEnv l = dist::DetectLaunchEnv();
    EXPECT_EQ(l.launcher, "mpirun");
    EXPECT_EQ(l.rank, 1);
    EXPECT_THAT(l.rendezvous, HasSubstr("file:"));  // one host: a file store named after the job
    EXPECT_THAT(l.rendezvous, HasSubstr("prterun-host-123"));
  }
  {
    EnvScope e({{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"},
                {"SLURM_NNODES", "4"}, {"SLURM_JOB_ID", "77"}, {"MASTER_ADDR", "n0"}, {"MASTER_PORT", "1234"}});
    const dist::LaunchEnv l = dist::DetectLaunchEnv();
    EXPECT_EQ(l.launcher, "srun");
    EXPECT_EQ(l.rank, 5);
    EXPECT_EQ(l.size, 8);
    EXPECT_EQ(l.rendezvous, "tcp:n0:1234");
  }
  {
    // Several hosts and no address: an error that says what to set.
    EnvScope e({{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_NNODES", "4"}});
    try {
      dist::DetectLaunchEnv();
      ADD_FAILURE() << "no error";
    } catch (const Error& err) {
      EXPECT_THAT(err.message(), HasSubstr("set MASTER_ADDR and MASTER_PORT"));
    }
  }
  {
    EnvScope e({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
    try {
      dist::DetectLaunchEnv();
      ADD_FAILURE() << "no error";
    } catch (const Error& err) {
      EXPECT_THAT(err.message(), HasSubstr("rank 4 of a world of 4"));
    }
  }
}

TEST(TcpStoreTest, SetGetSetIfAbsentAndTimeouts) {
  if (!Worker().empty()) GTEST_SKIP();
  dist::TcpStoreServer server(0);
  dist::TcpStore a("127.0.0.1", server.port(), std::chrono::seconds(5));
  dist::TcpStore b("127.0.0.1", server.port(), std::chrono::seconds(5));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a.set("k", {'v', '1'});
  });
  EXPECT_EQ(b.get("k"), (std::vector<char>{'v', '1'}));  // waits for the set
  later.join();
  EXPECT_EQ(a.SetIfAbsent("first", {'a'}), std::vector<char>{'a'});
  EXPECT_EQ(b.SetIfAbsent("first", {'b'}), std::vector<char>{'a'});
  try {
    b.wait({"never"}, std::chrono::milliseconds(100));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("no answer for key 'never'"));
  }
  try {
    dist::TcpStore nobody("127.0.0.1", FreePort(), std::chrono::milliseconds(200));
    ADD_FAILURE() << "connected to nobody";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("is rank 0 running"));
  }
}

}  // namespace
}  // namespace axle
