// `axle launch` and `axle train` in runs of several processes (docs/spmd.md, "Several processes"):
// the same losses as one process with all the devices, bit for bit; a failing rank ends the run
// with its code and leaves no process behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_axle.h"

namespace axle {
namespace {

using ::testing::HasSubstr;
using testing::RunAxle;
using testing::RunResult;

class LaunchCliTest : public testing::TempDirTest {
 protected:
  LaunchCliTest() : TempDirTest("axle_launch_cli") {}

  std::vector<double> Losses(const std::string& file) {
    std::ifstream in(file);
    std::vector<double> out;
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
    return out;
  }
};

const char* kTrain = "train --config tiny --steps 3 --batch 8 --seq 16 --no-progress --samples 0 --backend cpu";

// The acceptance run, scaled down: processes x devices each = the devices of one process.
TEST_F(LaunchCliTest, SeveralProcessesTrainAsOneProcessWithAllTheDevices) {
  struct Layout {
    int processes, devices;
    const char* mesh;
  };
  for (const Layout& l : {Layout{2, 2, "fsdp=2,tp=2"}, Layout{4, 1, "fsdp=2,tp=2"}, Layout{2, 1, "dp=2"}}) {
    const int total = l.processes * l.devices;
    const std::string one = Path(fmt::format("one-{}-{}.jsonl", l.processes, l.devices));
    RunResult r = RunAxle(fmt::format("{} --devices {} --mesh {} --log-json {}", kTrain, total, l.mesh, one));
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string many = Path(fmt::format("many-{}-{}.jsonl", l.processes, l.devices));
    r = RunAxle(fmt::format("launch --nproc {} -- {} {} --devices {} --mesh {} --log-json {}", l.processes,
                            AXLE_BINARY, kTrain, l.devices, l.mesh, many));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(fmt::format("processes: process 0 of {} ({} device", l.processes, l.devices)));
    const std::vector<double> want = Losses(one);
    ASSERT_EQ(want.size(), 3u);
    EXPECT_EQ(Losses(many), want) << l.processes << " x " << l.devices;  // the same reduction order: bitwise
    // Every rank logs beside rank 0's file, the same losses.
    for (int rank = 1; rank < l.processes; ++rank)
      EXPECT_EQ(Losses(Path(fmt::format("many-{}-{}.rank{}.jsonl", l.processes, l.devices, rank))), want) << rank;
    // Only rank 0 talks.
    EXPECT_EQ(r.output.find("step 1 |"), r.output.rfind("step 1 |")) << r.output;
  }
}

// --mesh auto across processes: the cost model is measured across them over Gloo (every process
// taking part), every process adopts process 0's plan, and the losses of 10 steps are the
// one-device run's within 1e-5, the same on every rank.
TEST_F(LaunchCliTest, AutoShardingAcrossProcessesGivesTheOneDeviceLosses) {
  const std::string one = Path("auto-one.jsonl");
  const std::string train = "train --config tiny --steps 10 --batch 8 --seq 16 --no-progress --samples 0 --backend cpu";
  RunResult r = RunAxle(fmt::format("{} --log-json {}", train, one));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string many = Path("auto-many.jsonl");
  r = RunAxle(fmt::format("launch --nproc 2 -- {} {} --devices 2 --mesh auto --auto-time-limit 2 --log-json {}",
                          AXLE_BINARY, train, many));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mesh auto [x=4]"));
  EXPECT_THAT(r.output, HasSubstr("auto-sharding: "));
  const std::vector<double> want = Losses(one), got = Losses(many);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << "step " << i;
  EXPECT_EQ(Losses(Path("auto-many.rank1.jsonl")), got);
}

// A rank that fails ends the run: the launcher returns its code and the others stop.
// Checkpoints of a run of several processes (docs/checkpoint.md, "Several processes"): stopped
// and resumed on the same processes, the losses are those of the run that never stopped, bit for
// bit; the same checkpoint resumes in one process, and one process's in four.
TEST_F(LaunchCliTest, CheckpointsOfSeveralProcessesResume) {
  const char* train = "train --config tiny --batch 8 --seq 16 --no-progress --samples 0 --backend cpu --steps";
  const std::string straight = Path("straight.jsonl");
  RunResult r = RunAxle(fmt::format("{} 6 --devices 4 --mesh fsdp=2,tp=2 --log-json {}", train, straight));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<double> want = Losses(straight);
  ASSERT_EQ(want.size(), 6u);
  const std::string dir = Path("ckpt"), first = Path("first.jsonl"), second = Path("second.jsonl");
  r = RunAxle(fmt::format("launch --nproc 2 -- {} {} 6 --devices 2 --mesh fsdp=2,tp=2 --stop-at 3 --checkpoint-dir {} "
                          "--checkpoint-every 2 --log-json {}",
                          AXLE_BINARY, train, dir, first));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("checkpoint: step 3 committed"));
  std::filesystem::copy(dir, Path("ckpt-copy"), std::filesystem::copy_options::recursive);
  r = RunAxle(fmt::format("launch --nproc 2 -- {} {} 6 --devices 2 --mesh fsdp=2,tp=2 --checkpoint-dir {} --resume "
                          "--log-json {}",
                          AXLE_BINARY, train, dir, second));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(step 3)"));
  std::vector<double> got = Losses(first);
  for (double l : Losses(second)) got.push_back(l);
  EXPECT_EQ(got, want);
  // The same checkpoint in one process with one device: the same model, another reduction order.
  const std::string alone = Path("alone.jsonl");
  r = RunAxle(fmt::format("{} 6 --devices 1 --checkpoint-dir {} --resume --log-json {}", train, Path("ckpt-copy"), alone));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<double> rest = Losses(alone);
  ASSERT_EQ(rest.size(), 3u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_NEAR(rest[i], want[3 + i], 1e-5) << i;
  // One process's checkpoint (step 6 of the run above) in four processes of one device each.
  r = RunAxle(fmt::format("launch --nproc 4 -- {} {} 7 --devices 1 --mesh fsdp=4 --checkpoint-dir {} --resume",
                          AXLE_BINARY, train, Path("ckpt-copy")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(step 6)"));
  EXPECT_THAT(r.output, HasSubstr("checkpoint: step 7 committed"));
}

TEST_F(LaunchCliTest, AFailingRankEndsTheRunWithItsCode) {
  const auto start = std::chrono::steady_clock::now();
  RunResult r = RunAxle(fmt::format("launch --nproc 2 --grace 2 -- sh -c 'if [ $RANK = 1 ]; then exit 7; fi; sleep 60'"));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 7) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 1"));
  EXPECT_THAT(r.output, HasSubstr("exited with code 7"));
  EXPECT_THAT(r.output, HasSubstr("sending SIGTERM"));
  EXPECT_LT(took, 30);
}

// Ranks started with different flags stop before training, naming the flag.
TEST_F(LaunchCliTest, RanksWithDifferentFlagsAreAClearError) {
  RunResult r = RunAxle(fmt::format("launch --nproc 2 -- sh -c 'exec {} {} --devices 1 --lr $((RANK + 1))e-3'",
                                    AXLE_BINARY, kTrain));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("was started with other flags"));
  EXPECT_THAT(r.output, HasSubstr("--lr 0.002 there, 0.001 here"));
}

// Each rank's log carries its step times and collective counters; rank 0's names the slowest.
TEST_F(LaunchCliTest, TheLogNamesTheSlowestRank) {
  const std::string log = Path("log.jsonl");
  RunResult r = RunAxle(fmt::format("launch --nproc 2 -- {} {} --devices 1 --log-json {}", AXLE_BINARY, kTrain, log));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("| slowest rank "));
  std::ifstream in(log);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["rank_step_s"].size(), 2u);
  EXPECT_TRUE(j["slowest_rank"] == 0 || j["slowest_rank"] == 1);
  EXPECT_GT(j["all_reduce_bytes"].get<int64_t>(), 0);
  EXPECT_GT(j["collective_s_per_device"].get<double>(), 0);
}

TEST_F(LaunchCliTest, BadMeshesAndMissingCommandsAreClearErrors) {
  RunResult r = RunAxle(fmt::format("launch --nproc 2 -- {} {} --devices 1 --mesh fsdp=4", AXLE_BINARY, kTrain));
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("--mesh fsdp=4 has 4 devices but the run has 2"));
  r = RunAxle("launch --nproc 2");
  EXPECT_NE(r.status, 0);
  r = RunAxle(fmt::format("launch --nproc 2 -- {} {} --devices 1 --save {}", AXLE_BINARY, kTrain,
                          Path("m.safetensors")));
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("save with --checkpoint-dir DIR"));
  EXPECT_THAT(r.output, HasSubstr("axle export"));
}

}  // namespace
}  // namespace axle
