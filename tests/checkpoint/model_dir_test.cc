#include "checkpoint/model_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace axle::checkpoint {
namespace {

namespace fs = std::filesystem;
using ir::Literal;
using ir::TensorType;

std::string GoldenDir(const std::string& name) {
  return std::string(AXLE_SOURCE_DIR) + "/tests/checkpoint/goldens/" + name;
}

std::vector<std::string> Names(const TensorMap& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, lit] : tensors) names.push_back(name);
  return names;
}

// The error message of `call`, or a test failure when it does not throw axle::Error.
template <typename F>
std::string ErrorOf(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no axle::Error";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// The tensors and config the golden model directories hold (scripts/make_safetensors_goldens.py).
void ExpectGoldenModel(const ModelDir& model) {
  EXPECT_EQ(model.config["model_type"], "tiny");
  EXPECT_EQ(model.config["num_layers"], 2);
  std::map<std::string, Literal> t;
  for (const auto& [name, lit] : model.tensors) t.emplace(name, lit);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.at("model.embed.weight"),
            Literal::FromVector<float>(DType::kF32, Shape{2, 3}, {0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(t.at("model.layers.0.weight"),
            Literal::FromVector<float>(DType::kF32, Shape{3}, {0, 0, 0}));
  EXPECT_EQ(t.at("model.layers.1.bias"),
            Literal::FromVector<uint16_t>(DType::kBF16, Shape{1}, {0x3F80}));
  EXPECT_EQ(t.at("lm_head.weight"),
            Literal::FromVector<int64_t>(DType::kI64, Shape{4}, {0, 1, 2, 3}));
}

const std::vector<std::pair<std::string, TensorType>> kGoldenTypes = {
    {"model.embed.weight", TensorType(DType::kF32, Shape{2, 3})},
    {"model.layers.0.weight", TensorType(DType::kF32, Shape{3})},
    {"model.layers.1.bias", TensorType(DType::kBF16, Shape{1})},
    {"lm_head.weight", TensorType(DType::kI64, Shape{4})},
};

TEST(ModelDirTest, LoadsASingleFileDirectory) {
  const ModelDir model = LoadModelDir(GoldenDir("model_single"));
  ExpectGoldenModel(model);
  CheckTensors(model.tensors, kGoldenTypes, "model_single");
}

TEST(ModelDirTest, LoadsATwoShardDirectoryInShardOrder) {
  const ModelDir model = LoadModelDir(GoldenDir("model_sharded"));
  ExpectGoldenModel(model);
  // Shard 1 holds lm_head.weight and model.embed.weight, shard 2 the layers (each in data order).
  EXPECT_EQ(Names(model.tensors),
            (std::vector<std::string>{"lm_head.weight", "model.embed.weight",
                                      "model.layers.0.weight", "model.layers.1.bias"}));
  CheckTensors(model.tensors, kGoldenTypes, "model_sharded");
}

TEST(ModelDirTest, LoadsAPlainFileWithAnEmptyConfig) {
  const ModelDir model = LoadModelDir(GoldenDir("model_single/model.safetensors"));
  EXPECT_TRUE(model.config.is_object());
  EXPECT_TRUE(model.config.empty());
  EXPECT_EQ(model.tensors.size(), 4u);
}

// A scratch copy of the sharded golden directory, to break in different ways.
class ModelDirErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("axle_model_dir_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(GoldenDir("model_sharded"), dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, std::string_view text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // Rewrites the index with this weight_map body.
  void WriteIndex(std::string_view weight_map) {
    Write("model.safetensors.index.json",
          "{\"metadata\": {\"total_size\": 70}, \"weight_map\": " + std::string(weight_map) + "}");
  }
  std::string Load() {
    return ErrorOf([&] { LoadModelDir(dir_.string()); });
  }

  fs::path dir_;
  static constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
  static constexpr const char* kShard2 = "model-00002-of-00002.safetensors";
};

TEST_F(ModelDirErrorTest, NoWeights) {
  fs::remove(dir_ / "model.safetensors.index.json");
  EXPECT_CONTAINS(Load(), "no model weights");
  Write("pytorch_model.bin", "x");
  EXPECT_CONTAINS(Load(), "PyTorch .bin weights");
  EXPECT_CONTAINS(ErrorOf([&] { LoadModelDir((dir_ / "nothing").string()); }), "does not exist");
}

TEST_F(ModelDirErrorTest, BadConfigAndIndex) {
  Write("config.json", "{\"hidden_size\": ");
  EXPECT_CONTAINS(Load(), "config.json: invalid config.json");
  Write("config.json", "[1]");
  EXPECT_CONTAINS(Load(), "expected a JSON object, not array");
  fs::remove(dir_ / "config.json");
  Write("model.safetensors.index.json", "{\"weights\": {}}");
  EXPECT_CONTAINS(Load(), "expected a \"weight_map\" object");
  WriteIndex("{\"a\": 3}");
  EXPECT_CONTAINS(Load(), "the shard of tensor 'a' must be a file name, not 3");
  WriteIndex("{\"a\": \"../model-00001-of-00002.safetensors\"}");
  EXPECT_CONTAINS(Load(), "is not a file inside the model directory");
  WriteIndex("{\"a\": \"/etc/passwd\"}");
  EXPECT_CONTAINS(Load(), "is not a file inside the model directory");
}

TEST_F(ModelDirErrorTest, IndexAndShardsDisagree) {
  // The index lists a tensor its shard lacks.
  WriteIndex(R"({"lm_head.weight": "model-00001-of-00002.safetensors",
                 "model.embed.weight": "model-00001-of-00002.safetensors",
                 "model.layers.0.weight": "model-00002-of-00002.safetensors",
                 "model.layers.1.bias": "model-00002-of-00002.safetensors",
                 "model.norm.weight": "model-00002-of-00002.safetensors"})");
  std::string error = Load();
  EXPECT_CONTAINS(error, kShard2);
  EXPECT_CONTAINS(error, "tensor 'model.norm.weight' is missing");
  // A shard holds a tensor the index does not list.
  WriteIndex(R"({"lm_head.weight": "model-00001-of-00002.safetensors",
                 "model.layers.0.weight": "model-00002-of-00002.safetensors",
                 "model.layers.1.bias": "model-00002-of-00002.safetensors"})");
  error = Load();
  EXPECT_CONTAINS(error, kShard1);
  EXPECT_CONTAINS(error, "tensor 'model.embed.weight' is not listed for this shard");
  // The index names a shard that does not exist.
  WriteIndex(R"({"lm_head.weight": "model-00003-of-00002.safetensors"})");
  EXPECT_CONTAINS(Load(), "cannot open safetensors file");
  // A broken shard: the error names the shard.
  WriteIndex(R"({"lm_head.weight": "config.json"})");
  EXPECT_CONTAINS(Load(), "config.json: not a safetensors file");
}

TEST(CheckTensorsTest, ListsEveryProblem) {
  TensorMap tensors = {
      {"model.embed.weight", Literal(TensorType(DType::kF32, Shape{2, 3}))},
      {"model.layers.0.weight", Literal(TensorType(DType::kF32, Shape{4}))},   // wrong shape
      {"model.layers.1.bias", Literal(TensorType(DType::kF32, Shape{1}))},     // wrong dtype
      {"extra.weight", Literal(TensorType(DType::kU8, Shape{2}))},             // unexpected
      {"model.embed.weight", Literal(TensorType(DType::kF32, Shape{2, 3}))}};  // duplicate
  const std::string error =
      ErrorOf([&] { CheckTensors(tensors, kGoldenTypes, "ckpt/model.safetensors"); });
  EXPECT_CONTAINS(error,
                  "ckpt/model.safetensors: the checkpoint's tensors do not match the model "
                  "(4 expected, 5 found): 5 problems");
  EXPECT_CONTAINS(error, "\n  duplicate tensor 'model.embed.weight'");
  EXPECT_CONTAINS(error, "\n  tensor 'model.layers.0.weight' is f32[4], expected f32[3]");
  EXPECT_CONTAINS(error, "\n  tensor 'model.layers.1.bias' is f32[1], expected bf16[1]");
  EXPECT_CONTAINS(error, "\n  missing tensor 'lm_head.weight' (expected i64[4])");
  EXPECT_CONTAINS(error, "\n  unexpected tensor 'extra.weight' (u8[2])");
  EXPECT_EQ(error.find("more"), std::string::npos);
}

TEST(CheckTensorsTest, CapsTheListAndSpotsRenamedCheckpoints) {
  std::vector<std::pair<std::string, TensorType>> expected;
  TensorMap tensors;
  for (int i = 0; i < 15; ++i) {
    expected.emplace_back(fmt::format("layers.{}.w", i), TensorType(DType::kF32, Shape{2}));
    tensors.emplace_back(fmt::format("model.layers.{}.w", i),
                         Literal(TensorType(DType::kF32, Shape{2})));
  }
  const std::string error = ErrorOf([&] { CheckTensors(tensors, expected, "dir"); });
  EXPECT_CONTAINS(error, "30 problems (no name matches");
  EXPECT_CONTAINS(error, "\n  ... and 10 more");
  EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 21);
  CheckTensors({}, {}, "empty");  // nothing expected, nothing found: fine
}

}  // namespace
}  // namespace axle::checkpoint
