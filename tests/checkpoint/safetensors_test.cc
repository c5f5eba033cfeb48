#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>

#include "core/half.h"

namespace axle::checkpoint {
namespace {

namespace fs = std::filesystem;
using ir::Literal;

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string GoldenPath(const std::string& name) {
  return std::string(AXLE_SOURCE_DIR) + "/tests/checkpoint/goldens/" + name + ".safetensors";
}

// A safetensors file with the given header text (unpadded) and data bytes.
std::string MakeFile(std::string_view header, std::string_view data = "") {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + std::string(header) + std::string(data);
}

// A one-tensor header {"t": {...}} with the given entry fields.
std::string OneTensor(std::string_view fields) { return "{\"t\":{" + std::string(fields) + "}}"; }

std::map<std::string, Literal> AsMap(const TensorMap& tensors) {
  std::map<std::string, Literal> out;
  for (const auto& [name, lit] : tensors) out.emplace(name, lit);
  return out;
}

// Expects ParseSafetensors to throw an axle::Error naming the input and containing every needle.
void ExpectParseError(std::string_view bytes, std::initializer_list<std::string_view> needles) {
  try {
    TensorMap tensors = ParseSafetensors(AsBytes(bytes), "test.safetensors");
    ADD_FAILURE() << "parsed " << tensors.size() << " tensors";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("test.safetensors"), std::string::npos) << message;
    for (std::string_view needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "lacks '" << needle << "': " << message;
    }
  }
}

// A literal of `dtype` and `shape` whose bytes are a recognizable pattern (0/1 for bool).
Literal Pattern(DType dtype, Shape shape, int seed) {
  Literal lit(ir::TensorType(dtype, std::move(shape)));
  std::span<uint8_t> bytes = lit.mutable_bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = dtype == DType::kBool ? (i + seed) % 3 == 0 : static_cast<uint8_t>(i * 37 + seed);
  }
  return lit;
}

const DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI8,
                            DType::kI32, DType::kI64, DType::kU8,   DType::kU32, DType::kBool};

// A fresh directory for one test's files, removed afterwards.
class SafetensorsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("axle_safetensors_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// --- Round trips ----------------------------------------------------------------------------

TEST(SafetensorsTest, RoundTripsEveryDTypeAndShape) {
  const std::vector<Shape> shapes = {Shape{},        Shape{0},       Shape{3},   Shape{2, 3},
                                     Shape{2, 0, 3}, Shape{1, 1, 4}, Shape{1237}};
  TensorMap tensors;
  int seed = 0;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      tensors.emplace_back(fmt::format("{}.{}", DTypeName(dtype), shape.ToString()),
                           Pattern(dtype, shape, ++seed));
    }
  }
  const SafetensorsMetadata metadata = {{"format", "pt"}, {"z", "last"}, {"a", ""}};
  const std::vector<uint8_t> bytes = SerializeSafetensors(tensors, metadata);
  SafetensorsMetadata read_metadata;
  const TensorMap back = ParseSafetensors(bytes, "<memory>", &read_metadata);
  EXPECT_EQ(AsMap(back), AsMap(tensors));
  EXPECT_EQ(read_metadata, metadata);
  // Writing what was read gives the same bytes: the layout does not depend on the input order.
  EXPECT_EQ(SerializeSafetensors(back, read_metadata), bytes);
}

TEST(SafetensorsTest, HeaderIsPaddedAndTensorsAreAligned) {
  for (int name_len = 1; name_len <= 9; ++name_len) {
    TensorMap tensors = {{std::string(name_len, 'w'), Pattern(DType::kF64, Shape{2}, 1)},
                         {"b", Pattern(DType::kU8, Shape{3}, 2)}};
    const std::vector<uint8_t> bytes = SerializeSafetensors(tensors);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(bytes.size(), 8 + n + 16 + 3);
    EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
  }
}

// The byte vectors of the reference implementation's own tests (safetensors/src/tensor.rs).
TEST(SafetensorsTest, MatchesTheReferenceTestVectors) {
  const std::vector<uint8_t> empty = {8,   0,   0,   0,   0,   0,   0,   0,
                                      '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  EXPECT_EQ(SerializeSafetensors({}), empty);
  const std::string with_metadata = MakeFile("{\"__metadata__\":{\"framework\":\"pt\"}}     ");
  EXPECT_EQ(SerializeSafetensors({}, {{"framework", "pt"}}),
            std::vector<uint8_t>(with_metadata.begin(), with_metadata.end()));
  TensorMap attn = {
      {"attn.0", Literal::FromVector<float>(DType::kF32, Shape{1, 2, 3}, {0, 1, 2, 3, 4, 5})}};
  const std::vector<uint8_t> bytes = SerializeSafetensors(attn);
  const std::string header =
      "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
  ASSERT_EQ(header.size(), 64u);  // no padding needed
  EXPECT_EQ(bytes[0], 64);
  EXPECT_EQ(std::string(bytes.begin() + 8, bytes.begin() + 72), header);
  EXPECT_EQ(bytes.size(), 72u + 24u);
}

TEST(SafetensorsTest, WritesLargestAlignmentFirstThenByName) {
  TensorMap tensors = {
      {"z8", Pattern(DType::kU8, Shape{1}, 0)}, {"b", Pattern(DType::kBool, Shape{1}, 0)},
      {"h", Pattern(DType::kF16, Shape{1}, 0)}, {"g", Pattern(DType::kBF16, Shape{1}, 0)},
      {"a8", Pattern(DType::kI8, Shape{1}, 0)}, {"i", Pattern(DType::kI32, Shape{1}, 0)},
      {"u", Pattern(DType::kU32, Shape{1}, 0)}, {"f", Pattern(DType::kF32, Shape{1}, 0)},
      {"d", Pattern(DType::kF64, Shape{1}, 0)}, {"l", Pattern(DType::kI64, Shape{1}, 0)},
      {"a", Pattern(DType::kF32, Shape{1}, 0)}};
  const TensorMap back = ParseSafetensors(SerializeSafetensors(tensors), "<memory>");
  std::vector<std::string> names;
  for (const auto& [name, lit] : back) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"l", "d", "a", "f", "u", "i", "g", "h", "a8", "z8", "b"}));
}

TEST_F(SafetensorsFileTest, SaveAndLoadAFile) {
  TensorMap tensors = {{"w", Pattern(DType::kBF16, Shape{4, 5}, 3)},
                       {"step", Literal::FromVector<int64_t>(DType::kI64, Shape{}, {42})}};
  const std::string path = Path("model.safetensors");
  SaveSafetensors(path, tensors, {{"format", "axle"}});
  SafetensorsMetadata metadata;
  EXPECT_EQ(AsMap(LoadSafetensors(path, &metadata)), AsMap(tensors));
  EXPECT_EQ(metadata, (SafetensorsMetadata{{"format", "axle"}}));
  EXPECT_EQ(ReadBytes(path), SerializeSafetensors(tensors, {{"format", "axle"}}));
  // Overwriting is atomic and leaves no temporary file behind.
  SaveSafetensors(path, {});
  EXPECT_TRUE(LoadSafetensors(path).empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// --- Files written by the Python safetensors package ------------------------------------------

TEST(SafetensorsGoldenTest, ReadsEveryDType) {
  SafetensorsMetadata metadata;
  const TensorMap tensors = LoadSafetensors(GoldenPath("all_dtypes"), &metadata);
  EXPECT_EQ(metadata, (SafetensorsMetadata{{"format", "pt"}}));
  std::vector<std::string> names;
  for (const auto& [name, lit] : tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"i64", "f64", "f32", "u32", "i32", "bf16", "f16", "i8",
                                             "u8", "bool"}));
  const std::map<std::string, Literal> t = AsMap(tensors);
  EXPECT_EQ(t.at("f32"), Literal::FromVector<float>(DType::kF32, Shape{2, 3},
                                                    {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, INFINITY}));
  EXPECT_EQ(t.at("f64"), Literal::FromVector<double>(DType::kF64, Shape{2}, {0.1, -1e300}));
  EXPECT_EQ(t.at("bf16"), Literal::FromVector<uint16_t>(
                              DType::kBF16, Shape{3},
                              {FloatToBF16(1.0f), FloatToBF16(-2.0f), FloatToBF16(0.5f)}));
  EXPECT_EQ(t.at("f16"), Literal::FromDoubles(DType::kF16, Shape{3}, {1.0, -0.5, 65504.0}));
  EXPECT_EQ(t.at("i8"), Literal::FromVector<int8_t>(DType::kI8, Shape{4}, {-128, -1, 0, 127}));
  EXPECT_EQ(t.at("i32"),
            Literal::FromVector<int32_t>(DType::kI32, Shape{2, 2}, {1, -2, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(t.at("i64"), Literal::FromVector<int64_t>(DType::kI64, Shape{4},
                                                      {0, -1, int64_t{1} << 62, INT64_MIN}));
  EXPECT_EQ(t.at("u8"), Literal::FromVector<uint8_t>(DType::kU8, Shape{2, 2, 2},
                                                     {0, 30, 60, 90, 120, 150, 180, 210}));
  EXPECT_EQ(t.at("u32"), Literal::FromVector<uint32_t>(DType::kU32, Shape{3}, {0, 1, UINT32_MAX}));
  EXPECT_EQ(t.at("bool"), Literal::FromVector<uint8_t>(DType::kBool, Shape{3}, {1, 0, 1}));
}

TEST(SafetensorsGoldenTest, ReadsScalarsEmptyTensorsAndEscapedNames) {
  const std::map<std::string, Literal> odd = AsMap(LoadSafetensors(GoldenPath("odd_shapes")));
  EXPECT_EQ(odd.at("scalar"), Literal::FromVector<float>(DType::kF32, Shape{}, {3.5f}));
  EXPECT_EQ(odd.at("empty").type(), ir::TensorType(DType::kF32, Shape{0}));
  EXPECT_EQ(odd.at("empty_2x0x3").type(), ir::TensorType(DType::kI64, Shape{2, 0, 3}));
  EXPECT_EQ(odd.at("a.b"), Literal::FromVector<uint8_t>(DType::kU8, Shape{1}, {7}));
  SafetensorsMetadata metadata;
  const std::map<std::string, Literal> names =
      AsMap(LoadSafetensors(GoldenPath("names"), &metadata));
  EXPECT_EQ(metadata, (SafetensorsMetadata{{"note", "says \"hi\"\n"}}));
  int32_t expected = 0;
  for (const char* name :
       {"quote\"name", "back\\slash", "tab\tnew\nline\x01", "caf\u00e9.\u6743\u91cd", "slash/ok"}) {
    ASSERT_TRUE(names.count(name)) << name;
    EXPECT_EQ(names.at(name), Literal::FromVector<int32_t>(DType::kI32, Shape{1}, {++expected}));
  }
  EXPECT_TRUE(LoadSafetensors(GoldenPath("no_tensors")).empty());
}

// Our writer reproduces the Python library's bytes, whatever order the tensors are given in.
TEST(SafetensorsGoldenTest, WriterReproducesTheLibraryByteForByte) {
  for (const char* name : {"all_dtypes", "odd_shapes", "names", "no_tensors", "no_tensors_metadata",
                           "model_single/model", "model_sharded/model-00001-of-00002",
                           "model_sharded/model-00002-of-00002"}) {
    SCOPED_TRACE(name);
    SafetensorsMetadata metadata;
    TensorMap tensors = LoadSafetensors(GoldenPath(name), &metadata);
    std::reverse(tensors.begin(), tensors.end());
    EXPECT_EQ(SerializeSafetensors(tensors, metadata), ReadBytes(GoldenPath(name)));
  }
}

// --- Malformed input --------------------------------------------------------------------------

TEST(SafetensorsErrorTest, EveryTruncationOfAValidFileIsAnError) {
  const std::vector<uint8_t> bytes = ReadBytes(GoldenPath("all_dtypes"));
  for (size_t len = 0; len < bytes.size(); ++len) {
    SCOPED_TRACE(len);
    const std::string_view prefix(reinterpret_cast<const char*>(bytes.data()), len);
    ExpectParseError(prefix, {len < 8 ? "shorter than the 8-byte header size" : "truncated"});
  }
}

// Random byte edits of a valid file either parse or give an axle::Error; nothing else escapes.
TEST(SafetensorsErrorTest, RandomCorruptionsNeverCrash) {
  const std::vector<uint8_t> golden = ReadBytes(GoldenPath("all_dtypes"));
  std::mt19937 rng(7);
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = golden;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly edit the header, where the parsing happens; sometimes the size prefix.
      const size_t at = rng() % 4 == 0 ? rng() % 8 : 8 + rng() % (bytes.size() - 8);
      bytes[at] = static_cast<uint8_t>(rng() % 3 == 0 ? "0123456789[]{},:\""[rng() % 17] : rng());
    }
    try {
      ParseSafetensors(bytes, "fuzz.safetensors");
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find("fuzz.safetensors"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(errors, 1000);
}

TEST_F(SafetensorsFileTest, TruncatedFilesAreErrorsNamingThePath) {
  const std::vector<uint8_t> bytes = ReadBytes(GoldenPath("all_dtypes"));
  for (size_t len : {size_t{0}, size_t{5}, size_t{8}, size_t{100}, bytes.size() - 1}) {
    const std::string path = Path("cut.safetensors");
    WriteBytes(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), len));
    try {
      LoadSafetensors(path);
      ADD_FAILURE() << "loaded a file cut at " << len;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(SafetensorsErrorTest, HeaderSize) {
  ExpectParseError("", {"0 bytes, shorter than the 8-byte header size"});
  ExpectParseError(std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10),
                   {"over the 100 MB limit"});
  ExpectParseError(std::string("\x01\xe1\xf5\x05\x00\x00\x00\x00", 8), {"over the 100 MB limit"});
  ExpectParseError(std::string("\x10\x00\x00\x00\x00\x00\x00\x00{}", 10),
                   {"truncated", "header is 16 bytes but only 2 bytes follow"});
}

TEST(SafetensorsErrorTest, HeaderIsNotJson) {
  ExpectParseError(MakeFile(""), {"not valid UTF-8 JSON"});
  ExpectParseError(MakeFile("{\"t\":"), {"not valid UTF-8 JSON"});
  ExpectParseError(MakeFile("{} x"), {"not valid UTF-8 JSON"});
  ExpectParseError(MakeFile(std::string("{}\0\0", 4)), {"not valid UTF-8 JSON"});  // NUL padding
  ExpectParseError(MakeFile(std::string("{}\0x", 4)), {"a NUL byte at header offset 2"});
  ExpectParseError(MakeFile("{\"caf\xe9\":{}}"), {"not valid UTF-8 JSON"});  // Latin-1 byte
  ExpectParseError(MakeFile(std::string(100000, '[')), {"nested more than 64 levels"});
  ExpectParseError(MakeFile("[]"), {"must be a JSON object, not array"});
  ExpectParseError(MakeFile("\"text\""), {"must be a JSON object, not string"});
}

TEST(SafetensorsErrorTest, MalformedEntries) {
  ExpectParseError(MakeFile("{\"t\":[1,2]}"), {"tensor 't'", "must be an object", "not array"});
  ExpectParseError(MakeFile(OneTensor(R"("shape":[1],"data_offsets":[0,4])"), std::string(4, 0)),
                   {"tensor 't' lacks the field \"dtype\""});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","data_offsets":[0,4])"), std::string(4, 0)),
                   {"tensor 't' lacks the field \"shape\""});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1])"), std::string(4, 0)),
                   {"tensor 't' lacks the field \"data_offsets\""});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":7,"shape":[1],"data_offsets":[0,4])")),
                   {"\"dtype\" must be string, not number"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":3,"data_offsets":[0,4])")),
                   {"\"shape\" must be array, not number"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])")),
                   {"tensor 't'", "non-negative integer", "not -1"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1.0],"data_offsets":[0,4])")),
                   {"tensor 't'", "non-negative integer", "not 1.0"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4])")),
      {"tensor 't'", "below 2^63"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4,8])")),
                   {"tensor 't'", "must be [begin, end], not [0,4,8]"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,"4"])")),
                   {"tensor 't'", "\"data_offsets\" must be a non-negative integer"});
  ExpectParseError(
      MakeFile(R"({"t":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               std::string(4, 0)),
      {"duplicate field 'dtype'"});
}

TEST(SafetensorsErrorTest, UnsupportedAndUnknownDTypes) {
  for (const char* dtype : {"F8_E4M3", "F8_E5M2", "I16", "U16", "U64", "C64"}) {
    ExpectParseError(
        MakeFile(
            fmt::format(R"({{"w.q":{{"dtype":"{}","shape":[1],"data_offsets":[0,1]}}}})", dtype),
            std::string(8, 0)),
        {"tensor 'w.q'", "unsupported dtype", dtype, "F32, F64, BF16"});
  }
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"f32","shape":[1],"data_offsets":[0,4])")),
                   {"tensor 't'", "unknown dtype 'f32'"});
}

TEST(SafetensorsErrorTest, BadOffsets) {
  const std::string four(4, 0);
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])"), four),
                   {"tensor 't'", "data_offsets [4, 0] end before they begin"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,8])"), four),
                   {"tensor 't'", "[0, 8] run past the end of the data buffer, which has 4 bytes"});
  ExpectParseError(MakeFile(OneTensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), four),
                   {"tensor 't'", "F32 [2] needs 8 bytes but data_offsets [0, 4] hold 4"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[4,8])"), std::string(8, 0)),
      {"tensor 't'", "hole of 4 unused bytes at 0"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), std::string(6, 0)),
      {"2 unexpected bytes after the last tensor"});
  ExpectParseError(MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            std::string(8, 0)),
                   {"tensor 'b'", "overlap tensor 'a' at [0, 8]"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4])")),
      {"tensor 't'", "below 2^63"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,4])")),
      {"tensor 't'", "more bytes than fit in 64 bits"});
  ExpectParseError(
      MakeFile(OneTensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616])")),
      {"tensor 't'", "\"data_offsets\" must be a non-negative integer"});
}

TEST(SafetensorsErrorTest, DuplicateNamesAndBadMetadata) {
  ExpectParseError(MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                            R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                            std::string(2, 0)),
                   {"duplicate tensor name 'a'"});
  ExpectParseError(MakeFile(R"({"__metadata__":{"k":1}})"),
                   {"\"__metadata__\" value 'k' must be a string, not number"});
  ExpectParseError(MakeFile(R"({"__metadata__":["k"]})"),
                   {"\"__metadata__\" must be an object of strings, not array"});
}

TEST(SafetensorsErrorTest, AcceptsWhatTheReferenceAccepts) {
  // Leading whitespace, unknown entry fields, null metadata, and zero-sized tensors anywhere.
  const TensorMap tensors = ParseSafetensors(
      AsBytes(MakeFile(
          R"(  {"__metadata__":null,"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3],"x":[1]},)"
          R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[3,3]}}  )",
          std::string("\x00\x02\x01", 3))),
      "test.safetensors");
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].first, "b");
  // Any nonzero bool byte reads as true.
  EXPECT_EQ(tensors[0].second, Literal::FromVector<uint8_t>(DType::kBool, Shape{3}, {0, 1, 1}));
  EXPECT_EQ(tensors[1].second.type(), ir::TensorType(DType::kF32, Shape{0, 5}));
}

TEST(SafetensorsErrorTest, WriterRejectsBadNames) {
  const Literal one = Pattern(DType::kU8, Shape{1}, 0);
  auto expect_error = [](const TensorMap& tensors, const SafetensorsMetadata& metadata,
                         std::string_view needle) {
    try {
      SerializeSafetensors(tensors, metadata);
      ADD_FAILURE() << "serialized";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"a", one}, {"a", one}}, {}, "duplicate tensor name 'a'");
  expect_error({{"__metadata__", one}}, {}, "reserved name");
  expect_error({{"caf\xe9", one}}, {}, "not valid UTF-8");
  expect_error({{"ok", one}}, {{"k", "\xc0\x80"}}, "metadata entry 'k' is not valid UTF-8");
}

TEST_F(SafetensorsFileTest, FileSystemErrorsNameThePath) {
  auto expect_error = [](auto&& call, std::string_view needle) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string missing = Path("missing.safetensors");
  expect_error([&] { LoadSafetensors(missing); }, missing);
  expect_error([&] { LoadSafetensors(dir_.string()); }, "is not a regular file");
  const std::string no_dir = Path("no/such/dir/x.safetensors");
  expect_error([&] { SaveSafetensors(no_dir, {}); }, no_dir);
}

}  // namespace
}  // namespace axle::checkpoint
