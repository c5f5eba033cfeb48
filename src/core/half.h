// bf16 and f16 <-> f32 conversions. Narrowing rounds to nearest, ties to even; NaN stays NaN
// (quiet), infinities and signed zeros are kept, f16 overflow goes to infinity and f16 subnormals
// are produced exactly. The functions are core/half_functions.inc's, the text the generated
// kernels embed too, so the interpreter and the compiled code round a half the same way.
#pragma once

#include <cstdint>
#include <cstring>

namespace axle {

#include "core/half_functions.inc"

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

inline float BF16ToFloat(uint16_t h) { return ax_bf16_to_f32(h); }
inline uint16_t FloatToBF16(float f) { return ax_f32_to_bf16(f); }
inline float F16ToFloat(uint16_t h) { return ax_f16_to_f32(h); }
inline uint16_t FloatToF16(float f) { return ax_f32_to_f16(f); }

}  // namespace axle
