// The Llama family against Hugging Face transformers: logits and five AdamW steps of small random
// Llama (GQA, untied head, llama3 rope scaling, sharded weights), Mistral (a sliding window) and
// Qwen2 (MQA, q/k/v biases, tied embeddings, linear rope scaling) models, the goldens
// scripts/make_llama_goldens.py wrote with LlamaForCausalLM / MistralForCausalLM /
// Qwen2ForCausalLM; configs, saving, and the errors of bad configs and files.
#include <gmock/gmock.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "axle/optim.h"
#include "checkpoint/model_dir.h"
#include "checkpoint/safetensors.h"
#include "nn_test_util.h"

namespace axle::nn {
namespace {

using ::testing::HasSubstr;
using testing::ErrorOf;
using testing::Vec;

std::string Golden(const std::string& name) {
  return std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_" + name;
}

nlohmann::json Expected(const std::string& name) {
  std::ifstream in(Golden(name) + "/expected.json");
  return nlohmann::json::parse(in);
}

Tensor Tokens(const nlohmann::json& rows) {
  std::vector<int64_t> v;
  for (const auto& row : rows)
    for (const auto& t : row) v.push_back(t.get<int64_t>());
  return from_vector<int64_t>(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())},
                              DType::kI64);
}

// max |a - b| over max(1, max |b|): the logits' error relative to their scale.
double MaxRelError(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

class LlamaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaGolden, LoadsWithHuggingFacesNamesAndConfig) {
  std::shared_ptr<CausalLM> lm = LoadCausalLM(Golden(GetParam()));
  auto* llama = dynamic_cast<Llama*>(lm.get());
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->model_type(), GetParam());
  // The state dict is exactly the files' tensors (a tied head has none of its own).
  const checkpoint::ModelDir dir = checkpoint::LoadModelDir(Golden(GetParam()));
  std::set<std::string> files, ours;
  for (const auto& [name, lit] : dir.tensors) files.insert(name);
  for (const auto& [name, t] : llama->state_dict()) ours.insert(name);
  EXPECT_EQ(ours, files);
  const LlamaConfig& c = llama->config();
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  if (GetParam() == "llama") {
    EXPECT_EQ(c.num_key_value_heads, 2);
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_NE(llama->lm_head, nullptr);
  } else if (GetParam() == "mistral") {
    EXPECT_EQ(c.sliding_window, 6);
  } else {
    EXPECT_EQ(c.num_key_value_heads, 1);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(llama->lm_head, nullptr);
    EXPECT_EQ(c.rope_scaling.type, "linear");
  }
}

TEST_P(LlamaGolden, LogitsMatchTransformers) {
  const nlohmann::json e = Expected(GetParam());
  std::shared_ptr<CausalLM> lm = LoadCausalLM(Golden(GetParam()));
  lm->eval();
  const Tensor logits = lm->forward(Tokens(e["idx"]));
  sync();
  EXPECT_EQ(logits.sizes(), (Dims{2, 12, 96}));
  const std::vector<double> want = e["logits"].get<std::vector<double>>();
  EXPECT_LE(MaxRelError(Vec(logits), want), 1e-4);
}

TEST_P(LlamaGolden, FiveAdamWStepsMatchTransformers) {
  const nlohmann::json e = Expected(GetParam());
  std::shared_ptr<CausalLM> lm = LoadCausalLM(Golden(GetParam()));
  std::vector<Tensor> decay, no_decay, all;
  for (const auto& [name, p] : lm->named_parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    all.push_back(p);
  }
  optim::AdamW opt({{decay, 0.1}, {no_decay, 0.0}}, 1e-3, {0.9, 0.999}, 1e-8, 0.1);
  const Tensor idx = Tokens(e["idx"]), targets = Tokens(e["targets"]);
  const std::vector<double> want = e["losses"].get<std::vector<double>>();
  for (size_t step = 0; step < want.size(); ++step) {
    lm->zero_grad();
    Tensor loss = lm->forward(idx, targets);
    loss.backward();
    optim::clip_grad_norm_(all, 1.0);
    opt.step();
    sync();
    EXPECT_NEAR(loss.item(), want[step], 1e-4 * want[step]) << "step " << step;
  }
}

// Targets of -100 (the prompt of an instruction pair) leave the mean: the loss is transformers'
// with those positions masked, and the logits there get exactly zero gradient.
TEST_P(LlamaGolden, MaskedTargetsCarryNoGradient) {
  const nlohmann::json e = Expected(GetParam());
  std::shared_ptr<CausalLM> lm = LoadCausalLM(Golden(GetParam()));
  std::vector<int64_t> masked;
  for (const auto& row : e["targets"])
    for (size_t t = 0; t < row.size(); ++t) masked.push_back(t < 5 ? -100 : row[t].get<int64_t>());
  const Tensor idx = Tokens(e["idx"]), targets = from_vector<int64_t>(masked, {2, 12}, DType::kI64);
  Tensor loss = lm->forward(idx, targets);
  sync();
  EXPECT_NEAR(loss.item(), e["masked_loss"].get<double>(), 1e-4 * e["masked_loss"].get<double>());

  Tensor logits = lm->forward(idx).detach().requires_grad_();
  cross_entropy(logits.reshape({24, 96}), targets.reshape({24})).backward();
  sync();
  const std::vector<float> g = Vec(logits.grad());
  for (int64_t row = 0; row < 24; ++row) {
    double norm = 0;
    for (int64_t v = 0; v < 96; ++v) norm += std::abs(g[static_cast<size_t>(row * 96 + v)]);
    if (row % 12 < 5)
      EXPECT_EQ(norm, 0.0) << "masked position " << row;
    else
      EXPECT_GT(norm, 0.0) << "position " << row;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaGolden, ::testing::Values("llama", "mistral", "qwen2"));

TEST(Llama, SavedDirectoriesLoadBackToTheSameModel) {
  std::shared_ptr<CausalLM> lm = LoadCausalLM(Golden("qwen2"));
  const auto dir = testing::TempDir("llama_save");
  const std::string config_path = SaveCausalLM(*lm, (dir / "model.safetensors").string());
  EXPECT_EQ(config_path, (dir / "config.json").string());
  std::ifstream in(config_path);
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["model_type"], "qwen2");
  EXPECT_EQ(config["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "linear");
  EXPECT_EQ(config["max_window_layers"], 28);  // a field Axle does not model, kept
  std::shared_ptr<CausalLM> back = LoadCausalLM(dir.string());
  const Tensor idx = Tokens(Expected("qwen2")["idx"]);
  const Tensor a = lm->forward(idx), b = back->forward(idx);
  sync();
  EXPECT_EQ(Vec(a), Vec(b));
  // The bare file knows its model too (the config in its __metadata__).
  EXPECT_EQ(LoadCausalLM((dir / "model.safetensors").string())->config_json(), back->config_json());
}

TEST(Llama, PresetsAndRandomInit) {
  const LlamaConfig tiny = LlamaConfig::Preset("tiny");
  EXPECT_EQ(tiny.vocab_size, 256);
  Llama model(tiny, /*seed=*/3);
  EXPECT_EQ(model.type_name(), "LlamaForCausalLM");
  // HF's init: N(0, 0.02^2) matrices, unit norms.
  const std::vector<float> w = Vec(model.model->decoder_layers[0]->self_attn->q_proj->weight);
  double sq = 0;
  for (float x : w) sq += x * x;
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(w.size())), 0.02, 0.002);
  for (float x : Vec(model.model->norm->weight)) EXPECT_EQ(x, 1.0f);
  const LlamaConfig bench = LlamaConfig::Preset("bench");
  EXPECT_EQ(bench.num_key_value_heads, 8);
  EXPECT_EQ(bench.head_dim, 64);
  EXPECT_THAT(ErrorOf([] { LlamaConfig::Preset("huge"); }), HasSubstr("tinyllama-1.1b"));
  // Same seed, same bits.
  Llama again(tiny, 3);
  EXPECT_EQ(Vec(again.model->decoder_layers[0]->self_attn->q_proj->weight), w);
}

// The inverse frequencies are HF's: llama3 leaves the high frequencies, divides the low ones by
// the factor and smooths between.
TEST(Llama, RotaryFrequencies) {
  LlamaConfig c = LlamaConfig::Preset("tiny");
  c.head_dim = 16;
  c.rope_theta = 10000;
  const std::vector<float> plain = Vec(Llama(c, 0, false).inv_freq());
  ASSERT_EQ(plain.size(), 8u);
  EXPECT_FLOAT_EQ(plain[0], 1.0f);
  EXPECT_NEAR(plain[1], std::pow(10000.0, -2.0 / 16), 1e-7);
  c.rope_scaling = {.type = "linear", .factor = 4};
  const std::vector<float> linear = Vec(Llama(c, 0, false).inv_freq());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_FLOAT_EQ(linear[i], plain[i] / 4);
  c.rope_scaling = {.type = "llama3", .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                    .original_max_position_embeddings = 64};
  const std::vector<float> llama3 = Vec(Llama(c, 0, false).inv_freq());
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 16) EXPECT_FLOAT_EQ(llama3[i], plain[i]) << i;      // high frequency: kept
    else if (wavelen > 64) EXPECT_FLOAT_EQ(llama3[i], plain[i] / 8) << i;  // low: divided
    else EXPECT_TRUE(llama3[i] < plain[i] && llama3[i] > plain[i] / 8) << i;
  }
}

TEST(Llama, BadConfigsAndFilesAreClearErrors) {
  const auto dir = testing::TempDir("llama_errors");
  std::filesystem::copy(Golden("mistral"), dir, std::filesystem::copy_options::recursive);
  std::ifstream in(dir / "config.json");
  const nlohmann::json good = nlohmann::json::parse(in);
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = good;
    edit(c);
    std::ofstream(dir / "config.json") << c.dump(2);
    return ErrorOf([&] { LoadCausalLM(dir.string()); });
  };
  const std::string config_json = (dir / "config.json").string();
  std::string msg = with([](nlohmann::json& c) { c["model_type"] = "bert"; });
  EXPECT_THAT(msg, HasSubstr(config_json));
  EXPECT_THAT(msg, HasSubstr("\"bert\""));
  EXPECT_THAT(msg, HasSubstr("llama, mistral and qwen2"));
  msg = with([](nlohmann::json& c) { c.erase("hidden_size"); });
  EXPECT_THAT(msg, HasSubstr(config_json));
  EXPECT_THAT(msg, HasSubstr("\"hidden_size\""));
  msg = with([](nlohmann::json& c) { c["num_hidden_layers"] = "two"; });
  EXPECT_THAT(msg, HasSubstr("\"num_hidden_layers\" must be an integer"));
  msg = with([](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
  EXPECT_THAT(msg, HasSubstr("not a multiple of num_key_value_heads 3"));
  msg = with([](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
  EXPECT_THAT(msg, HasSubstr("hidden_act \"gelu\""));
  msg = with([](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  EXPECT_THAT(msg, HasSubstr("rope_scaling type \"yarn\" is not supported"));
  msg = with([](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; });
  EXPECT_THAT(msg, HasSubstr("lacks \"low_freq_factor\""));
  msg = with([](nlohmann::json& c) { c.erase("model_type"); });
  EXPECT_THAT(msg, HasSubstr("no \"model_type\""));
  // A config that does not fit the weights: every mismatched tensor named, with the directory.
  msg = with([](nlohmann::json& c) { c["intermediate_size"] = 128; });
  EXPECT_THAT(msg, HasSubstr("model.layers.0.mlp.up_proj.weight"));
  EXPECT_THAT(msg, HasSubstr(dir.string()));
  // A tied config whose file has its own head.
  msg = with([](nlohmann::json& c) { c["tie_word_embeddings"] = true; });
  EXPECT_THAT(msg, HasSubstr("lm_head.weight"));
  EXPECT_THAT(msg, HasSubstr("differs from model.embed_tokens.weight"));
}

}  // namespace
}  // namespace axle::nn
