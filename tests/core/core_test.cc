// dtypes, shapes, errors and the flags registry.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/dtype.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"

namespace axle {
namespace {

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_EQ(ParseDType(DTypeName(t)), t);
  }
  EXPECT_EQ(ParseDType("float32"), std::nullopt);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_TRUE(IsFloat(DType::kF16));
  EXPECT_FALSE(IsInteger(DType::kBool));
  EXPECT_TRUE(IsUnsigned(DType::kU32));
  EXPECT_TRUE(IsSigned(DType::kI8));
}

TEST(Shape, Basics) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.NumElements(), 24);
  EXPECT_EQ(s.Strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(s.ToString(), "[2,3,4]");
  EXPECT_EQ(Shape{}.NumElements(), 1);
  EXPECT_EQ(Shape{}.ToString(), "[]");
  EXPECT_EQ((Shape{3, 0}).NumElements(), 0);
}

TEST(Shape, RejectsNegativeAndOverflow) {
  EXPECT_FALSE((Shape{-1}).IsValid());
  EXPECT_FALSE((Shape{int64_t{1} << 40, int64_t{1} << 40}).IsValid());
  EXPECT_TRUE((Shape{0, int64_t{1} << 62, int64_t{1} << 62}).IsValid());  // zero elements
}

TEST(Error, CarriesLocation) {
  Error e(SourceLoc{"m.axir", 3, 7}, "add: operand types differ");
  EXPECT_STREQ(e.what(), "m.axir:3:7: error: add: operand types differ");
  EXPECT_EQ(e.message(), "add: operand types differ");
  EXPECT_THROW(Fail("x {}", 1), Error);
}

TEST(Flags, ReadFromEnvironment) {
  flags::ResetForTesting();
  ::setenv("AXLE_DEBUG", "1", 1);
  EXPECT_TRUE(flags::debug());
  flags::ResetForTesting();
  ::setenv("AXLE_DEBUG", "off", 1);
  EXPECT_FALSE(flags::debug());
  flags::ResetForTesting();
  ::setenv("AXLE_DEBUG", "maybe", 1);
  try {
    flags::debug();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AXLE_DEBUG=maybe"), std::string::npos) << e.what();
  }
  ::unsetenv("AXLE_DEBUG");
  flags::ResetForTesting();
  EXPECT_FALSE(flags::debug());
  ::setenv("AXLE_INTERPRETER_MAX_BYTES", "12x", 1);
  EXPECT_THROW(flags::interpreter_max_bytes(), Error);
  ::unsetenv("AXLE_INTERPRETER_MAX_BYTES");
  flags::ResetForTesting();
  EXPECT_EQ(flags::interpreter_max_bytes(), int64_t{8} << 30);
}

TEST(Flags, TableListsEveryFlag) {
  auto all = flags::AllFlags();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].env, "AXLE_DEBUG");
  for (const auto& f : all) EXPECT_FALSE(f.help.empty()) << f.name;
}

// --memory-budget's sizes: decimal and binary units, spaces allowed; anything else, or a size
// under one byte, is an error naming the flag and the forms it takes.
TEST(Flags, ParseByteSizeReadsSizes) {
  EXPECT_EQ(flags::ParseByteSize("4096", "x"), 4096);
  EXPECT_EQ(flags::ParseByteSize("2GiB", "x"), int64_t{2} << 30);
  EXPECT_EQ(flags::ParseByteSize("1.5 GB", "x"), 1500000000);
  EXPECT_EQ(flags::ParseByteSize("800MiB", "x"), int64_t{800} << 20);
  EXPECT_EQ(flags::ParseByteSize("12KB", "x"), 12000);
  for (const char* bad : {"", "GB", "2 GiBs", "-1GB", "0", "0.1B", "1e30TB", "12 parsecs"}) {
    try {
      flags::ParseByteSize(bad, "--memory-budget");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--memory-budget '"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2GiB"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace axle
