// `axle tokenize` end to end: a JSONL file to an llm.c shard that --data reads, ids equal to the
// tokenizer's, and bad input exits 1 naming the file, line and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "run_axle.h"
#include "text/tokenizer.h"
#include "train/data.h"

namespace axle {
namespace {

using ::testing::HasSubstr;
using testing::RunAxle;
using testing::RunResult;

class TokenizeCliTest : public testing::TempDirTest {
 protected:
  TokenizeCliTest() : TempDirTest("axle_tokenize_cli") {}
  static std::string Golden(const std::string& name) {
    return std::string(AXLE_SOURCE_DIR) + "/tests/text/goldens/" + name;
  }
};

TEST_F(TokenizeCliTest, JsonlToAShardOfTheTokenizersIds) {
  std::ofstream(Path("docs.jsonl")) << R"({"text": "Hello, world! 123"})" << "\n\n"
                                    << R"({"text": "naïve café 😀", "id": 2})" << "\n";
  RunResult r = RunAxle("tokenize --tokenizer " + Golden("bpe_llama3") + " --input " + Path("docs.jsonl") +
                        " --output " + Path("docs.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tokenized 2 documents"));
  const auto tok = text::LoadTokenizer(Golden("bpe_llama3"));
  const int32_t bos = *tok->TokenId("<|begin_of_text|>");
  std::vector<int32_t> want = {bos};
  for (int32_t id : tok->Encode("Hello, world! 123")) want.push_back(id);
  want.push_back(bos);
  for (int32_t id : tok->Encode("naïve café 😀")) want.push_back(id);
  EXPECT_EQ(train::LoadTokens(Path("docs.bin")).tokens, want);
  // uint32 on request (Llama 3's header), the same ids.
  r = RunAxle("tokenize --tokenizer " + Golden("sp/tokenizer.model") + " --input " + Path("docs.jsonl") +
              " --output " + Path("sp.bin") + " --format uint32 --doc-token none");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto sp = text::LoadTokenizer(Golden("sp/tokenizer.model"));
  want = sp->Encode("Hello, world! 123");
  for (int32_t id : sp->Encode("naïve café 😀")) want.push_back(id);
  EXPECT_EQ(train::LoadTokens(Path("sp.bin")).tokens, want);
}

TEST_F(TokenizeCliTest, BadInputNamesTheFileLineAndField) {
  std::ofstream(Path("bad.jsonl")) << R"({"text": "fine"})" << "\n" << R"(["not", "an", "object"])" << "\n";
  RunResult r = RunAxle("tokenize --tokenizer " + Golden("bpe_gpt2") + " --input " + Path("bad.jsonl") +
                        " --output " + Path("x.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr(Path("bad.jsonl") + ":2: the line is not a JSON object"));
  std::ofstream(Path("field.jsonl")) << R"({"prompt": "a", "response": "b"})" << "\n";
  r = RunAxle("tokenize --tokenizer " + Golden("bpe_gpt2") + " --input " + Path("field.jsonl") + " --output " +
              Path("x.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr(Path("field.jsonl") + ":1: the object has no \"text\" string (its keys: prompt, response)"));
  std::ofstream(Path("latin1.txt")) << "caf\xe9\n";
  r = RunAxle("tokenize --tokenizer " + Golden("bpe_gpt2") + " --input " + Path("latin1.txt") + " --output " +
              Path("x.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("not valid UTF-8 at byte 3"));
  // A config.json as the tokenizer: the wrong kind of file.
  const std::string config = std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_llama/config.json";
  r = RunAxle("tokenize --tokenizer " + config + " --input " + Path("field.jsonl") + " --output " + Path("x.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("not a tokenizer.json"));
  r = RunAxle("tokenize --tokenizer " + Golden("bpe_gpt2") + " --input " + Path("field.jsonl") + " --output " +
              Path("x.bin") + " --doc-token '<|nope|>'");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("has no such token"));
}

}  // namespace
}  // namespace axle
