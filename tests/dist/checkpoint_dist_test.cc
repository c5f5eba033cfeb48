// checkpoint::Manager in runs of several processes (Note [Saving from several processes], Note
// [Who writes a block], Note [Restoring in chunks] in src/checkpoint/manager.cc): every process
// writes its own blocks and process 0 commits; a checkpoint restores onto any number of processes,
// each reading only the chunks its devices need; damage that one process finds fails them all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "axle/checkpoint.h"
#include "axle/distributed.h"
#include "axle/spmd.h"
#include "core/error.h"
#include "core/flags.h"
#include "harness.h"
#include "train/trainer.h"

namespace axle {
namespace {

using ::testing::HasSubstr;
using namespace dist_testing;  // NOLINT: the harness
using checkpoint::Manager;
using checkpoint::State;

// An [8, 6] matrix, a [5] vector and a scalar, the same in every process.
ir::Literal Matrix() {
  std::vector<float> v(48);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * 1.3f) * 50.0f;
  return ir::Literal::FromVector<float>(DType::kF32, Shape{8, 6}, v);
}
ir::Literal Vector() { return ir::Literal::FromVector<float>(DType::kF32, Shape{5}, {1.5f, -2.f, 3.25f, 4.f, -5.5f}); }
ir::Literal Scalar() { return ir::Literal::FromVector<int32_t>(DType::kI32, Shape{}, {77}); }

// `global` laid out as `spec` over `mesh`, resident as a sharded step leaves it (each process
// holds its own devices' shards).
Tensor Place(const ir::Literal& global, const spmd::Mesh& mesh, const spmd::PartitionSpec& spec) {
  Tensor whole = from_literal(global);
  spmd::mark_sharding(whole, mesh, spec);
  Tensor placed = spmd::from_local_shards(spmd::local_shards(whole), global.shape().dims(), mesh, spec);
  sync();
  return placed;
}

// Zeros annotated with `spec` over `mesh`: where a restore lands.
Tensor Target(const ir::TensorType& type, const spmd::Mesh& mesh, const spmd::PartitionSpec& spec) {
  Tensor t = from_literal(ir::Literal(type));
  spmd::mark_sharding(t, mesh, spec);
  sync();
  return t;
}

std::string CheckpointDir() { return flags::LauncherVariable("AXLE_TEST_CKPT_DIR").value_or(""); }

constexpr int64_t kChunk = 24;  // bytes: two rows of a [*, 3] block, three of a [*, 2] one

// 2 processes x 2 devices: save on fsdp=2 x tp=2, restore in the same processes by rows (fsdp=4).
TEST(DistWorker, SavesItsOwnBlocks) {
  WORKER_ONLY("SavesItsOwnBlocks");
  ASSERT_TRUE(distributed::Init());
  const spmd::Mesh grid({2, 2}, {"fsdp", "tp"});
  Manager m(CheckpointDir(), {.chunk_bytes = kChunk});
  State s;
  s.tensors.emplace_back("matrix", Place(Matrix(), grid, {"fsdp", "tp"}));
  s.tensors.emplace_back("vector", Place(Vector(), grid, {}));
  s.tensors.emplace_back("scalar", from_literal(Scalar()));
  s.extra["rank"] = distributed::rank();  // process 0's is saved
  ASSERT_TRUE(m.save_async(5, s));
  m.wait();
  EXPECT_EQ(m.latest(), 5);  // committed before wait() returns, on every process
  EXPECT_THROW(m.save(5, s), Error);

  const spmd::Mesh rows({4}, {"fsdp"});
  State t;
  t.tensors.emplace_back("matrix", Target(Matrix().type(), rows, {"fsdp"}));
  t.tensors.emplace_back("vector", Target(Vector().type(), rows, {"fsdp"}));
  t.tensors.emplace_back("scalar", from_literal(ir::Literal(Scalar().type())));
  m.restore(5, t);
  EXPECT_EQ(t.extra["rank"], 0);
  // Each process holds rows [4r, 4r + 4) of the matrix: the two saved blocks of those rows (48
  // bytes each), not the other two; the vector (saved whole, one chunk) and the scalar.
  const checkpoint::RestoreStats& stats = m.last_restore();
  EXPECT_EQ(stats.bytes_read, 2 * 48 + 20 + 4);
  EXPECT_EQ(stats.bytes_checked, stats.bytes_read);
  EXPECT_LE(stats.staging_bytes, kChunk);
  EXPECT_TRUE(t.tensors[0].second.to_literal() == Matrix());
  EXPECT_TRUE(t.tensors[1].second.to_literal() == Vector());
  EXPECT_TRUE(t.tensors[2].second.to_literal() == Scalar());
  std::cout << "DistWorker done" << std::endl;
}

// 4 processes x 1 device restore, by rows (fsdp=4), what one process saved by columns (tp=4).
TEST(DistWorker, RestoresWhatOneProcessSaved) {
  WORKER_ONLY("RestoresWhatOneProcessSaved");
  ASSERT_TRUE(distributed::Init());
  const spmd::Mesh rows({4}, {"fsdp"});
  Manager m(CheckpointDir(), {.read_only = true});
  State t;
  t.tensors.emplace_back("matrix", Target(Matrix().type(), rows, {"fsdp"}));
  t.tensors.emplace_back("vector", Target(Vector().type(), rows, {}));
  t.tensors.emplace_back("scalar", from_literal(ir::Literal(Scalar().type())));
  const bool damaged = flags::LauncherVariable("AXLE_TEST_CKPT_DAMAGED").has_value();
  try {
    m.restore(7, t);
    EXPECT_FALSE(damaged) << "restored a damaged checkpoint";
  } catch (const Error& e) {
    ASSERT_TRUE(damaged) << e.what();
    // Only process 3 reads the damaged rows; every process fails, naming it, the tensor and the file.
    EXPECT_THAT(e.what(), HasSubstr("process 3 of 4 found it"));
    EXPECT_THAT(e.what(), HasSubstr("tensor 'matrix'"));
    EXPECT_THAT(e.what(), HasSubstr("device_00000.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("checksum"));
    // Nothing changed.
    EXPECT_TRUE(t.tensors[0].second.to_literal() == ir::Literal(Matrix().type()));
    std::cout << "DistWorker done" << std::endl;
    return;
  }
  // Saved as three [8, 2] column blocks in chunks of 3 rows; process r holds rows [2r, 2r + 2):
  // one chunk of each block (rows 6-7 lie in the last chunk, of 2 rows), plus the vector and scalar.
  // (Rows 2-3 straddle chunks 0 and 1.)
  const int64_t matrix_bytes[4] = {3 * 24, 3 * 48, 3 * 24, 3 * 16};
  EXPECT_EQ(m.last_restore().bytes_read, matrix_bytes[distributed::rank()] + 20 + 4)
      << "process " << distributed::rank();
  EXPECT_TRUE(t.tensors[0].second.to_literal() == Matrix());
  EXPECT_TRUE(t.tensors[1].second.to_literal() == Vector());
  EXPECT_TRUE(t.tensors[2].second.to_literal() == Scalar());
  std::cout << "DistWorker done" << std::endl;
}

// 2 processes train until a SIGTERM that only process 1 gets; both stop after the same step,
// save it together and return (Note [Stopping on a signal], src/train/trainer.cc).
TEST(DistWorker, TrainsUntilASignal) {
  WORKER_ONLY("TrainsUntilASignal");
  train::TrainOptions o;
  o.steps = 100000;
  o.batch = 4;
  o.seq = 16;
  o.samples = 0;
  o.progress = false;
  o.backend = "cpu";
  o.devices = 1;
  o.mesh = "fsdp=2";
  o.log_every = 1;
  o.checkpoint_dir = CheckpointDir();
  o.log_json = CheckpointDir() + ".jsonl";  // process 1 writes <dir>.rank1.jsonl
  std::ostringstream out;
  const train::TrainResult r = train::Train(o, out);
  std::cout << out.str();
  EXPECT_EQ(r.stopped_by_signal, SIGTERM);
  EXPECT_EQ(r.last_checkpoint, r.steps.back().step + 1);
  std::cout << "stopped after step " << r.steps.back().step << "\n";
  std::cout << "DistWorker done" << std::endl;
}

// 2 processes x 1 device save steps 1, 2, ... (each step's tensor filled with the step number)
// until the parent kills one of them; the survivor reports the loss instead of hanging.
TEST(DistWorker, SavesUntilKilled) {
  WORKER_ONLY("SavesUntilKilled");
  ASSERT_TRUE(distributed::Init());
  const spmd::Mesh mesh({2}, {"fsdp"});
  Manager m(CheckpointDir(), {.max_to_keep = 2, .chunk_bytes = 1 << 16});
  try {
    for (int64_t step = 1;; ++step) {
      State s;
      s.tensors.emplace_back("w", Place(ir::Literal::FromVector<float>(
                                            DType::kF32, Shape{512, 1024},
                                            std::vector<float>(512 * 1024, static_cast<float>(step))),
                                        mesh, {"fsdp"}));
      s.extra["step"] = step;
      m.save(step, s);
    }
  } catch (const Error& e) {
    std::cout << "survivor saw: " << e.what() << std::endl;
    std::_Exit(3);
  }
}

class CheckpointDistTest : public DistTest {};

// Note [Saving from several processes]: whichever process dies, and whenever, the survivor stops
// within seconds and the newest committed step restores whole; the next Manager removes the
// uncommitted one.
TEST_F(CheckpointDistTest, AProcessKilledDuringSavesNeverLeavesATornCheckpoint) {
  std::mt19937 rng(7);
  for (int round = 0; round < 4; ++round) {
    const std::string dir = (dir_ / fmt::format("kill{}", round)).string();
    const auto start = Clock::now();
    std::vector<Child> children = Start(2, 1, "SavesUntilKilled", dir_.string(), {{"AXLE_TEST_CKPT_DIR", dir}});
    while (!fs::exists(dir + "/step_00000002") && Clock::now() - start < std::chrono::seconds(100))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
    const int victim = round % 2;
    const auto killed = Clock::now();
    ::kill(children[static_cast<size_t>(victim)].pid, SIGKILL);
    WaitAll(children, std::chrono::seconds(120), start);
    const Child& survivor = children[static_cast<size_t>(1 - victim)];
    const std::string log = ReadLog(survivor);
    EXPECT_TRUE(WIFEXITED(survivor.status) && WEXITSTATUS(survivor.status) == 3) << log;
    EXPECT_THAT(log, HasSubstr(fmt::format("process {} is lost", victim))) << log;
    EXPECT_LT(survivor.exit_s - std::chrono::duration<double>(killed - start).count(), 30.0) << log;
    flags::set_cpu_devices(2);
    Manager m(dir);  // removes what the killed save left
    ASSERT_TRUE(m.latest().has_value()) << "round " << round;
    const int64_t step = *m.latest();
    State t;
    t.tensors.emplace_back("w", from_literal(ir::Literal(ir::TensorType(DType::kF32, Shape{512, 1024}))));
    m.restore(step, t);
    EXPECT_EQ(t.extra["step"], step);
    const std::vector<float> v = t.tensors[0].second.to_vector<float>();
    EXPECT_EQ(v.front(), static_cast<float>(step));
    EXPECT_EQ(v.back(), static_cast<float>(step));
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_NE(e.path().filename().string().rfind(".step_", 0), 0u) << e.path();
    flags::set_cpu_devices(1);
  }
}

TEST_F(CheckpointDistTest, ASignalToOneProcessStopsAllAfterTheSameStep) {
  const std::string dir = (dir_ / "signal").string();
  const auto start = Clock::now();
  std::vector<Child> children = Start(2, 1, "TrainsUntilASignal", dir_.string(), {{"AXLE_TEST_CKPT_DIR", dir}});
  // Once process 1 has logged a step (its handler is in place), signal it.
  const std::string log1 = dir + ".rank1.jsonl";
  while ((!fs::exists(log1) || fs::file_size(log1) == 0) && Clock::now() - start < std::chrono::seconds(100))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(children[1].pid, SIGTERM);
  WaitAll(children, std::chrono::seconds(120), start);
  std::string stopped;
  for (size_t r = 0; r < children.size(); ++r) {
    const std::string log = ReadLog(children[r]);
    EXPECT_TRUE(WIFEXITED(children[r].status) && WEXITSTATUS(children[r].status) == 0) << log;
    EXPECT_THAT(log, HasSubstr("DistWorker done")) << log;
    const size_t at = log.find("stopped after step ");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string step = log.substr(at, log.find('\n', at) - at);
    if (r == 0) {
      stopped = step;
      EXPECT_THAT(log, HasSubstr("stopped by SIGTERM (sent to process 1)"));
    }
    EXPECT_EQ(step, stopped) << "process " << r;
  }
  Manager m(dir, {.read_only = true});
  ASSERT_TRUE(m.latest().has_value());
  EXPECT_EQ(fmt::format("stopped after step {}", *m.latest() - 1), stopped);
}

TEST_F(CheckpointDistTest, SavedByTwoProcessesRestoredAnywhere) {
  const std::string dir = (dir_ / "ckpt").string();
  RunAll(2, 2, "SavesItsOwnBlocks", {{"AXLE_TEST_CKPT_DIR", dir}});
  if (HasFailure()) return;
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(dir + "/step_00000005/checkpoint.json"));
  EXPECT_EQ(meta["processes"], 2);
  EXPECT_EQ(meta["tensors"]["matrix"]["shards"].size(), 4u);  // each device wrote its block
  // Note [Who writes a block]: the replicated vector goes to process 0 (a tie after the matrix),
  // the scalar every process holds to process 1 (then the lighter one), from its first device.
  EXPECT_EQ(meta["tensors"]["vector"]["shards"][0]["file"], "device_00000.safetensors");
  EXPECT_EQ(meta["tensors"]["scalar"]["shards"][0]["file"], "device_00002.safetensors");
  // One process, one device and four: the same values.
  for (int64_t devices : {1, 4}) {
    flags::set_cpu_devices(devices);
    Manager m(dir, {.read_only = true});
    State t;
    if (devices == 1) {
      t.tensors.emplace_back("matrix", from_literal(ir::Literal(Matrix().type())));
      t.tensors.emplace_back("vector", from_literal(ir::Literal(Vector().type())));
    } else {
      const spmd::Mesh cols({4}, {"tp"});
      t.tensors.emplace_back("matrix", Target(Matrix().type(), cols, {nullptr, "tp"}));
      t.tensors.emplace_back("vector", Target(Vector().type(), cols, {"tp"}));
    }
    t.tensors.emplace_back("scalar", from_literal(ir::Literal(Scalar().type())));
    m.restore(5, t);
    EXPECT_TRUE(t.tensors[0].second.to_literal() == Matrix()) << devices;
    EXPECT_TRUE(t.tensors[1].second.to_literal() == Vector()) << devices;
    EXPECT_TRUE(t.tensors[2].second.to_literal() == Scalar()) << devices;
  }
  flags::set_cpu_devices(1);
}

TEST_F(CheckpointDistTest, SavedByOneProcessRestoredByFourAndDamageFailsThemAll) {
  const std::string dir = (dir_ / "one").string();
  {
    flags::set_cpu_devices(4);
    const spmd::Mesh cols({4}, {"tp"});
    Manager m(dir, {.chunk_bytes = kChunk});
    State s;
    s.tensors.emplace_back("matrix", Place(Matrix(), cols, {nullptr, "tp"}));
    s.tensors.emplace_back("vector", Place(Vector(), cols, {}));
    s.tensors.emplace_back("scalar", from_literal(Scalar()));
    m.save(7, s);
    flags::set_cpu_devices(1);
  }
  RunAll(4, 1, "RestoresWhatOneProcessSaved", {{"AXLE_TEST_CKPT_DIR", dir}});
  if (HasFailure()) return;
  // Damage row 7 of the first column block: only process 3 (rows 6-7) reads that chunk.
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(dir + "/step_00000007/checkpoint.json"));
  const nlohmann::json* first = nullptr;
  for (const auto& s : meta["tensors"]["matrix"]["shards"])
    if (s["offset"] == nlohmann::json::array({0, 0})) first = &s;
  ASSERT_NE(first, nullptr);
  EXPECT_EQ((*first)["file"], "device_00000.safetensors");
  const int64_t at = (*first)["byte_range"][0].get<int64_t>() + 7 * 8 + 1;  // row 7 of an [8, 2] f32 block
  std::fstream f(dir + "/step_00000007/device_00000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.put('\x55');
  f.close();
  RunAll(4, 1, "RestoresWhatOneProcessSaved", {{"AXLE_TEST_CKPT_DIR", dir}, {"AXLE_TEST_CKPT_DAMAGED", "1"}});
}

}  // namespace
}  // namespace axle
