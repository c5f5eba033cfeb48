// Element types of Axle tensors.
//
// Every tensor in the IR, the runtime and the frontend has one of these element types. bf16 and
// f16 are stored as their 16-bit patterns (see core/half.h for the conversions).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace axle {

// The X-macro list of element types: (enumerator, text name, C++ storage type, byte size).
#define AXLE_DTYPES(X)                \
  X(kF32, "f32", float, 4)            \
  X(kF64, "f64", double, 8)           \
  X(kBF16, "bf16", uint16_t, 2)       \
  X(kF16, "f16", uint16_t, 2)         \
  X(kI8, "i8", int8_t, 1)             \
  X(kI32, "i32", int32_t, 4)          \
  X(kI64, "i64", int64_t, 8)          \
  X(kU8, "u8", uint8_t, 1)            \
  X(kU32, "u32", uint32_t, 4)         \
  X(kBool, "bool", bool, 1)

enum class DType : uint8_t {
#define AXLE_DTYPE_ENUM(e, name, ctype, size) e,
  AXLE_DTYPES(AXLE_DTYPE_ENUM)
#undef AXLE_DTYPE_ENUM
};

inline constexpr int kNumDTypes = 10;

// "f32", "bf16", ... as written in the text format.
std::string_view DTypeName(DType t);
// The inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> ParseDType(std::string_view name);
// Bytes per element.
int64_t DTypeSize(DType t);

bool IsFloat(DType t);      // f32, f64, bf16, f16
bool IsInteger(DType t);    // i8, i32, i64, u8, u32 (not bool)
bool IsSigned(DType t);     // i8, i32, i64 and the floats
bool IsUnsigned(DType t);   // u8, u32
inline bool IsBool(DType t) { return t == DType::kBool; }
// Integer or float: the types arithmetic is defined on.
inline bool IsNumeric(DType t) { return IsFloat(t) || IsInteger(t); }
// Bit width of the element (1 byte for bool).
inline int BitWidth(DType t) { return static_cast<int>(DTypeSize(t) * 8); }

}  // namespace axle
