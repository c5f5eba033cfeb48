// bf16 and f16 <-> f32 conversions. Narrowing rounds to nearest, ties to even; NaN stays NaN
// (quiet), infinities and signed zeros are kept, f16 overflow goes to infinity and f16 subnormals
// are produced exactly.
#pragma once

#include <cstdint>
#include <cstring>

namespace axle {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float BF16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToBF16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float F16ToFloat(uint16_t h);
uint16_t FloatToF16(float f);

}  // namespace axle
