// State dicts through safetensors files.
#include <fstream>

#include "checkpoint/safetensors.h"
#include "nn_test_util.h"

namespace axle::nn {
namespace {

using testing::ErrorOf;
using testing::Vec;

TEST(Serialization, RoundTrip) {
  GPT2 model(GPT2Config::Preset("tiny"), 5);
  const auto dir = testing::TempDir("roundtrip");
  const std::string path = (dir / "model.safetensors").string();
  save_safetensors(model.state_dict(), path);

  checkpoint::SafetensorsMetadata meta;
  checkpoint::LoadSafetensors(path, &meta);
  EXPECT_EQ(meta["format"], "pt");

  StateDict loaded = load_safetensors(path);
  const StateDict orig = model.state_dict();
  ASSERT_EQ(loaded.size(), orig.size());
  std::map<std::string, Tensor> by_name(loaded.begin(), loaded.end());
  for (const auto& [name, t] : orig) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_EQ(by_name[name].type_string(), t.type_string()) << name;
    EXPECT_EQ(Vec(by_name[name]), Vec(t)) << name;
  }

  // Into a model with other weights: they become equal.
  GPT2 other(GPT2Config::Preset("tiny"), 6);
  EXPECT_NE(Vec(other.wte->weight), Vec(model.wte->weight));
  other.load_state_dict(loaded);
  sync();
  for (size_t i = 0; i < orig.size(); ++i) {
    EXPECT_EQ(Vec(other.state_dict()[i].second), Vec(orig[i].second)) << orig[i].first;
  }
}

TEST(Serialization, NonF32AndIntegerTensors) {
  StateDict s = {{"half", ones({3}, DType::kBF16)},
                 {"step", full({}, 7, DType::kI64)},
                 {"flag", ones({2}, DType::kBool)}};
  const auto dir = testing::TempDir("dtypes");
  const std::string path = (dir / "s.safetensors").string();
  save_safetensors(s, path);
  StateDict back = load_safetensors(path);
  std::map<std::string, Tensor> m(back.begin(), back.end());
  EXPECT_EQ(m["half"].type_string(), "bf16[3]");
  EXPECT_EQ(m["step"].item(), 7);
  EXPECT_EQ(m["flag"].type_string(), "bool[2]");
}

TEST(Serialization, TruncatedFile) {
  Linear lin(8, 8, true, 1);
  const auto dir = testing::TempDir("truncated");
  const std::string path = (dir / "lin.safetensors").string();
  save_safetensors(lin.state_dict(), path);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 10);
  std::string msg = ErrorOf([&] { load_safetensors(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  std::filesystem::resize_file(path, 5);
  msg = ErrorOf([&] { load_safetensors(path); });
  EXPECT_NE(msg.find("shorter than the 8-byte header"), std::string::npos) << msg;
  msg = ErrorOf([&] { load_safetensors((dir / "absent.safetensors").string()); });
  EXPECT_NE(msg.find("absent.safetensors"), std::string::npos) << msg;
}

TEST(Serialization, WrongDTypeAndShapeIntoModel) {
  Linear lin(4, 2, true, 1);
  const auto dir = testing::TempDir("wrong");
  const std::string path = (dir / "w.safetensors").string();
  checkpoint::TensorMap t;
  t.emplace_back("weight", ir::Literal::FromDoubles(DType::kF16, Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  t.emplace_back("bias", ir::Literal::FromDoubles(DType::kF32, Shape{2}, {0.5, -0.5}));
  checkpoint::SaveSafetensors(path, t);
  std::string msg = ErrorOf([&] { lin.load_state_dict(load_safetensors(path)); });
  EXPECT_NE(msg.find("'weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f16[2,4]"), std::string::npos) << msg;
  lin.load_state_dict(load_safetensors(path), true, /*convert_dtype=*/true);
  sync();
  EXPECT_EQ(Vec(lin.weight), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(Vec(lin.bias), (std::vector<float>{0.5, -0.5}));

  t.pop_back();
  t.emplace_back("bias", ir::Literal::FromDoubles(DType::kF32, Shape{3}, {1, 2, 3}));
  checkpoint::SaveSafetensors(path, t);
  msg = ErrorOf([&] { lin.load_state_dict(load_safetensors(path), true, true); });
  EXPECT_NE(msg.find("size mismatch for 'bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace axle::nn
