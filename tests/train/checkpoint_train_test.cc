// `axle train --checkpoint-dir`: a run stopped and resumed trains exactly as one that never
// stopped; resuming on another mesh; saved weights that know their model (docs/checkpoint.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "axle/checkpoint.h"
#include "axle/nn.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/flags.h"
#include "train/export.h"
#include "train/trainer.h"

namespace axle::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) /
            ("axle_ckpt_train_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    flags::set_cpu_devices(1);
  }
  // The tiny job, 20 steps of a cosine schedule with warmup, and dropout (so the generator's
  // state matters too).
  TrainOptions Tiny(int64_t devices = 1, std::string mesh = "") {
    TrainOptions o;
    o.steps = 20;
    o.batch = 4;
    o.seq = 32;
    o.warmup = 4;
    o.dropout = 0.1;
    o.samples = 0;
    o.progress = false;
    o.log_every = 100;
    o.backend = "cpu";  // no native compiles: the test stays short
    o.devices = devices;
    o.mesh = std::move(mesh);
    return o;
  }
  std::string dir_;
};

std::vector<double> Losses(const TrainResult& r) {
  std::vector<double> out;
  for (const auto& s : r.steps) out.push_back(s.loss);
  return out;
}

TEST_F(CheckpointTrainTest, StopAndResumeGivesTheLossesOfOneRunBitForBit) {
  std::ostringstream log;
  const TrainResult straight = Train(Tiny(), log);
  ASSERT_EQ(straight.steps.size(), 20u);

  TrainOptions first = Tiny();
  first.checkpoint_dir = dir_ + "/ckpt";
  first.checkpoint_every = 4;
  first.keep = 2;
  first.stop_at = 10;
  const TrainResult a = Train(first, log);
  EXPECT_EQ(a.last_checkpoint, 10);
  EXPECT_EQ(checkpoint::Manager(first.checkpoint_dir).all_steps(), (std::vector<int64_t>{8, 10}));  // --keep 2

  TrainOptions second = Tiny();
  second.checkpoint_dir = first.checkpoint_dir;
  second.checkpoint_every = 4;
  second.resume = true;
  second.log_json = dir_ + "/resumed.jsonl";
  std::ostringstream out;
  const TrainResult b = Train(second, out);
  EXPECT_THAT(out.str(), HasSubstr("resumed from"));
  EXPECT_EQ(b.first_step, 10);
  ASSERT_EQ(a.steps.size(), 10u);
  ASSERT_EQ(b.steps.size(), 10u);
  std::vector<double> joined = Losses(a);
  for (double l : Losses(b)) joined.push_back(l);
  EXPECT_EQ(joined, Losses(straight));  // bitwise: ==, not near
  // The log rows carry global step numbers.
  std::ifstream in(second.log_json);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(nlohmann::json::parse(line)["step"], 10);
  EXPECT_EQ(b.last_checkpoint, 20);
  // The checkpoint's training state: step, schedule and data positions, the flags.
  const nlohmann::json extra = checkpoint::Manager(first.checkpoint_dir).read_extra(20);
  EXPECT_EQ(extra["step"], 20);
  EXPECT_EQ(extra["data"]["tokens_consumed"], 20 * 4 * 32);
  EXPECT_EQ(extra["flags"]["dropout"], 0.1);
  EXPECT_EQ(extra["optimizer"]["param_steps"][0][0], 20);
}

// --precision bf16: bf16 parameters and AdamW moments; stopped and resumed it trains bit for bit
// as one run, its weights are saved as BF16, and its losses follow fp32's (the last within 3%).
TEST_F(CheckpointTrainTest, Bf16WeightsResumeBitwiseAndSaveAsBf16) {
  std::ostringstream log;
  TrainOptions o = Tiny();
  const TrainResult f32 = Train(o, log);
  o.precision = "bf16";
  const TrainResult straight = Train(o, log);
  ASSERT_EQ(straight.steps.size(), f32.steps.size());
  EXPECT_NEAR(straight.steps.back().loss, f32.steps.back().loss, 0.03 * f32.steps.back().loss);
  EXPECT_LT(straight.steps.back().loss, straight.steps.front().loss - 0.5);

  TrainOptions first = o;
  first.checkpoint_dir = dir_ + "/ckpt";
  first.stop_at = 10;
  const TrainResult a = Train(first, log);
  TrainOptions second = o;
  second.checkpoint_dir = first.checkpoint_dir;
  second.resume = true;
  second.save = dir_ + "/m.safetensors";
  const TrainResult b = Train(second, log);
  std::vector<double> joined = Losses(a);
  for (double l : Losses(b)) joined.push_back(l);
  EXPECT_EQ(joined, Losses(straight));  // bitwise
  for (const auto& [name, t] : checkpoint::LoadSafetensors(second.save))
    EXPECT_EQ(t.dtype(), DType::kBF16) << name;
  // Resuming it in fp32 is a clear error that names the flag to pass.
  second.precision = "fp32";
  second.save.clear();
  try {
    Train(second, log);
    FAIL() << "resumed bf16 state into f32 parameters";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("was saved by a --precision bf16 run (bf16 parameters and AdamW moments), this "
                                    "run has --precision fp32: pass --precision bf16"));
  }
}

// Saved on fsdp=8, resumed on dp=2 x tp=2, on one device and on fsdp=2: the restore is exact
// (ManagerTest.RestoresOntoEveryOtherMeshBitForBit), and the losses after it follow the
// uninterrupted single-device run within 1e-5 (sharded steps sum in another order).
TEST_F(CheckpointTrainTest, ResumesOnAnotherMesh) {
  auto tiny = [&](int64_t devices, const std::string& mesh) {
    TrainOptions o = Tiny(devices, mesh);
    o.batch = 8;  // divides over fsdp=8
    return o;
  };
  std::ostringstream log;
  const TrainResult straight = Train(tiny(1, ""), log);
  TrainOptions first = tiny(8, "fsdp=8");
  first.checkpoint_dir = dir_ + "/ckpt";
  first.stop_at = 10;
  Train(first, log);
  for (const auto& [devices, mesh] : std::vector<std::pair<int64_t, std::string>>{{4, "dp=2,tp=2"}, {1, ""}, {2, "fsdp=2"}}) {
    TrainOptions second = tiny(devices, mesh);
    second.checkpoint_dir = first.checkpoint_dir;
    second.resume = true;
    second.stop_at = 12;
    const TrainResult b = Train(second, log);
    ASSERT_EQ(b.steps.size(), 2u) << mesh;
    for (size_t i = 0; i < b.steps.size(); ++i) {
      const double want = straight.steps[10 + i].loss;
      EXPECT_NEAR(b.steps[i].loss, want, 1e-5 * std::abs(want)) << mesh << " step " << 10 + i;
    }
    // Remove what this resume saved, so the next resumes from step 10 again.
    fs::remove_all(checkpoint::Manager(first.checkpoint_dir).StepDir(12));
  }
}

TEST_F(CheckpointTrainTest, FlagErrorsAndAnotherModelsCheckpoint) {
  TrainOptions o = Tiny();
  o.resume = true;
  try {
    Train(o, std::cout);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--resume needs --checkpoint-dir"));
  }
  std::ostringstream log;
  o.resume = false;
  o.checkpoint_dir = dir_ + "/ckpt";
  o.steps = 2;
  Train(o, log);
  // Starting over in a directory that holds a run is refused, not silently mixed.
  try {
    Train(o, log);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("pass --resume"));
  }
  o.resume = true;
  o.config = "small";
  try {
    Train(o, log);
    FAIL() << "resumed a tiny model's checkpoint into the small model";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("vocab_size"));
    EXPECT_THAT(e.what(), HasSubstr("--config"));
  }
}

// Note [Saved files know their model]: --save then --init rebuilds the same model (n_head 4,
// where the old guess n_embd / 64 gave 1); a bare file without a config is an error naming n_head.
TEST_F(CheckpointTrainTest, SavedWeightsKnowTheirModel) {
  TrainOptions o = Tiny();
  o.steps = 2;
  o.save = dir_ + "/m.safetensors";
  std::ostringstream log;
  Train(o, log);
  EXPECT_TRUE(fs::exists(dir_ + "/config.json"));
  checkpoint::SafetensorsMetadata meta;
  checkpoint::TensorMap weights = checkpoint::LoadSafetensors(o.save, &meta);
  EXPECT_THAT(meta["config"], HasSubstr("\"n_head\":4"));
  TrainOptions again = Tiny();
  again.steps = 1;
  again.init = o.save;
  std::ostringstream out;
  Train(again, out);
  EXPECT_THAT(out.str(), HasSubstr("n_head=4"));
  checkpoint::SaveSafetensors(dir_ + "/bare.safetensors", weights, {{"format", "pt"}});
  again.init = dir_ + "/bare.safetensors";
  try {
    Train(again, out);
    FAIL() << "loaded a bare file by guessing its head count";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bare.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("n_head"));
  }
}

// axle export: the checkpoint's model as a Hugging Face directory, whole or sharded with an
// index, that LoadGPT2 (and so --init) reads back as the same model, bit for bit.
TEST_F(CheckpointTrainTest, ExportsAHuggingFaceDirectory) {
  TrainOptions o = Tiny();
  o.steps = 3;
  o.checkpoint_dir = dir_ + "/ckpt";
  std::ostringstream log;
  Train(o, log);
  nn::GPT2 want(nn::GPT2Config::Preset("tiny"), 0, /*init=*/false);
  checkpoint::State state;
  for (const auto& [name, p] : want.named_parameters()) state.tensors.emplace_back("model." + name, p);
  checkpoint::Manager(o.checkpoint_dir, {.read_only = true}).restore(3, state);
  for (const int64_t max_shard : {int64_t{1} << 30, int64_t{100000}}) {
    ExportOptions e;
    e.checkpoint_dir = o.checkpoint_dir;
    e.out_dir = dir_ + "/hf_" + std::to_string(max_shard);
    e.max_shard_bytes = max_shard;
    std::ostringstream out;
    ExportHuggingFace(e, out);
    EXPECT_THAT(out.str(), HasSubstr("exported step 3"));
    EXPECT_TRUE(fs::exists(e.out_dir + "/config.json"));
    EXPECT_EQ(fs::exists(e.out_dir + "/model.safetensors.index.json"), max_shard == 100000) << out.str();
    std::shared_ptr<nn::GPT2> got = nn::LoadGPT2(e.out_dir);
    EXPECT_EQ(got->config().n_head, 4);
    const auto a = want.state_dict(), b = got->state_dict();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(a[i].second.to_literal() == b[i].second.to_literal()) << a[i].first;
  }
  ExportOptions none;
  none.checkpoint_dir = dir_ + "/nothing";
  fs::create_directories(none.checkpoint_dir);
  none.out_dir = dir_ + "/hf_none";
  try {
    ExportHuggingFace(none, log);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no committed checkpoint"));
  }
}

}  // namespace
}  // namespace axle::train
