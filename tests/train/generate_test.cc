// Generation with a KV cache: greedy decoding reproduces transformers' (the goldens of
// scripts/make_llama_goldens.py), cached logits are the uncached forward's, a long generation
// compiles its decode step once, and sampling follows its options.
#include "train/generate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "axle/metrics.h"
#include "core/error.h"
#include "testing/error_of.h"

namespace axle::train {
namespace {

using ::testing::HasSubstr;

std::string Golden(const std::string& name) {
  return std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_" + name;
}

using axle::testing::ErrorOf;

class GreedyGolden : public ::testing::TestWithParam<std::string> {};

// 50 greedy tokens, token for token (Mistral's window of 6 is crossed after the first token).
TEST_P(GreedyGolden, MatchesTransformers) {
  std::ifstream in(Golden(GetParam()) + "/expected.json");
  const nlohmann::json e = nlohmann::json::parse(in);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 5; ++i) prompt.push_back(e["idx"][0][i].get<int32_t>());
  std::shared_ptr<nn::CausalLM> model = nn::LoadCausalLM(Golden(GetParam()));
  GenerateOptions o;
  o.max_new_tokens = 50;
  const GenerateResult r = GenerateTokens(*model, {prompt}, o);
  EXPECT_EQ(r.tokens[0], e["greedy"].get<std::vector<int32_t>>());
  EXPECT_EQ(r.decoded, 49);
}

INSTANTIATE_TEST_SUITE_P(Families, GreedyGolden, ::testing::Values("llama", "mistral", "qwen2"));

// The cache gives the uncached forward's logits: a prompt of 5, then 3 single tokens, against one
// forward over all 8 positions.
void CheckCachedLogits(nn::CausalLM& model, int64_t vocab_limit) {
  model.eval();
  NoGradGuard no_grad;
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  for (int32_t& t : tokens) t %= static_cast<int32_t>(vocab_limit);
  const Tensor full = model.forward(from_vector<int32_t>(tokens, {1, 8}, DType::kI32));
  nn::KVCache cache = model.make_cache(1, 16);
  std::vector<Tensor> pieces = {
      model.forward_cached(from_vector<int32_t>(std::vector<int32_t>(tokens.begin(), tokens.begin() + 5), {1, 5},
                                                DType::kI32),
                           cache)};
  for (int i = 5; i < 8; ++i) pieces.push_back(model.forward_cached(from_vector<int32_t>({tokens[i]}, {1, 1}, DType::kI32), cache));
  EXPECT_EQ(cache.length, 8);
  const std::vector<float> want = full.to_vector<float>(), got = cat(pieces, 1).to_vector<float>();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << i;
}

TEST(KVCache, CachedLogitsAreTheForwardsForEveryFamily) {
  for (const char* name : {"llama", "mistral", "qwen2"}) {
    SCOPED_TRACE(name);
    CheckCachedLogits(*nn::LoadCausalLM(Golden(name)), 96);
  }
  SCOPED_TRACE("gpt2");
  nn::GPT2 gpt(nn::GPT2Config::Preset("tiny"), 5);
  CheckCachedLogits(gpt, 256);
}

// Note [One decode graph]: the position is data, so 200 new tokens build one executable for the
// prompt and at most one more for all the decode steps (none on a warm disk cache).
TEST(KVCache, ALongGenerationCompilesTheDecodeStepOnce) {
  nn::Llama model(nn::LlamaConfig::Preset("tiny"), 7);
  GenerateOptions o;
  o.max_new_tokens = 200;
  o.sampling = {.temperature = 0.9, .top_k = 20, .top_p = 0.95};
  const GenerateResult r = GenerateTokens(model, {{10, 20, 30, 40}}, o);
  EXPECT_EQ(r.tokens[0].size(), 200u);
  EXPECT_EQ(r.decoded, 199);
  EXPECT_LE(r.prefill_compiles, 1);
  EXPECT_LE(r.decode_compiles, 2);
  // A second generation needs nothing new.
  const GenerateResult again = GenerateTokens(model, {{10, 20, 30, 40}}, o);
  EXPECT_EQ(again.prefill_compiles + again.decode_compiles, 0);
  EXPECT_EQ(again.tokens, r.tokens);  // same seed, same tokens
}

TEST(KVCache, ContextAndVocabularyLimits) {
  nn::GPT2 gpt(nn::GPT2Config::Preset("tiny"), 5);  // 128 positions
  GenerateOptions o;
  o.max_new_tokens = 500;
  const GenerateResult r = GenerateTokens(gpt, {{1, 2, 3, 4, 5, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}}, o);
  ASSERT_EQ(r.tokens.size(), 2u);
  EXPECT_EQ(r.tokens[0].size(), 120u);  // the context fills up
  EXPECT_THAT(ErrorOf([&] { GenerateTokens(gpt, {{1, 300}}, o); }), HasSubstr("prompt token 300"));
  EXPECT_THAT(ErrorOf([&] { GenerateTokens(gpt, {{}}, o); }), HasSubstr("the prompt is empty"));
  EXPECT_THAT(ErrorOf([&] { GenerateTokens(gpt, {{1, 2}, {3}}, o); }), HasSubstr("one length"));
  nn::KVCache cache = gpt.make_cache(1, 4);
  EXPECT_THAT(ErrorOf([&] { gpt.forward_cached(from_vector<int32_t>({1, 2, 3, 4, 5}, {1, 5}, DType::kI32), cache); }),
              HasSubstr("exceed the KV cache's 4"));
  EXPECT_THAT(ErrorOf([&] { gpt.make_cache(1, 129); }), HasSubstr("n_positions 128"));
  // The end-of-sequence token stops a sequence.
  o.max_new_tokens = 50;
  o.eos = {r.tokens[0][3]};
  const GenerateResult stopped = GenerateTokens(gpt, {{1, 2, 3, 4, 5, 6, 7, 8}}, o);
  ASSERT_LE(stopped.tokens[0].size(), 4u);
  EXPECT_EQ(stopped.tokens[0].back(), r.tokens[0][3]);
}

TEST(SampleToken, GreedyTopKTopPAndTemperature) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f, -1.0f};
  std::mt19937_64 rng(1);
  EXPECT_EQ(SampleToken(logits, {.temperature = 0}, rng), 1);  // the first of the largest
  EXPECT_EQ(SampleToken(logits, {.temperature = 1, .top_k = 1}, rng), 1);
  EXPECT_EQ(SampleToken(logits, {.temperature = 1, .top_k = 0, .top_p = 1e-6}, rng), 1);
  // top-k 2 keeps ids 1 and 3 (equal logits): each about half the time, never another.
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t t = SampleToken(logits, {.temperature = 1, .top_k = 2}, rng);
    ASSERT_TRUE(t == 1 || t == 3) << t;
    ones += t == 1;
  }
  EXPECT_NEAR(ones / 4000.0, 0.5, 0.04);
  // Temperature 1 over all: frequencies follow the softmax (p(2) = e^1 / sum).
  double z = 0;
  for (float l : logits) z += std::exp(l);
  int twos = 0;
  for (int i = 0; i < 20000; ++i) twos += SampleToken(logits, {.temperature = 1}, rng) == 2;
  EXPECT_NEAR(twos / 20000.0, std::exp(1.0) / z, 0.015);
  // The same seed draws the same tokens.
  std::mt19937_64 a(9), b(9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(SampleToken(logits, {.temperature = 0.7}, a), SampleToken(logits, {.temperature = 0.7}, b));
}

}  // namespace
}  // namespace axle::train
