#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace axle {

std::optional<int64_t> CheckedNumElements(DimsView dims) {
  // Overflow by the multiply's flag, not a division per dim: shapes are counted on every traced
  // op and by the per-node kernels.
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

int64_t Shape::NumElements() const { return CheckedNumElements(dims()).value_or(-1); }

bool Shape::IsValid() const { return CheckedNumElements(dims()).has_value(); }

std::vector<int64_t> Shape::Strides() const {
  std::vector<int64_t> strides(rank_, 1);
  for (int64_t i = rank() - 2; i >= 0; --i) strides[i] = strides[i + 1] * dim(i + 1);
  return strides;
}

std::string Shape::ToString() const { return fmt::format("[{}]", fmt::join(dims(), ",")); }

}  // namespace axle
