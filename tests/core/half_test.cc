// bf16 / f16 conversions: round to nearest even, specials, subnormals; checked against values
// derived by hand from the IEEE formats.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace axle {
namespace {

TEST(BF16, RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = BF16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(f))));
      continue;
    }
    EXPECT_EQ(FloatToBF16(f), h) << std::hex << h;
  }
}

TEST(BF16, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(FloatToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FloatToBF16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  // The largest finite float rounds to infinity in bf16.
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBF16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(std::nanf("")))));
}

TEST(F16, RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(f))));
      continue;
    }
    EXPECT_EQ(FloatToF16(f), h) << std::hex << h;
  }
}

TEST(F16, KnownValues) {
  EXPECT_EQ(FloatToF16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(FloatToF16(65519.0f), 0x7bff);         // below the halfway point to 65536
  EXPECT_EQ(FloatToF16(65520.0f), 0x7c00);         // halfway: ties to even = infinity
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to it: ties to even (0)
  EXPECT_EQ(FloatToF16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: ties to even (2)
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToF16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(F16ToFloat(0x3555), 0.333251953125f);
}

}  // namespace
}  // namespace axle
