// The helpers of ops_internal.h: dims, dtype promotion, broadcasting, and the operand caches
// (Note [Operand caches] in lazy.h) that tensor.cc, composite.cc and autograd.cc build with.
#include "frontend/ops_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "frontend/lazy.h"

namespace axle {
using ir::Value;

namespace detail {

int64_t NormDim(int64_t d, int64_t rank, std::string_view op) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    Fail("{}: dim {} is out of range for a tensor of rank {} (expected [{}, {}])", op, d, rank, -r,
         r - 1);
  return d < 0 ? d + r : d;
}

Dims NormDims(const Dims& dims, int64_t rank, std::string_view op) {
  Dims out;
  for (int64_t d : dims) {
    const int64_t n = NormDim(d, rank, op);
    if (std::find(out.begin(), out.end(), n) != out.end())
      Fail("{}: dim {} appears twice in [{}]", op, d, fmt::join(dims, ", "));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int Rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kU8: return 1;
    case DType::kI8: return 2;
    case DType::kU32: return 3;
    case DType::kI32: return 4;
    case DType::kI64: return 5;
    case DType::kBF16: return 6;
    case DType::kF16: return 7;
    case DType::kF32: return 8;
    case DType::kF64: return 9;
  }
  return 0;
}

DType Promote(DType a, DType b) {
  if (a == b) return a;
  // bf16 and f16 together promote to f32, as in PyTorch.
  if ((a == DType::kBF16 && b == DType::kF16) || (a == DType::kF16 && b == DType::kBF16))
    return DType::kF32;
  return Rank(a) >= Rank(b) ? a : b;
}

Value* Cast(Value* v, DType to) { return v->dtype() == to ? v : B().Convert(v, to); }

Value* BroadcastTo(Value* v, DimsView shape) {
  const DimsView from = v->shape().dims();
  if (from == shape) return v;
  const int64_t off = static_cast<int64_t>(shape.size()) - static_cast<int64_t>(from.size());
  AXLE_CHECK(off >= 0, "cannot broadcast {} to [{}]", v->type().ToString(), fmt::join(shape, ","));
  // Size-1 dims that must stretch are dropped first (broadcast_in_dim maps dims 1:1 or from 1).
  Dims dims;
  for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i) {
    const int64_t target = shape[static_cast<size_t>(i + off)];
    if (from[static_cast<size_t>(i)] != target && from[static_cast<size_t>(i)] != 1)
      Fail("cannot broadcast {} to [{}]: dim {} is {} but the target has {}", v->type().ToString(),
           fmt::join(shape, ","), i, from[static_cast<size_t>(i)], target);
    dims.push_back(i + off);
  }
  return B().BroadcastInDim(v, Shape(shape), dims);
}

Value* BroadcastOperand(Value* v, DimsView shape) {
  if (v->shape().dims() == shape) return v;
  std::vector<Trace::CachedBroadcast>& cached = CurrentTrace().broadcast_operands[v];
  for (const Trace::CachedBroadcast& c : cached)
    if (c.shape.dims() == shape) return c.value;
  Value* b = BroadcastTo(v, shape);
  cached.push_back({Shape(shape), b});
  return b;
}

Value* ScalarValue(DType dtype, double value) { return B().Scalar(dtype, value); }

Value* Full(DimsView shape, DType dtype, double value) {
  Value* s = ScalarValue(dtype, value);
  return shape.empty() ? s : B().BroadcastInDim(s, Shape(shape), {});
}

Value* FullOperand(DimsView shape, DType dtype, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  std::vector<Trace::CachedFull>& cached = CurrentTrace().full_operands[bits];
  for (const Trace::CachedFull& c : cached)
    if (c.dtype == dtype && c.shape.dims() == shape) return c.value;
  Value* f = Full(shape, dtype, value);
  cached.push_back({dtype, Shape(shape), f});
  return f;
}

Value* KeepDims(Value* reduced, DimsView in_shape, const Dims& dims) {
  Dims kept = in_shape;
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  return B().Reshape(reduced, Shape(kept));
}

Dims BroadcastShapes(DimsView a, DimsView b) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      Fail("shapes [{}] and [{}] are not broadcastable: dim {} is {} vs {}", fmt::join(a, ","),
           fmt::join(b, ","), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace detail

}  // namespace axle
