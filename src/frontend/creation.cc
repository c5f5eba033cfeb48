// Creating tensors: constants in the trace (zeros, full, arange), seeded random numbers
// (Philox-4x32-10 via rng_bit_generator) and host data (from_literal: a transfer).
#include <fmt/format.h>

#include <cmath>

#include "frontend/lazy.h"
#include "frontend/ops_internal.h"

namespace axle {
using detail::B;
using detail::Cast;
using detail::Full;
using detail::MakePending;
using detail::ScalarValue;
using ir::OpKind;
using ir::Value;

// ---- Creation --------------------------------------------------------------------------------
namespace {
SourceLoc ToLoc(const std::source_location& l) {
  return SourceLoc{l.file_name(), static_cast<int>(l.line()), 0};
}
}  // namespace

Tensor full(Dims shape, double value, DType dtype, std::source_location loc) {
  for (int64_t s : shape)
    if (s < 0) Fail("full: negative size in [{}]", fmt::join(shape, ","));
  B(ToLoc(loc));
  return MakePending(Full(shape, dtype, value), false);
}
Tensor zeros(Dims shape, DType dtype, std::source_location loc) {
  return full(std::move(shape), 0.0, dtype, loc);
}
Tensor ones(Dims shape, DType dtype, std::source_location loc) {
  return full(std::move(shape), 1.0, dtype, loc);
}
Tensor zeros_like(const Tensor& t) { return full(t.sizes(), 0.0, t.dtype()); }
Tensor ones_like(const Tensor& t) { return full(t.sizes(), 1.0, t.dtype()); }
Tensor full_like(const Tensor& t, double v) { return full(t.sizes(), v, t.dtype()); }
Tensor scalar_tensor(double value, DType dtype) { return MakePending(ScalarValue(dtype, value), false); }

Tensor arange(double start, double end, double step, DType dtype, std::source_location loc) {
  if (step == 0) Fail("arange: step must be nonzero");
  const double n = std::ceil((end - start) / step);
  const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  B(ToLoc(loc));
  if (count == 0) return zeros({0}, dtype, loc);
  Value* i = B().Iota(ir::TensorType(IsFloat(dtype) ? DType::kF64 : DType::kI64, Shape{count}), 0);
  const DType ct = IsFloat(dtype) ? DType::kF64 : DType::kI64;
  Value* v = B().Add(B().Mul(i, Full(Dims{count}, ct, step)), Full(Dims{count}, ct, start));
  return MakePending(Cast(v, dtype), false);
}
Tensor arange(int64_t end, DType dtype, std::source_location loc) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype, loc);
}

namespace {
// u32 random bits of `shape` from Philox keyed by `seed`, counter `counter`.
Value* RandomBits(const Dims& shape, uint64_t seed, Value* counter) {
  Value* key = B().Constant(ir::Literal::FromVector<uint32_t>(
      DType::kU32, Shape{2},
      {static_cast<uint32_t>(seed & 0xffffffffu), static_cast<uint32_t>(seed >> 32)}));
  return B().Build1(OpKind::kRngBitGenerator, {key, counter}, ir::NoAttrs{},
                    {ir::TensorType(DType::kU32, Shape(shape))});
}
Value* ZeroCounter() {
  return B().Constant(ir::Literal(ir::TensorType(DType::kU32, Shape{4})));
}
// Uniform [0, 1) floats from the top 24 bits (exact in f32).
Value* UniformFromBits(Value* bits, DType dtype) {
  const Dims& s = bits->shape().dims();
  Value* top = B().Build1(OpKind::kDiv, {bits, Full(s, DType::kU32, 256.0)});
  Value* f = B().Mul(B().Convert(top, DType::kF32), Full(s, DType::kF32, 1.0 / 16777216.0));
  return Cast(f, dtype);
}
}  // namespace

Tensor rand(Dims shape, uint64_t seed, DType dtype, std::source_location loc) {
  if (!IsFloat(dtype)) Fail("rand: dtype must be floating, got {}", DTypeName(dtype));
  B(ToLoc(loc));
  if (Shape(shape).NumElements() == 0) return zeros(shape, dtype, loc);
  return MakePending(UniformFromBits(RandomBits(shape, seed, ZeroCounter()), dtype), false);
}

Tensor randn(Dims shape, uint64_t seed, DType dtype, std::source_location loc) {
  if (!IsFloat(dtype)) Fail("randn: dtype must be floating, got {}", DTypeName(dtype));
  B(ToLoc(loc));
  if (Shape(shape).NumElements() == 0) return zeros(shape, dtype, loc);
  // Box-Muller on two independent uniforms: z = sqrt(-2 ln(1 - u1)) * cos(2 pi u2).
  Dims two = shape;
  two.insert(two.begin(), 2);
  Value* u = UniformFromBits(RandomBits(two, seed, ZeroCounter()), DType::kF32);
  Tensor uu = MakePending(u, false);
  Tensor u1 = uu.select(0, 0), u2 = uu.select(0, 1);
  Tensor z = ((1.0 - u1).log() * -2.0).sqrt() * (u2 * (2.0 * M_PI)).cos();
  return z.to(dtype);
}

Tensor from_literal(ir::Literal value, std::source_location loc) {
  const int64_t bytes = static_cast<int64_t>(value.bytes().size());
  Tensor t = detail::MakeMaterialized(std::make_shared<ir::Literal>(std::move(value)),
                                      fmt::format("from_literal at {}:{}", loc.file_name(), loc.line()));
  detail::CountTransferToDevice(bytes);
  return t;
}

}  // namespace axle
