// Tokenizers against their reference implementations: Hugging Face tokenizers for byte-level BPE
// (GPT-2's layout, and Llama 3's / Qwen2's with NFC, ignore_merges and special tokens) and the
// sentencepiece library for a tokenizer.model, on the 1,000-line corpus of
// scripts/make_tokenizer_goldens.py (Unicode of several scripts, decomposed accents, emoji with ZWJ
// sequences, whitespace runs, long numbers, contractions, special tokens). scripts/tokenizer_check.sh
// compares 20,000 lines live.
#include "text/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "testing/error_of.h"

namespace axle::text {
namespace {

using ::testing::HasSubstr;

std::string Golden(const std::string& name) { return std::string(AXLE_SOURCE_DIR) + "/tests/text/goldens/" + name; }

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

using axle::testing::ErrorOf;

class TokenizerGolden : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(TokenizerGolden, IdsAreTheReferences) {
  const auto& [name, file] = GetParam();
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(Golden(name));  // the directory: finds its file
  EXPECT_EQ(tok->path(), Golden(name) + "/" + file);
  const std::vector<std::string> corpus = Lines(Golden("corpus.txt")), ids = Lines(Golden(name + ".ids"));
  ASSERT_EQ(corpus.size(), 1000u);
  ASSERT_EQ(ids.size(), corpus.size());
  int wrong = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream in(ids[i]);
    for (int32_t id; in >> id;) want.push_back(id);
    const std::vector<int32_t> got = tok->Encode(corpus[i]);
    if (got != want && ++wrong <= 5) ADD_FAILURE() << name << " line " << i + 1 << ": " << corpus[i];
    // Without a normalizer byte-level BPE decodes back to the text exactly; with NFC (bpe_llama3)
    // or SentencePiece's NFKC the decoded text is the normalized one, which encodes the same.
    if (name == "bpe_gpt2") {
      EXPECT_EQ(tok->Decode(got), corpus[i]) << i;
    }
    EXPECT_EQ(tok->Encode(tok->Decode(got)), got) << i;
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TokenizerGolden,
                         ::testing::Values(std::make_pair(std::string("bpe_gpt2"), std::string("tokenizer.json")),
                                           std::make_pair(std::string("bpe_llama3"), std::string("tokenizer.json")),
                                           std::make_pair(std::string("sp"), std::string("tokenizer.model"))));

TEST(Tokenizer, SpecialTokensAndVocabulary) {
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(Golden("bpe_llama3/tokenizer.json"));
  EXPECT_EQ(tok->vocab_size(), 2000);
  const std::optional<int32_t> eot = tok->TokenId("<|eot_id|>");
  ASSERT_TRUE(eot.has_value());
  const std::vector<int32_t> ids = tok->Encode("hi<|eot_id|>");
  EXPECT_EQ(ids.back(), *eot);
  EXPECT_EQ(tok->Decode(ids), "hi<|eot_id|>");
  EXPECT_FALSE(tok->TokenId("<|no such token|>").has_value());
  std::unique_ptr<Tokenizer> sp = LoadTokenizer(Golden("sp/tokenizer.model"));
  EXPECT_EQ(sp->vocab_size(), 1000);
  EXPECT_EQ(sp->TokenId("</s>"), 2);
  EXPECT_THAT(sp->Describe(), HasSubstr("SentencePiece"));
}

TEST(Tokenizer, WrongFilesAreClearErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("axle_tokenizer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  // A config.json given as the tokenizer.
  std::string path = write("config.json", R"({"model_type": "llama", "vocab_size": 10})");
  std::string msg = ErrorOf([&] { LoadTokenizer(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("looks like a config.json"));
  path = write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  EXPECT_THAT(ErrorOf([&] { LoadTokenizer(path); }), HasSubstr("model type \"WordPiece\" is not supported"));
  path = write("tokenizer.json",
               R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}})");
  EXPECT_THAT(ErrorOf([&] { LoadTokenizer(path); }), HasSubstr("pre-tokenizer type \"Metaspace\""));
  path = write("tokenizer.json", "not json");
  EXPECT_THAT(ErrorOf([&] { LoadTokenizer(path); }), HasSubstr("not a tokenizer.json"));
  path = write("tokenizer.model", "definitely not a protobuf");
  msg = ErrorOf([&] { LoadTokenizer(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("not a SentencePiece model"));
  std::filesystem::remove(dir / "tokenizer.json");
  std::filesystem::remove(dir / "tokenizer.model");
  EXPECT_THAT(ErrorOf([&] { LoadTokenizer(dir.string()); }), HasSubstr("no tokenizer.json or tokenizer.model"));
  // Text that is not UTF-8.
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(Golden("bpe_gpt2"));
  EXPECT_THAT(ErrorOf([&] { tok->Encode("ab\xff\xfe"); }), HasSubstr("not valid UTF-8 at byte 2"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace axle::text
