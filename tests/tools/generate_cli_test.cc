// `axle generate` end to end: greedy ids from a Hugging Face directory are transformers' (the
// golden of scripts/make_llama_goldens.py), text in and out for a byte-level model, and bad
// flags exit 1 with a clear message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "axle/nn.h"
#include "run_axle.h"

namespace axle {
namespace {

using ::testing::HasSubstr;
using testing::RunAxle;
using testing::RunResult;

class GenerateCliTest : public testing::TempDirTest {
 protected:
  GenerateCliTest() : TempDirTest("axle_generate_cli") {}
};

TEST_F(GenerateCliTest, GreedyIdsAreTransformers) {
  const std::string golden = std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_qwen2";
  std::ifstream in(golden + "/expected.json");
  const nlohmann::json e = nlohmann::json::parse(in);
  std::vector<int> prompt, greedy = e["greedy"].get<std::vector<int>>();
  for (int i = 0; i < 5; ++i) prompt.push_back(e["idx"][0][i].get<int>());
  const RunResult r = RunAxle(fmt::format("generate --init {} --prompt-ids {} --temperature 0 --max-new-tokens 50 "
                                          "--print-ids",
                                          golden, fmt::join(prompt, ",")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(fmt::format("{}\n", fmt::join(greedy, ","))));
  EXPECT_THAT(r.output, HasSubstr("decode: 49 tokens"));
  EXPECT_THAT(r.output, HasSubstr("(1 executables built)\n"));
}

TEST_F(GenerateCliTest, TextInTextOutForAByteLevelModel) {
  nn::GPT2 tiny(nn::GPT2Config::Preset("tiny"), 3);
  nn::SaveCausalLM(tiny, Path("model.safetensors"));
  const RunResult r = RunAxle("generate --init " + Path("") + " --prompt 'Once upon' --max-new-tokens 20 --seed 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Once upon"));
  const RunResult again = RunAxle("generate --init " + Path("") + " --prompt 'Once upon' --max-new-tokens 20 --seed 4");
  EXPECT_EQ(again.output.substr(0, again.output.find("prefill")), r.output.substr(0, r.output.find("prefill")));
}

TEST_F(GenerateCliTest, BadFlagsExitOne) {
  const std::string golden = std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_llama";
  RunResult r = RunAxle("generate --init " + golden + " --prompt-ids 1,x,3");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("'x' is not a token id"));
  r = RunAxle("generate --init " + golden + " --prompt-ids 1,500");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("prompt token 500 is not in the model's vocabulary [0, 96)"));
  r = RunAxle("generate --init " + golden);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("exactly one of --prompt TEXT and --prompt-ids"));
  r = RunAxle("generate --init " + golden + " --prompt-ids 1 --top-p 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--top-p"));
  r = RunAxle("generate --init " + Path("nowhere") + " --prompt-ids 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("nowhere"));
}

}  // namespace
}  // namespace axle
