#include "train/data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "testing/error_of.h"
#include "train/corpus.h"

namespace axle::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A fresh directory per test, removed afterwards.
class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("axle_data_test_{}_{}", getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  static std::vector<uint8_t> ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void PutI32(std::vector<uint8_t>& b, size_t at, int32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i));
  }

  // The message of the axle::Error that LoadTokens(path) throws ("" when it does not throw).
  static std::string LoadError(const std::string& path) {
    try {
      LoadTokens(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(DataTest, ShardRoundTrip) {
  const std::vector<int32_t> tokens = {0, 1, 255, 256, 50256, 65535, 7};
  const std::string path = Path("a.bin");
  WriteTokenShard(path, tokens);
  const TokenData data = LoadTokens(path);
  EXPECT_EQ(data.tokens, tokens);
  EXPECT_EQ(data.source, path);
  EXPECT_EQ(data.vocab_hint, 65536);
}

TEST_F(DataTest, ShardBytesAreLlmcFormat) {
  const std::string path = Path("a.bin");
  WriteTokenShard(path, std::vector<int32_t>{0x0102, 3});
  const std::vector<uint8_t> bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 1024u + 4u);
  // Header: magic 20240520 = 0x0134D888, version 1, count 2, little-endian; then zeros.
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 12),
            (std::vector<uint8_t>{0x88, 0xD8, 0x34, 0x01, 1, 0, 0, 0, 2, 0, 0, 0}));
  EXPECT_TRUE(std::all_of(bytes.begin() + 12, bytes.begin() + 1024, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 1024, bytes.end()),
            (std::vector<uint8_t>{0x02, 0x01, 3, 0}));
}

TEST_F(DataTest, WriteShardRejectsTokensOutsideUint16) {
  try {
    WriteTokenShard(Path("a.bin"), std::vector<int32_t>{1, 65536});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("token 65536 at position 1"));
  }
}

TEST_F(DataTest, MissingFile) {
  const std::string path = Path("nope.bin");
  EXPECT_THAT(LoadError(path), HasSubstr(path));
  EXPECT_THAT(LoadError(path), HasSubstr("no such file"));
  EXPECT_THAT(LoadError(Path("nope.txt")), HasSubstr("no such file"));
}

TEST_F(DataTest, DirectoryIsRejected) {
  EXPECT_THAT(LoadError(dir_.string()), HasSubstr("is a directory"));
}

TEST_F(DataTest, ShardTooShortForHeader) {
  const std::string path = Path("short.bin");
  WriteBytes(path, std::vector<uint8_t>(100, 0));
  EXPECT_THAT(LoadError(path), HasSubstr(path));
  EXPECT_THAT(LoadError(path), HasSubstr("100 bytes is too short"));
  EXPECT_THAT(LoadError(path), HasSubstr("1024-byte header"));
}

TEST_F(DataTest, ShardBadMagic) {
  const std::string path = Path("magic.bin");
  WriteTokenShard(path, std::vector<int32_t>{1, 2, 3});
  std::vector<uint8_t> bytes = ReadBytes(path);
  PutI32(bytes, 0, 12345);
  WriteBytes(path, bytes);
  const std::string err = LoadError(path);
  EXPECT_THAT(err, HasSubstr(path));
  EXPECT_THAT(err, HasSubstr("bad magic number 12345"));
  EXPECT_THAT(err, HasSubstr("start with 20240520"));
}

TEST_F(DataTest, TextFileNamedBinHasBadMagic) {
  const std::string path = Path("text.bin");
  std::vector<uint8_t> bytes(2000, 'a');
  WriteBytes(path, bytes);
  EXPECT_THAT(LoadError(path), HasSubstr("bad magic number"));
  EXPECT_THAT(LoadError(path), HasSubstr("rename it"));
}

TEST_F(DataTest, ShardBadVersion) {
  const std::string path = Path("version.bin");
  WriteTokenShard(path, std::vector<int32_t>{1, 2, 3});
  std::vector<uint8_t> bytes = ReadBytes(path);
  PutI32(bytes, 4, 2);
  WriteBytes(path, bytes);
  EXPECT_THAT(LoadError(path), HasSubstr("unsupported shard version 2 for magic 20240520"));
  EXPECT_THAT(LoadError(path), HasSubstr(path));
}

// Llama 3's shards (llm.c: magic 20240801, version 7, uint32 ids) read back, large ids included.
TEST_F(DataTest, Uint32ShardsRoundTrip) {
  const std::string path = Path("llama3.bin");
  const std::vector<int32_t> tokens = {0, 1, 65535, 65536, 128000, 128255};
  WriteTokenShard(path, tokens, /*uint32=*/true);
  const std::vector<uint8_t> bytes = ReadBytes(path);
  EXPECT_EQ(bytes.size(), 1024u + 4 * tokens.size());
  const TokenData d = LoadTokens(path);
  EXPECT_EQ(d.tokens, tokens);
  EXPECT_THAT(axle::testing::ErrorOf([&] { WriteTokenShard(Path("small.bin"), tokens); }), HasSubstr("write a uint32"));
}

TEST_F(DataTest, ShardTruncated) {
  const std::string path = Path("trunc.bin");
  WriteTokenShard(path, std::vector<int32_t>{1, 2, 3, 4});
  std::vector<uint8_t> bytes = ReadBytes(path);
  bytes.resize(bytes.size() - 3);
  WriteBytes(path, bytes);
  const std::string err = LoadError(path);
  EXPECT_THAT(err, HasSubstr("truncated"));
  EXPECT_THAT(err, HasSubstr("header says 4 tokens (1032 bytes in all)"));
  EXPECT_THAT(err, HasSubstr("file has 1029 bytes"));
}

TEST_F(DataTest, ShardTrailingBytes) {
  const std::string path = Path("trail.bin");
  WriteTokenShard(path, std::vector<int32_t>{1, 2});
  std::vector<uint8_t> bytes = ReadBytes(path);
  bytes.push_back(9);
  WriteBytes(path, bytes);
  EXPECT_THAT(LoadError(path), HasSubstr("1 trailing bytes"));
  EXPECT_THAT(LoadError(path), HasSubstr("header says 2 tokens"));
}

TEST_F(DataTest, ShardNegativeCount) {
  const std::string path = Path("neg.bin");
  WriteTokenShard(path, std::vector<int32_t>{1, 2});
  std::vector<uint8_t> bytes = ReadBytes(path);
  PutI32(bytes, 8, -5);
  WriteBytes(path, bytes);
  EXPECT_THAT(LoadError(path), HasSubstr("negative token count -5"));
}

TEST_F(DataTest, ShardWithNoTokens) {
  const std::string path = Path("empty.bin");
  WriteTokenShard(path, std::vector<int32_t>{});
  EXPECT_THAT(LoadError(path), HasSubstr("holds no tokens"));
}

TEST_F(DataTest, TextIsBytes) {
  const std::string path = Path("t.txt");
  WriteBytes(path, {'h', 'i', '\n', 0xC3, 0xA9});  // "hi\n" + UTF-8 e-acute: two bytes
  const TokenData data = LoadTokens(path);
  EXPECT_EQ(data.tokens, (std::vector<int32_t>{'h', 'i', '\n', 0xC3, 0xA9}));
  EXPECT_EQ(data.vocab_hint, 256);
  EXPECT_EQ(data.source, path);
}

TEST_F(DataTest, EmptyTextIsAnError) {
  const std::string path = Path("empty.txt");
  WriteBytes(path, {});
  EXPECT_THAT(LoadError(path), HasSubstr("text file is empty"));
  EXPECT_THAT(LoadError(path), HasSubstr(path));
}

TEST(CheckVocabTest, AcceptsTokensBelowVocab) {
  const std::vector<int32_t> tokens = {0, 5, 255};
  EXPECT_NO_THROW(CheckVocab(tokens, 256, "x"));
}

TEST(CheckVocabTest, NamesFirstBadToken) {
  std::vector<int32_t> tokens(20, 3);
  tokens[17] = 51234;
  tokens[19] = 60000;
  try {
    CheckVocab(tokens, 50257, "data.bin");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("data.bin: token 51234 at position 17 is not below the "
                                    "model's vocab_size 50257"));
    EXPECT_THAT(e.what(), HasSubstr("larger vocabulary"));
  }
}

TEST(CheckVocabTest, BoundaryIsExclusive) {
  const std::vector<int32_t> tokens = {255, 256};
  try {
    CheckVocab(tokens, 256, "t.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("token 256 at position 1"));
  }
  EXPECT_THROW(CheckVocab(std::vector<int32_t>{-1}, 256, "t"), Error);
}

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(BatchLoaderTest, StepsReadConsecutiveWindows) {
  const std::vector<int32_t> tokens = Iota(100);
  const BatchLoader loader(tokens, /*batch=*/2, /*seq=*/3);
  // Step 0: tokens 0..6; inputs the first 6, targets shifted by one; row-major [2, 3].
  Batch b = loader.Get(0);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  // Step 1 starts at 1 * B * T = 6: its first input is the last target of step 0.
  b = loader.Get(1);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(loader.StepsPerEpoch(), 16);
}

TEST(BatchLoaderTest, WrapsAroundTheEnd) {
  const std::vector<int32_t> tokens = Iota(10);
  const BatchLoader loader(tokens, 1, 4);
  // Step 2 starts at 8: reads 8, 9, 0, 1, 2.
  Batch b = loader.Get(2);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{8, 9, 0, 1}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{9, 0, 1, 2}));
  // Step 3 starts at 12 % 10 = 2.
  b = loader.Get(3);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{2, 3, 4, 5}));
  // A very large step still lands where the modulo says: 10^12 * 4 % 10 = 0.
  b = loader.Get(1'000'000'000'000);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(BatchLoaderTest, StreamShorterThanOneBatch) {
  const std::vector<int32_t> tokens = {5, 6, 7};
  const BatchLoader loader(tokens, 2, 2);
  EXPECT_EQ(loader.StepsPerEpoch(), 1);
  Batch b = loader.Get(0);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{5, 6, 7, 5}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{6, 7, 5, 6}));
  b = loader.Get(1);  // starts at 4 % 3 = 1
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{6, 7, 5, 6}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{7, 5, 6, 7}));
}

TEST(BatchLoaderTest, MatchesTheReferenceFormula) {
  // The definition the PyTorch reference uses: token j of step s is tokens[(s*B*T + j) % n].
  std::vector<int32_t> tokens(37);
  for (int i = 0; i < 37; ++i) tokens[i] = (i * 7919) % 101;
  const int64_t B = 3, T = 5;
  const BatchLoader loader(tokens, B, T);
  for (int64_t s = 0; s < 20; ++s) {
    const Batch b = loader.Get(s);
    for (int64_t j = 0; j < B * T; ++j) {
      ASSERT_EQ(b.inputs[j], tokens[(s * B * T + j) % 37]) << s << " " << j;
      ASSERT_EQ(b.targets[j], tokens[(s * B * T + j + 1) % 37]) << s << " " << j;
    }
  }
}

TEST(BatchLoaderTest, RejectsTooFewTokensAndBadSizes) {
  const std::vector<int32_t> one = {1};
  try {
    BatchLoader(one, 1, 1, "tiny.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tiny.txt"));
    EXPECT_THAT(e.what(), HasSubstr("at least 2"));
  }
  const std::vector<int32_t> two = {1, 2};
  EXPECT_NO_THROW(BatchLoader(two, 1, 1));
  EXPECT_THROW(BatchLoader(two, 0, 1), Error);
  EXPECT_THROW(BatchLoader(two, 1, -1), Error);
}

TEST(CorpusTest, NonEmptyPlainAscii) {
  const std::string_view corpus = EmbeddedCorpus();
  EXPECT_GE(corpus.size(), 30'000u);
  EXPECT_LE(corpus.size(), 60'000u);
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto c = static_cast<unsigned char>(corpus[i]);
    ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "byte " << int(c) << " at " << i;
  }
  // Parts are joined with a blank line, not run together.
  EXPECT_NE(corpus.find("\n\nHOW A DEEP LEARNING COMPILER WORKS"), std::string_view::npos);
  EXPECT_NE(corpus.find("THE SPIDER AND THE WIND"), std::string_view::npos);
  EXPECT_EQ(EmbeddedCorpus().data(), corpus.data());  // one copy, stable across calls
}

}  // namespace
}  // namespace axle::train
