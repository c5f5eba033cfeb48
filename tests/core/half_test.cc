// bf16 / f16 conversions: round to nearest even, specials, subnormals; checked against values
// derived by hand from the IEEE formats.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// The select-based conversions (core/half_functions.inc) against references written another way,
// on every 13th f32 bit pattern (330M, both signs, every exponent) plus every pattern near the
// f16 subnormal and overflow boundaries.
uint16_t ReferenceBF16(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((FloatBits(f) >> 16) | 0x40);
  const uint32_t u = FloatBits(f);
  const uint32_t kept = u >> 16, dropped = u & 0xffffu;
  // Nearest; a tie goes to the even kept pattern.
  return static_cast<uint16_t>(dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u)) ? kept + 1 : kept);
}

TEST(BF16, MatchesALongHandRounding) {
  for (uint64_t u = 0; u <= 0xffffffffu; u += 13) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    ASSERT_EQ(FloatToBF16(f), ReferenceBF16(f)) << std::hex << u;
  }
}

#if defined(__x86_64__)
// vcvtps2ph with round-to-nearest-even (F16C): the hardware's answer, NaNs quieted the same way.
__attribute__((target("f16c"))) uint16_t HardwareF16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HardwareF16ToFloat(uint16_t h) { return _cvtsh_ss(h); }

TEST(F16, MatchesTheF16CInstruction) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  auto check = [](uint32_t u) {
    const float f = BitsToFloat(u);
    ASSERT_EQ(FloatToF16(f), HardwareF16(f)) << std::hex << u;
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 13) check(static_cast<uint32_t>(u));
  for (uint32_t u = 0x33000000u; u < 0x38900000u; ++u) check(u);  // subnormals to the first normals
  for (uint32_t u = 0x477f0000u; u < 0x47810000u; ++u) check(u);  // around 65520
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = F16ToFloat(static_cast<uint16_t>(h)), b = HardwareF16ToFloat(static_cast<uint16_t>(h));
    // The instruction quiets a signaling NaN as it widens; Axle keeps the bits (both are NaN).
    const uint32_t quiet = std::isnan(a) ? 0x00400000u : 0u;
    ASSERT_EQ(FloatBits(a) | quiet, FloatBits(b)) << std::hex << h;
  }
}
#endif

TEST(RoundToOdd, IsTruncationWithAStickyBit) {
  // Random doubles of every magnitude, and the specials: the result is v truncated to f32 with
  // its last bit set when inexact, the largest f32 beyond range.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (int i = 0; i < 2000000; ++i) {
    // Half anywhere, half with an exponent around f32's range (subnormals to overflow).
    uint64_t bits = next();
    if (i % 2) bits = (bits & 0x800fffffffffffffull) | ((uint64_t{1023 - 155} + next() % 290) << 52);
    double v;
    std::memcpy(&v, &bits, 8);
    const float r = ax_f64_to_f32_odd(v);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(r));
      continue;
    }
    if (std::isinf(v)) {
      EXPECT_EQ(r, static_cast<float>(v));
      continue;
    }
    if (std::fabs(v) > std::numeric_limits<float>::max()) {
      ASSERT_EQ(r, std::copysign(std::numeric_limits<float>::max(), static_cast<float>(v))) << v;
      continue;
    }
    float t = static_cast<float>(v);
    if (std::fabs(static_cast<double>(t)) > std::fabs(v)) t = std::nextafter(t, 0.0f);
    const uint32_t expect = static_cast<double>(t) == v ? FloatBits(t) : FloatBits(t) | 1u;
    ASSERT_EQ(FloatBits(r), expect) << v;
  }
}

}  // namespace
}  // namespace axle
