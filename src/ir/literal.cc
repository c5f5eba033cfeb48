#include "ir/literal.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>

#include "core/half.h"

namespace axle::ir {
namespace detail {

// Note [Aligning by hand] (literal.h). malloc returns at least 16-byte aligned blocks, so the
// aligned address is 16 to 64 bytes past the block's, and the word below it is free to hold it.
void* AllocateAligned64(size_t bytes) {
  if (bytes > std::numeric_limits<size_t>::max() - 64) throw std::bad_alloc();
  void* block = std::malloc(bytes + 64);
  if (block == nullptr) throw std::bad_alloc();
  const auto aligned = (reinterpret_cast<uintptr_t>(block) + 64) & ~uintptr_t{63};
  reinterpret_cast<void**>(aligned)[-1] = block;
  return reinterpret_cast<void*>(aligned);
}

void FreeAligned64(void* p) noexcept {
  if (p != nullptr) std::free(static_cast<void**>(p)[-1]);
}

}  // namespace detail

namespace {

template <typename I>
I SaturatingCast(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

template <typename I>
I SaturatingCastInt(int64_t v) {
  if constexpr (std::is_same_v<I, int64_t>) {
    return v;
  } else {
    if (v < static_cast<int64_t>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (v > static_cast<int64_t>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return static_cast<I>(v);
  }
}

// `v` rounded to float toward zero, with the last bit set when inexact (round to odd), so that a
// second rounding to bf16/f16 equals one rounding of `v` (see Note [Single rounding] in
// interpreter_elementwise.cc).
float RoundToOddFloat(double v) {
  if (std::isnan(v) || std::isinf(v)) return static_cast<float>(v);
  constexpr float kMax = std::numeric_limits<float>::max();
  if (std::fabs(v) > static_cast<double>(kMax)) return v > 0 ? kMax : -kMax;  // odd: rounds up to inf
  float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return BitsToFloat(FloatBits(f) | 1u);
}

}  // namespace

Literal::Literal(TensorType type) : Literal(std::move(type), NoInit{}) {
  if (!bytes_.empty()) std::memset(bytes_.data(), 0, bytes_.size());  // data() is null when empty
}

Literal::Literal(TensorType type, NoInit) : type_(std::move(type)) {
  auto n = CheckedNumElements(type_.shape.dims());
  if (!n || *n > INT64_MAX / 8) Fail("invalid tensor type {}", type_.ToString());
  bytes_.Allocate(static_cast<size_t>(*n * DTypeSize(type_.dtype)));
}

Literal Literal::Borrowing(TensorType type, uint8_t* data) {
  Literal lit;
  auto n = CheckedNumElements(type.shape.dims());
  if (!n || *n > INT64_MAX / 8) Fail("invalid tensor type {}", type.ToString());
  AXLE_CHECK(reinterpret_cast<uintptr_t>(data) % 64 == 0, "Literal::Borrowing: {} at an unaligned address",
             type.ToString());
  lit.type_ = std::move(type);
  lit.bytes_.Borrow(data, static_cast<size_t>(*n * DTypeSize(lit.type_.dtype)));
  return lit;
}

Literal Literal::Uninitialized(TensorType type) { return Literal(std::move(type), NoInit{}); }

Literal Literal::FromDoubles(DType dtype, Shape shape, const std::vector<double>& values) {
  Literal lit(TensorType(dtype, std::move(shape)));
  AXLE_CHECK(static_cast<int64_t>(values.size()) == lit.NumElements(), "FromDoubles: {} values for {}",
             values.size(), lit.type().ToString());
  for (size_t i = 0; i < values.size(); ++i) lit.SetDouble(static_cast<int64_t>(i), values[i]);
  return lit;
}

Literal Literal::Splat(TensorType type, double value) {
  Literal lit(std::move(type));
  for (int64_t i = 0; i < lit.NumElements(); ++i) lit.SetDouble(i, value);
  return lit;
}

double Literal::GetDouble(int64_t i) const {
  switch (dtype()) {
    case DType::kF32: return data<float>()[i];
    case DType::kF64: return data<double>()[i];
    case DType::kBF16: return BF16ToFloat(data<uint16_t>()[i]);
    case DType::kF16: return F16ToFloat(data<uint16_t>()[i]);
    case DType::kI8: return data<int8_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

int64_t Literal::GetInt64(int64_t i) const {
  switch (dtype()) {
    case DType::kI8: return data<int8_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI64: return data<int64_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] ? 1 : 0;
    default: return SaturatingCast<int64_t>(GetDouble(i));
  }
}

void Literal::SetDouble(int64_t i, double v) {
  switch (dtype()) {
    case DType::kF32: mutable_data<float>()[i] = static_cast<float>(v); return;
    case DType::kF64: mutable_data<double>()[i] = v; return;
    case DType::kBF16: mutable_data<uint16_t>()[i] = FloatToBF16(RoundToOddFloat(v)); return;
    case DType::kF16: mutable_data<uint16_t>()[i] = FloatToF16(RoundToOddFloat(v)); return;
    case DType::kI8: mutable_data<int8_t>()[i] = SaturatingCast<int8_t>(v); return;
    case DType::kI32: mutable_data<int32_t>()[i] = SaturatingCast<int32_t>(v); return;
    case DType::kI64: mutable_data<int64_t>()[i] = SaturatingCast<int64_t>(v); return;
    case DType::kU8: mutable_data<uint8_t>()[i] = SaturatingCast<uint8_t>(v); return;
    case DType::kU32: mutable_data<uint32_t>()[i] = SaturatingCast<uint32_t>(v); return;
    case DType::kBool: mutable_data<uint8_t>()[i] = v != 0.0 ? 1 : 0; return;
  }
}

void Literal::SetInt64(int64_t i, int64_t v) {
  switch (dtype()) {
    case DType::kI8: mutable_data<int8_t>()[i] = SaturatingCastInt<int8_t>(v); return;
    case DType::kI32: mutable_data<int32_t>()[i] = SaturatingCastInt<int32_t>(v); return;
    case DType::kI64: mutable_data<int64_t>()[i] = v; return;
    case DType::kU8: mutable_data<uint8_t>()[i] = SaturatingCastInt<uint8_t>(v); return;
    case DType::kU32: mutable_data<uint32_t>()[i] = SaturatingCastInt<uint32_t>(v); return;
    case DType::kBool: mutable_data<uint8_t>()[i] = v != 0 ? 1 : 0; return;
    default: SetDouble(i, static_cast<double>(v)); return;
  }
}

bool Literal::IsSplat() const {
  const int64_t n = NumElements();
  if (n == 0) return false;
  const size_t w = static_cast<size_t>(DTypeSize(dtype()));
  for (int64_t i = 1; i < n; ++i) {
    if (std::memcmp(bytes_.data(), bytes_.data() + i * w, w) != 0) return false;
  }
  return true;
}

uint64_t ElementBits(const Literal& lit, int64_t i) {
  const size_t w = static_cast<size_t>(DTypeSize(lit.dtype()));
  uint64_t bits = 0;
  std::memcpy(&bits, lit.bytes().data() + static_cast<size_t>(i) * w, w);  // little-endian host
  return bits;
}

void SetElementBits(Literal& lit, int64_t i, uint64_t bits) {
  const size_t w = static_cast<size_t>(DTypeSize(lit.dtype()));
  std::memcpy(lit.mutable_bytes().data() + static_cast<size_t>(i) * w, &bits, w);
}

std::string FormatElement(const Literal& lit, int64_t i) {
  const DType t = lit.dtype();
  if (t == DType::kBool) return lit.data<uint8_t>()[i] ? "true" : "false";
  if (IsInteger(t)) return fmt::format("{}", lit.GetInt64(i));
  double v = lit.GetDouble(i);
  if (std::isnan(v)) {
    // Note [NaN payloads]: the default quiet NaN prints as `nan`; any other NaN bit pattern
    // (a sign bit, a payload, as 0*inf gives on x86) prints its storage bits, `nan.0xffc00000`,
    // so printing and parsing keep every bit (bitcast_convert can observe them).
    const uint64_t bits = ElementBits(lit, i);
    Literal canonical(TensorType(t, Shape{}));
    canonical.SetDouble(0, std::numeric_limits<double>::quiet_NaN());
    if (bits == ElementBits(canonical, 0)) return "nan";
    return fmt::format("nan.0x{:x}", bits);
  }
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip text: f64 as double, the narrower floats as float (exact for all).
  if (t == DType::kF64) return fmt::format("{}", v);
  return fmt::format("{}", static_cast<float>(v));
}

std::string Literal::ToString(int64_t max_elements) const {
  std::string out = type_.ToString() + " [";
  const int64_t n = NumElements();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    if (i) out += ", ";
    out += FormatElement(*this, i);
  }
  if (n > max_elements) out += ", ...";
  return out + "]";
}

}  // namespace axle::ir
