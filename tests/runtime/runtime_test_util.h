// Helpers shared by the runtime tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/flags.h"
#include "ir/literal.h"

namespace axle::runtime::testutil {

inline std::vector<BufferPtr> Buffers(const std::vector<ir::Literal>& lits) {
  std::vector<BufferPtr> out;
  for (const ir::Literal& l : lits) out.push_back(std::make_shared<ir::Literal>(l));
  return out;
}

// Runs `m` on backend `name` with copies of `args`.
inline std::vector<BufferPtr> Run(std::string_view name, const ir::Module& m,
                                  const std::vector<ir::Literal>& args) {
  return GetBackend(name).Compile(m)->Execute(Buffers(args));
}

// Deterministic values in [-1, 1) (splitmix64).
inline std::vector<double> RandomValues(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = static_cast<double>(z >> 11) / 9007199254740992.0 * 2 - 1;
  }
  return v;
}

// Scoped flags::fast_math: the bitwise comparisons with the interpreter need exact math (the
// default is fast math).
struct FastMathScope {
  bool saved = flags::fast_math();
  explicit FastMathScope(bool on) { flags::set_fast_math(on); }
  ~FastMathScope() { flags::set_fast_math(saved); }
};

inline ir::Literal RandomLiteral(DType t, Shape shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) n *= d;
  return ir::Literal::FromDoubles(t, std::move(shape), RandomValues(n, seed));
}

// Bitwise equality of type and contents, except that float NaNs match whatever their payload:
// IEEE leaves the payload of a NaN result with two NaN operands to the implementation (x86 keeps
// the first operand's, and a compiler may swap the operands of a commutative add or mul), so the
// interpreter and a backend compiled differently may return different NaNs for the same program.
inline bool SameBits(const ir::Literal& want, const ir::Literal& got) {
  if (want == got) return true;
  if (want.type() != got.type() || !IsFloat(want.dtype())) return false;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    if (ir::ElementBits(want, i) == ir::ElementBits(got, i)) continue;
    if (!(std::isnan(want.GetDouble(i)) && std::isnan(got.GetDouble(i)))) return false;
  }
  return true;
}

// True when `got` matches `want` within `rel` of max(|want|, scale) elementwise (NaN matches NaN,
// infinities must match exactly); `where` receives the first mismatch.
// With `nonfinite_ok`, an element where either side is inf or NaN matches anything (and counts
// in *nonfinite): overflow of products or partial sums depends on the summation order.
inline bool Near(const ir::Literal& want, const ir::Literal& got, double rel, double scale,
                 std::string* where, bool nonfinite_ok = false, int64_t* nonfinite = nullptr) {
  if (want.type() != got.type()) {
    *where = "type " + got.type().ToString() + " vs " + want.type().ToString();
    return false;
  }
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double a = want.GetDouble(i), b = got.GetDouble(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (nonfinite_ok && !(std::isfinite(a) && std::isfinite(b))) {
      if (nonfinite) ++*nonfinite;
      continue;
    }
    if (std::isfinite(a) && std::isfinite(b) &&
        std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), scale}))
      continue;
    *where = "element " + std::to_string(i) + ": want " + std::to_string(a) + " got " +
             std::to_string(b);
    return false;
  }
  return true;
}

}  // namespace axle::runtime::testutil
