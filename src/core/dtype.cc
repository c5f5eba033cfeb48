#include "core/dtype.h"

namespace axle {

std::string_view DTypeName(DType t) {
  switch (t) {
#define AXLE_DTYPE_NAME(e, name, ctype, size) \
  case DType::e:                              \
    return name;
    AXLE_DTYPES(AXLE_DTYPE_NAME)
#undef AXLE_DTYPE_NAME
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
#define AXLE_DTYPE_PARSE(e, text, ctype, size) \
  if (name == text) return DType::e;
  AXLE_DTYPES(AXLE_DTYPE_PARSE)
#undef AXLE_DTYPE_PARSE
  return std::nullopt;
}

int64_t DTypeSize(DType t) {
  switch (t) {
#define AXLE_DTYPE_SIZE(e, name, ctype, size) \
  case DType::e:                              \
    return size;
    AXLE_DTYPES(AXLE_DTYPE_SIZE)
#undef AXLE_DTYPE_SIZE
  }
  return 0;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}
bool IsInteger(DType t) {
  return t == DType::kI8 || t == DType::kI32 || t == DType::kI64 || t == DType::kU8 ||
         t == DType::kU32;
}
bool IsSigned(DType t) {
  return IsFloat(t) || t == DType::kI8 || t == DType::kI32 || t == DType::kI64;
}
bool IsUnsigned(DType t) { return t == DType::kU8 || t == DType::kU32; }

}  // namespace axle
