#include "ir/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace axle::ir {
namespace {

namespace fs = std::filesystem;

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string GoldenPath(const std::string& name) {
  return std::string(AXLE_SOURCE_DIR) + "/tests/ir/npy_goldens/" + name + ".npy";
}

// A .npy file with the given header dict (unpadded) and data bytes, in format `major`.0.
std::string MakeNpy(std::string_view dict, std::string_view data = "", int major = 1) {
  std::string header = std::string(dict) + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += static_cast<char>(header.size() >> (8 * i));
  return out + header + std::string(data);
}

std::string F32Dict(std::string_view shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(shape) + ", }";
}

// Expects ParseNpy to throw an axle::Error naming the input and containing every needle.
void ExpectParseError(std::string_view bytes, std::initializer_list<std::string_view> needles) {
  try {
    Literal lit = ParseNpy(AsBytes(bytes), "test.npy");
    ADD_FAILURE() << "parsed as " << lit.ToString();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("test.npy"), std::string::npos) << message;
    for (std::string_view needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "lacks '" << needle << "': " << message;
    }
  }
}

// A fresh directory for one test's files, removed afterwards.
class NpyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("axle_npy_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// --- Round trips ----------------------------------------------------------------------------

TEST(NpyTest, RoundTripsEveryDTypeAndShape) {
  const std::vector<Shape> shapes = {Shape{},        Shape{0},       Shape{3},    Shape{2, 3},
                                     Shape{2, 0, 3}, Shape{1, 1, 4}, Shape{12345}};
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dtype = static_cast<DType>(d);
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(TensorType(dtype, shape).ToString());
      std::vector<double> values(static_cast<size_t>(shape.NumElements()));
      for (size_t i = 0; i < values.size(); ++i) values[i] = 1.5 * static_cast<double>(i % 7) - 3;
      const Literal lit = Literal::FromDoubles(dtype, shape, values);
      const std::vector<uint8_t> bytes = SerializeNpy(lit);
      const Literal back = ParseNpy(bytes, "<memory>");
      if (dtype == DType::kBF16) {
        ASSERT_EQ(back.type(), TensorType(DType::kF32, shape));
        for (int64_t i = 0; i < lit.NumElements(); ++i)
          EXPECT_EQ(back.GetDouble(i), lit.GetDouble(i));
      } else {
        EXPECT_EQ(back, lit);
      }
      const size_t data_bytes = back.bytes().size();
      EXPECT_EQ((bytes.size() - data_bytes) % 64, 0u) << "data must start at a multiple of 64";
    }
  }
}

TEST(NpyTest, RoundTripsSpecialFloats) {
  const Literal lit =
      Literal::FromVector<float>(DType::kF32, {5}, {-0.0f, INFINITY, -INFINITY, NAN, 1e-45f});
  EXPECT_EQ(ParseNpy(SerializeNpy(lit), "<memory>"), lit);  // bitwise, NaN and -0 included
}

TEST(NpyTest, HeaderLooksLikeNumPys) {
  const std::vector<uint8_t> bytes = SerializeNpy(Literal(TensorType(DType::kF32, {2, 3})));
  const std::string text(bytes.begin(), bytes.end());
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(text.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(text.substr(10, dict.size()), dict);
  EXPECT_EQ(text.substr(10 + dict.size()),
            std::string(127 - 10 - dict.size(), ' ') + "\n" + std::string(24, '\0'));
}

TEST(NpyTest, BF16IsWrittenAsF32) {
  const std::vector<double> values = {1.0, -2.0, 0.5, 3.140625};
  const Literal bf16 = Literal::FromDoubles(DType::kBF16, {2, 2}, values);
  const Literal f32 = Literal::FromDoubles(DType::kF32, {2, 2}, values);
  EXPECT_EQ(SerializeNpy(bf16), SerializeNpy(f32));
  EXPECT_EQ(ParseNpy(SerializeNpy(bf16), "<memory>"), f32);
}

// --- NumPy's own files (tests/ir/npy_goldens, written by scripts/make_npy_goldens.py) ---------

struct Golden {
  std::string name;
  Literal expected;
};

std::vector<Golden> Goldens() {
  return {
      {"f32_2x3", Literal::FromVector<float>(DType::kF32, {2, 3},
                                             {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, INFINITY})},
      {"f64_3", Literal::FromVector<double>(DType::kF64, {3}, {0.1, -1e300, 2.0})},
      {"f16_3", Literal::FromVector<uint16_t>(DType::kF16, {3}, {0x3c00, 0xb800, 0x7bff})},
      {"i8_4", Literal::FromVector<int8_t>(DType::kI8, {4}, {-128, -1, 0, 127})},
      {"i32_2x2",
       Literal::FromVector<int32_t>(DType::kI32, {2, 2}, {1, -2, 2147483647, -2147483647 - 1})},
      {"i64_4",
       Literal::FromVector<int64_t>(DType::kI64, {4}, {0, -1, int64_t{1} << 62, INT64_MIN})},
      {"u8_2x2x2",
       Literal::FromVector<uint8_t>(DType::kU8, {2, 2, 2}, {0, 30, 60, 90, 120, 150, 180, 210})},
      {"u32_3", Literal::FromVector<uint32_t>(DType::kU32, {3}, {0, 1, 4294967295u})},
      {"bool_5", Literal::FromVector<uint8_t>(DType::kBool, {5}, {1, 0, 1, 1, 0})},
      {"f32_scalar", Literal::FromVector<float>(DType::kF32, {}, {3.5f})},
      {"f32_0x3", Literal(TensorType(DType::kF32, {0, 3}))},
      {"u8_aligned_header",
       Literal(TensorType(DType::kU8, {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100}))},
  };
}

TEST(NpyTest, ReadsNumPyFiles) {
  for (const Golden& g : Goldens()) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(ReadNpy(GoldenPath(g.name)), g.expected);
  }
}

TEST(NpyTest, SerializesExactlyAsNumPy) {
  for (const Golden& g : Goldens()) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(SerializeNpy(g.expected), ReadBytes(GoldenPath(g.name)));
  }
}

TEST(NpyTest, ReadsFormatVersions2And3) {
  EXPECT_EQ(ReadNpy(GoldenPath("f32_v2")),
            Literal::FromVector<float>(DType::kF32, {2}, {1.5f, -2.0f}));
  EXPECT_EQ(ReadNpy(GoldenPath("i32_v3")), Literal::FromVector<int32_t>(DType::kI32, {2}, {7, -8}));
}

TEST(NpyTest, AcceptsEquivalentSpellings) {
  const std::string data(8, '\0');
  // Native and no byte order, 1-byte types with any order, double quotes, no trailing comma,
  // any key order, Python 2 long dims ("2L") and extra whitespace.
  EXPECT_EQ(
      ParseNpy(AsBytes(MakeNpy("{'descr': '=f4', 'fortran_order': False, 'shape': (2,)}", data)),
               "x")
          .dtype(),
      DType::kF32);
  EXPECT_EQ(ParseNpy(AsBytes(MakeNpy("{\"shape\": (2L,), \"descr\": \"f4\", "
                                     "\"fortran_order\": False}",
                                     data)),
                     "x")
                .shape(),
            Shape{2});
  EXPECT_EQ(
      ParseNpy(AsBytes(MakeNpy("{'descr': '>i1', 'fortran_order': False, 'shape': (8,)}", data)),
               "x")
          .dtype(),
      DType::kI8);
  EXPECT_EQ(ParseNpy(AsBytes(MakeNpy("  { 'descr' : '<i4' , 'fortran_order' : False , "
                                     "'shape' : ( 1 , 2 ) , }  \t",
                                     data)),
                     "x")
                .shape(),
            (Shape{1, 2}));
}

TEST(NpyTest, BoolBytesAreNormalized) {
  const Literal lit =
      ParseNpy(AsBytes(MakeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                               std::string("\x00\x02\xff", 3))),
               "x");
  EXPECT_EQ(lit, Literal::FromVector<uint8_t>(DType::kBool, {3}, {0, 1, 1}));
}

// --- Files ----------------------------------------------------------------------------------

TEST_F(NpyFileTest, WriteThenRead) {
  const Literal lit = Literal::FromDoubles(DType::kI64, {2, 2}, {1, 2, 3, 4});
  WriteNpy(Path("a.npy"), lit);
  EXPECT_EQ(ReadNpy(Path("a.npy")), lit);
  EXPECT_EQ(ReadBytes(Path("a.npy")), SerializeNpy(lit));
}

TEST_F(NpyFileTest, WriteReplacesAtomicallyAndLeavesNoTemporary) {
  WriteNpy(Path("a.npy"), Literal::FromDoubles(DType::kF32, {1}, {1}));
  const Literal second = Literal::FromDoubles(DType::kF64, {3}, {1, 2, 3});
  WriteNpy(Path("a.npy"), second);
  EXPECT_EQ(ReadNpy(Path("a.npy")), second);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"a.npy"});
}

TEST_F(NpyFileTest, WriteErrorsNameThePath) {
  const std::string path = Path("missing_dir/a.npy");
  try {
    WriteNpy(path, Literal::FromDoubles(DType::kF32, {1}, {1}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

TEST_F(NpyFileTest, ReadErrorsNameThePath) {
  try {
    ReadNpy(Path("nope.npy"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open .npy file '" + Path("nope.npy")),
              std::string::npos)
        << e.what();
  }
  try {
    ReadNpy(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::ofstream(Path("bad.npy")) << "PK\x03\x04 a zip file";
  try {
    ReadNpy(Path("bad.npy"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(Path("bad.npy") + ": not a .npy file"), std::string::npos)
        << e.what();
  }
}

// --- Malformed input ------------------------------------------------------------------------

TEST(NpyMalformedTest, EmptyAndBadMagic) {
  ExpectParseError("", {"empty file"});
  ExpectParseError("hello world, this is not numpy", {"not a .npy file", "\"hello \""});
  ExpectParseError("\x93NUM", {"not a .npy file"});
}

TEST(NpyMalformedTest, TruncatedPrefix) {
  ExpectParseError(std::string("\x93NUMPY\x01", 7), {"truncated"});
  ExpectParseError(std::string("\x93NUMPY\x02\x00\x10\x00", 10), {"truncated"});
}

TEST(NpyMalformedTest, UnsupportedVersion) {
  ExpectParseError(MakeNpy(F32Dict("(1,)"), "abcd", 4), {"unsupported .npy format version 4.0"});
  std::string v11 = MakeNpy(F32Dict("(1,)"), "abcd");
  v11[7] = 1;
  ExpectParseError(v11, {"version 1.1"});
}

TEST(NpyMalformedTest, HeaderLengthPastTheEnd) {
  std::string bytes = MakeNpy(F32Dict("(1,)"), "abcd");
  bytes[8] = static_cast<char>(0xf4);
  bytes[9] = 0x01;  // 500
  ExpectParseError(bytes, {"the header is 500 bytes long"});
  // Version 2.0 with a 4 GiB header length: an error, not an allocation.
  std::string v2 = MakeNpy(F32Dict("(1,)"), "abcd", 2);
  for (int i = 8; i < 12; ++i) v2[i] = static_cast<char>(0xff);
  ExpectParseError(v2, {"the header is 4294967295 bytes long"});
}

TEST(NpyMalformedTest, HeaderIsNotADict) {
  ExpectParseError(MakeNpy("[1, 2]"), {"expected '{'", "column 1"});
  ExpectParseError(MakeNpy("{'descr': '<f4' 'shape': (1,)}"), {"expected ',' or '}'"});
  ExpectParseError(MakeNpy("{descr: '<f4'}"), {"expected a quoted key"});
  ExpectParseError(MakeNpy("{'descr' '<f4'}"), {"expected ':'"});
  ExpectParseError(MakeNpy(F32Dict("(1,)") + " extra"), {"unexpected text after the header dict"});
  ExpectParseError(MakeNpy("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}"),
                   {"expected ',' or '}'"});
  ExpectParseError(MakeNpy("{'descr': '<f4"), {"unterminated string"});
  ExpectParseError(MakeNpy("{'descr': '<f\\x34'}"), {"escape sequences"});
}

TEST(NpyMalformedTest, WrongKeys) {
  ExpectParseError(MakeNpy("{'descr': '<f4', 'shape': (1,), }", "abcd"),
                   {"missing key 'fortran_order'"});
  ExpectParseError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'foo': 1}"),
                   {"unexpected key 'foo'"});
  ExpectParseError(MakeNpy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False}"),
                   {"duplicate key 'descr'"});
}

TEST(NpyMalformedTest, BadValues) {
  ExpectParseError(MakeNpy("{'descr': 4, 'fortran_order': False, 'shape': (1,)}"),
                   {"'descr' must be a quoted string"});
  ExpectParseError(MakeNpy("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}"),
                   {"'fortran_order' must be True or False"});
  ExpectParseError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}"),
                   {"'shape' must be a tuple"});
}

TEST(NpyMalformedTest, BigEndian) {
  ExpectParseError(MakeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"),
                   {"big-endian dtype '>f4' is not supported", "astype('<f4')"});
}

TEST(NpyMalformedTest, FortranOrder) {
  ExpectParseError(MakeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"),
                   {"fortran_order is True", "np.ascontiguousarray"});
}

TEST(NpyMalformedTest, UnsupportedDTypes) {
  for (const char* descr : {"<c8", "<u8", "|O", "<i2", "<U3", "|S4", "<M8[ns]"}) {
    SCOPED_TRACE(descr);
    ExpectParseError(
        MakeNpy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,)}"),
        {std::string("unsupported dtype '") + descr + "'", "'<f4' (f32)", "'|b1' (bool)"});
  }
  ExpectParseError(MakeNpy("{'descr': '<V2', 'fortran_order': False, 'shape': (1,)}"),
                   {"unsupported dtype '<V2'", "bfloat16"});
  ExpectParseError(
      MakeNpy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,)}"),
      {"structured"});
}

TEST(NpyMalformedTest, BadShapes) {
  ExpectParseError(MakeNpy(F32Dict("(3)"), std::string(12, '\0')), {"not a tuple; write (n,)"});
  ExpectParseError(MakeNpy(F32Dict("(-1,)")), {"negative dimension"});
  ExpectParseError(MakeNpy(F32Dict("(99999999999999999999,)")), {"does not fit in int64"});
  ExpectParseError(MakeNpy(F32Dict("(1099511627776, 1099511627776)")), {"too many elements"});
  ExpectParseError(MakeNpy(F32Dict("(2305843009213693952,)")), {"too many elements"});
  ExpectParseError(MakeNpy(F32Dict("(2, x)")), {"expected an integer in 'shape'"});
  ExpectParseError(MakeNpy(F32Dict("(2 3)")), {"expected ',' or ')'"});
  ExpectParseError(MakeNpy(F32Dict("(,)")), {"expected an integer"});
}

TEST(NpyMalformedTest, DataSizeMismatch) {
  ExpectParseError(MakeNpy(F32Dict("(4,)"), std::string(8, '\0')),
                   {"truncated", "shape (4,) of '<f4' needs 16 data bytes but only 8"});
  ExpectParseError(MakeNpy(F32Dict("(2,)"), std::string(9, '\0')),
                   {"1 unexpected bytes after the 8 data bytes"});
  ExpectParseError(MakeNpy(F32Dict("()")), {"needs 4 data bytes but only 0"});
}

TEST(NpyMalformedTest, EveryTruncationIsAnError) {
  const std::vector<uint8_t> good = SerializeNpy(Literal::FromDoubles(DType::kI32, {3}, {1, 2, 3}));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(ParseNpy(std::span(good.data(), n), "cut.npy"), Error) << n;
  }
}

TEST(NpyMalformedTest, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> good =
      SerializeNpy(Literal::FromDoubles(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  std::mt19937 rng(42);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header, where the parsing is.
      bytes[rng() % 128] =
          static_cast<uint8_t>(rng() % 3 == 0 ? rng() : "(),:' 0123456789"[rng() % 16]);
    }
    try {
      ParseNpy(bytes, "fuzz.npy");
      ++parsed;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);  // some flips only touch padding
}

}  // namespace
}  // namespace axle::ir
