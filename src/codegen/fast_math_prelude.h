// The generated source's fast-math prelude (EmitOptions::exact_math = false): the vectorisable
// f32 functions the emitter calls (ax_fexp, ax_flog, ax_flog1p, ax_ftanh, ax_flogistic, ax_ferf,
// ax_fsin, ax_fcos), as C++ text. Private to emit_cpp.cc.
#pragma once

namespace axle::codegen {

// exact_math = false: f32 exp, log, log1p, tanh, logistic and erf as branch-free (select-based)
// polynomial approximations that GCC vectorises inside the element loop. Accuracy (max ulp against
// the correctly rounded result) is in docs/compiler.md and tests/codegen/fast_math_test.cc.
inline constexpr const char* kFastMathPrelude = R"AX(
// Fast f32 math (exact_math = false): branch-free, select-based, so the loops vectorise.
namespace {
inline float ax_bits_f(int32_t b) { return __builtin_bit_cast(float, b); }
inline int32_t ax_f_bits(float f) { return __builtin_bit_cast(int32_t, f); }
// a * b + c rounded once: one instruction where the host has FMA (-march=native), else the C
// library's fmaf (same bits, slower): results do not depend on the host's ISA.
inline float ax_fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
// The 8 double lanes of a fast-math row sum: lanes[k] += x[k] for the floats x[0, 8), as one
// convert and one add of GCC's vector extensions (written element by element, GCC's SLP
// vectoriser scalarised it: extracts, cvtss2sd and addsd, half of a softmax row sum's time).
typedef double ax_v8d __attribute__((vector_size(64)));
typedef float ax_v8f __attribute__((vector_size(32)));
inline void ax_lanes_add(ax_v8d& lanes, const float* x) {
  ax_v8f v;
  __builtin_memcpy(&v, x, sizeof(v));
  lanes = lanes + __builtin_convertvector(v, ax_v8d);
}
// exp: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite), e^r by a degree-6 polynomial, times 2^n applied
// as two factors so results in the subnormal range and at the overflow edge stay exact.
inline float ax_fexp(float x) {
  // Below -104 e^x rounds to +0 (it is under half the smallest subnormal, e^-103.97): such x
  // (a causal mask's -inf, half of every attention row) is computed as 0 and the result
  // selected, because the polynomial's product would underflow through subnormals, which cost
  // a microcode assist per element (an attention softmax's row sums ran 4x slower).
  const bool zero = x < -104.0f;
  float xc = x > 100.0f ? 100.0f : x;
  xc = zero ? 0.0f : xc;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = ax_fmaf(xc, 1.44269504088896341f, shifter);
  const float n = t - shifter;
  const int32_t ni = ax_f_bits(t) - ax_f_bits(shifter);
  float r = ax_fmaf(n, -0.693359375f, xc);
  r = ax_fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = ax_fmaf(p, r, 1.3981999507e-3f);
  p = ax_fmaf(p, r, 8.3334519073e-3f);
  p = ax_fmaf(p, r, 4.1665795894e-2f);
  p = ax_fmaf(p, r, 1.6666665459e-1f);
  p = ax_fmaf(p, r, 5.0000001201e-1f);
  p = ax_fmaf(p, r * r, r) + 1.0f;
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float y = (p * ax_bits_f((n1 + 127) << 23)) * ax_bits_f((n2 + 127) << 23);
  return x != x ? x : zero ? 0.0f : y;
}
// log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by a polynomial in m - 1.
inline float ax_flog(float x) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;  // scale subnormals by 2^23
  const int32_t bits = ax_f_bits(xs);
  int32_t e = ((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0);
  float m = ax_bits_f((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const bool lo = m < 0.707106781186547524f;
  e = lo ? e - 1 : e;
  m = lo ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = ax_fmaf(y, m, -1.1514610310e-1f);
  y = ax_fmaf(y, m, 1.1676998740e-1f);
  y = ax_fmaf(y, m, -1.2420140846e-1f);
  y = ax_fmaf(y, m, 1.4249322787e-1f);
  y = ax_fmaf(y, m, -1.6668057665e-1f);
  y = ax_fmaf(y, m, 2.0000714765e-1f);
  y = ax_fmaf(y, m, -2.4999993993e-1f);
  y = ax_fmaf(y, m, 3.3333331174e-1f);
  y = y * m * z;
  const float fe = static_cast<float>(e);
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = m + y;
  r = r + fe * 0.693359375f;
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  return x != x ? x : r;
}
// log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded (the rounding error corrected).
inline float ax_flog1p(float x) {
  const float u = 1.0f + x;
  const float l = ax_flog(u);
  const float c = (x - (u - 1.0f)) / u;
  float r = (u > 0.0f && u < __builtin_inff()) ? l + c : l;
  r = u == 1.0f ? x : r;
  return x != x ? x : r;
}
// tanh: odd polynomial for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1); the sign copied from x.
inline float ax_ftanh(float x) {
  const float a = std::fabs(x);
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = ax_fmaf(p, z, 2.06390887954e-2f);
  p = ax_fmaf(p, z, -5.37397155531e-2f);
  p = ax_fmaf(p, z, 1.33314422036e-1f);
  p = ax_fmaf(p, z, -3.33332819422e-1f);
  const float small = a + a * (z * p);
  const float big = 1.0f - 2.0f / (ax_fexp(a + a) + 1.0f);
  const float r = a < 0.625f ? small : big;
  return x != x ? x : std::copysign(r, x);
}
// logistic: e = e^{-|x|} (never overflows), 1 / (1 + e) for x >= 0, e / (1 + e) below.
inline float ax_flogistic(float x) {
  const float e = ax_fexp(-std::fabs(x));
  const float d = 1.0f + e;
  return x >= 0.0f ? 1.0f / d : (x != x ? x : e / d);
}
// sin/cos: n = rint(x 2/pi), r = x - n pi/2 in double (Cody-Waite: pi/2 in parts of 26, 26 and
// 53 bits, so n P1 and n P2 are exact and r is accurate for |x| < 2^27 pi/2 ~ 2.1e8); sin and
// cos of r in [-pi/4, pi/4] by Taylor polynomials in double; the quadrant (n + shift) mod 4
// picks and signs one of them; one rounding to float. Beyond ~2.1e8 the reduction is inexact:
// the result is clamped to [-1, 1] but has no accuracy.
inline float ax_fsc(float xf, double shift) {
  const double x = xf;
  const double n = __builtin_rint(x * 0.63661977236758134308);
  double r = x - n * 0x1.921fb58p+0;
  r = r - n * -0x1.dde974p-27;
  r = r - n * 0x1.1a62633145c07p-54;
  double q = n + shift;
  q = q - 4.0 * __builtin_floor(q * 0.25);
  const double z = r * r;
  double sp = -2.5052108385441720e-08;
  sp = sp * z + 2.7557319223985891e-06;
  sp = sp * z - 1.9841269841269841e-04;
  sp = sp * z + 8.3333333333333333e-03;
  sp = sp * z - 1.6666666666666666e-01;
  const double sr = r + r * (z * sp);
  double cp = 2.0876756987868099e-09;
  cp = cp * z - 2.7557319223985891e-07;
  cp = cp * z + 2.4801587301587302e-05;
  cp = cp * z - 1.3888888888888889e-03;
  cp = cp * z + 4.1666666666666664e-02;
  cp = cp * z - 0.5;
  const double cr = 1.0 + z * cp;
  double v = (q == 1.0 || q == 3.0) ? cr : sr;
  v = q >= 2.0 ? -v : v;
  v = v > 1.0 ? 1.0 : v;
  v = v < -1.0 ? -1.0 : v;
  return static_cast<float>(v);
}
inline float ax_fsin(float x) { return x == 0.0f ? x : ax_fsc(x, 0.0); }  // keeps -0
inline float ax_fcos(float x) { return ax_fsc(x, 1.0); }
// erf: x P(x^2) / Q(x^2) on [-4, 4] (Eigen's rational approximation); +-1 beyond.
inline float ax_ferf(float x) {
  float c = x > 4.0f ? 4.0f : x;
  c = c < -4.0f ? -4.0f : c;
  const float z = c * c;
  float p = -2.72614225801306e-10f;
  p = ax_fmaf(p, z, 2.77068142495902e-08f);
  p = ax_fmaf(p, z, -2.10102402082508e-06f);
  p = ax_fmaf(p, z, -5.69250639462346e-05f);
  p = ax_fmaf(p, z, -7.34990630326855e-04f);
  p = ax_fmaf(p, z, -2.95459980854025e-03f);
  p = ax_fmaf(p, z, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = ax_fmaf(q, z, -2.13374055278905e-04f);
  q = ax_fmaf(q, z, -1.68282697438203e-03f);
  q = ax_fmaf(q, z, -7.37332916720468e-03f);
  q = ax_fmaf(q, z, -1.42647390514189e-02f);
  return c * (p / q);
}
}  // namespace
)AX";

}  // namespace axle::codegen
