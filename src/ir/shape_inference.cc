#include "ir/shape_inference.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <set>

#include "core/error.h"

namespace axle::ir {
namespace {

using Types = std::vector<TensorType>;
using Operands = std::span<const TensorType>;
using Declared = std::span<const TensorType>;

// ---------------------------------------------------------------------------------------------
// Small checks shared by the rules. Each throws with the broken rule in words.

std::string DimsText(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

void CheckDim(int64_t dim, int64_t rank, std::string_view what) {
  if (dim < 0 || dim >= rank) Fail("{} {} is out of range for rank {}", what, dim, rank);
}

// Checks that `dims` are distinct and each in [0, rank).
void CheckDimList(const std::vector<int64_t>& dims, int64_t rank, std::string_view what) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    CheckDim(d, rank, fmt::format("{} entry", what));
    if (!seen.insert(d).second) Fail("{} {} repeat dimension {}", what, DimsText(dims), d);
  }
}

void CheckListSize(const std::vector<int64_t>& v, int64_t rank, std::string_view what) {
  if (static_cast<int64_t>(v.size()) != rank)
    Fail("{} {} has {} entries, expected one per dimension ({})", what, DimsText(v), v.size(), rank);
}

enum class DTypeClass { kAny, kNumeric, kFloat, kIntOrBool, kInteger };

bool InClass(DType t, DTypeClass c) {
  switch (c) {
    case DTypeClass::kAny: return true;
    case DTypeClass::kNumeric: return IsNumeric(t);
    case DTypeClass::kFloat: return IsFloat(t);
    case DTypeClass::kIntOrBool: return IsInteger(t) || IsBool(t);
    case DTypeClass::kInteger: return IsInteger(t);
  }
  return false;
}

std::string_view ClassName(DTypeClass c) {
  switch (c) {
    case DTypeClass::kAny: return "any type";
    case DTypeClass::kNumeric: return "a numeric type (integer or float)";
    case DTypeClass::kFloat: return "a float type (f32, f64, bf16, f16)";
    case DTypeClass::kIntOrBool: return "an integer or bool type";
    case DTypeClass::kInteger: return "an integer type";
  }
  return "";
}

void CheckDType(DType t, DTypeClass c, std::string_view what) {
  if (!InClass(t, c)) Fail("{} has element type {}, expected {}", what, DTypeName(t), ClassName(c));
}

DTypeClass ReduceKindClass(ReduceKind k) {
  return (k == ReduceKind::kAnd || k == ReduceKind::kOr) ? DTypeClass::kIntOrBool
                                                          : DTypeClass::kNumeric;
}

const TensorType& OneDeclared(Declared declared) {
  if (declared.size() != 1) Fail("expected 1 declared result type, got {}", declared.size());
  if (!declared[0].shape.IsValid()) Fail("declared result type {} is invalid", declared[0].ToString());
  return declared[0];
}

Shape DropDims(const Shape& s, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < s.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) out.push_back(s.dim(i));
  return Shape(std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Sources.

Types ConstantRule(Operands, const Attrs& a, Declared, const ShapeContext&) {
  return {std::get<ConstantAttrs>(a).value.type()};
}

Types ReplicaIdRule(Operands, const Attrs&, Declared, const ShapeContext&) {
  return {TensorType(DType::kI32, Shape({}))};
}

Types IotaRule(Operands, const Attrs& a, Declared declared, const ShapeContext&) {
  const TensorType& t = OneDeclared(declared);
  CheckDType(t.dtype, DTypeClass::kNumeric, "iota result");
  CheckDim(std::get<IotaAttrs>(a).dim, t.rank(), "iota dim");
  return {t};
}

Types ParameterRule(Operands, const Attrs& a, Declared declared, const ShapeContext&) {
  if (std::get<ParameterAttrs>(a).index < 0) Fail("parameter index must be >= 0");
  return {OneDeclared(declared)};
}

// ---------------------------------------------------------------------------------------------
// Elementwise.

template <DTypeClass kClass>
Types UnaryRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  CheckDType(ops[0].dtype, kClass, "operand");
  return {ops[0]};
}

Types IsFiniteRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  CheckDType(ops[0].dtype, DTypeClass::kFloat, "operand");
  return {TensorType(DType::kBool, ops[0].shape)};
}

void CheckSameTypes(Operands ops) {
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i] != ops[0])
      Fail("operand types differ ({} vs {}); elementwise operands must have one type "
           "(insert broadcast_in_dim or convert)",
           ops[0].ToString(), ops[i].ToString());
}

template <DTypeClass kClass>
Types BinaryRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  CheckSameTypes(ops);
  CheckDType(ops[0].dtype, kClass, "operand");
  return {ops[0]};
}

Types CompareRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  CheckSameTypes(ops);
  return {TensorType(DType::kBool, ops[0].shape)};
}

Types SelectRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  if (ops[0].dtype != DType::kBool) Fail("predicate has type {}, expected bool", ops[0].ToString());
  if (ops[1] != ops[2]) Fail("branches differ: {} vs {}", ops[1].ToString(), ops[2].ToString());
  if (ops[0].rank() != 0 && ops[0].shape != ops[1].shape)
    Fail("predicate shape {} must be a scalar or equal the branches' shape {}",
         ops[0].shape.ToString(), ops[1].shape.ToString());
  return {ops[1]};
}

Types ClampRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  const TensorType& x = ops[1];
  CheckDType(x.dtype, DTypeClass::kNumeric, "operand");
  for (int i : {0, 2}) {
    const char* what = i == 0 ? "min" : "max";
    if (ops[i].dtype != x.dtype) Fail("{} has type {}, operand {}", what, ops[i].ToString(), x.ToString());
    if (ops[i].rank() != 0 && ops[i].shape != x.shape)
      Fail("{} shape {} must be a scalar or equal the operand shape {}", what,
           ops[i].shape.ToString(), x.shape.ToString());
  }
  return {x};
}

Types ConvertRule(Operands ops, const Attrs&, Declared declared, const ShapeContext&) {
  const TensorType& t = OneDeclared(declared);
  if (t.shape != ops[0].shape)
    Fail("result shape {} differs from operand shape {}", t.shape.ToString(), ops[0].shape.ToString());
  return {t};
}

Types BitcastConvertRule(Operands ops, const Attrs& a, Declared declared, const ShapeContext& c) {
  const TensorType t = ConvertRule(ops, a, declared, c)[0];  // a copy: the vector is a temporary
  if (IsBool(t.dtype) || IsBool(ops[0].dtype)) Fail("bitcast_convert does not take bool");
  if (DTypeSize(t.dtype) != DTypeSize(ops[0].dtype))
    Fail("bit widths differ: {} is {} bits, {} is {} bits", DTypeName(ops[0].dtype),
         BitWidth(ops[0].dtype), DTypeName(t.dtype), BitWidth(t.dtype));
  return {t};
}

// ---------------------------------------------------------------------------------------------
// Data movement.

Types BroadcastInDimRule(Operands ops, const Attrs& a, Declared declared, const ShapeContext&) {
  const TensorType& t = OneDeclared(declared);
  const auto& dims = std::get<BroadcastInDimAttrs>(a).dims;
  if (t.dtype != ops[0].dtype)
    Fail("result type {} must keep the operand's element type {}", t.ToString(), DTypeName(ops[0].dtype));
  CheckListSize(dims, ops[0].rank(), "dims");
  for (size_t i = 0; i < dims.size(); ++i) {
    CheckDim(dims[i], t.rank(), "dims entry");
    if (i > 0 && dims[i] <= dims[i - 1]) Fail("dims {} must be strictly increasing", DimsText(dims));
    int64_t from = ops[0].shape.dim(static_cast<int64_t>(i));
    if (from != 1 && from != t.shape.dim(dims[i]))
      Fail("operand dim {} (size {}) cannot broadcast to result dim {} (size {})", i, from, dims[i],
           t.shape.dim(dims[i]));
  }
  return {t};
}

Types ReshapeRule(Operands ops, const Attrs&, Declared declared, const ShapeContext&) {
  const TensorType& t = OneDeclared(declared);
  if (t.dtype != ops[0].dtype)
    Fail("result type {} must keep the operand's element type {}", t.ToString(), DTypeName(ops[0].dtype));
  if (t.NumElements() != ops[0].NumElements())
    Fail("element counts differ: {} has {}, {} has {}", ops[0].ToString(), ops[0].NumElements(),
         t.ToString(), t.NumElements());
  return {t};
}

Types TransposeRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& perm = std::get<TransposeAttrs>(a).perm;
  CheckListSize(perm, ops[0].rank(), "perm");
  CheckDimList(perm, ops[0].rank(), "perm");
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(ops[0].shape.dim(p));
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types SliceRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& s = std::get<SliceAttrs>(a);
  const int64_t rank = ops[0].rank();
  CheckListSize(s.start, rank, "start");
  CheckListSize(s.limit, rank, "limit");
  CheckListSize(s.strides, rank, "strides");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = ops[0].shape.dim(i);
    if (s.start[i] < 0 || s.start[i] > s.limit[i] || s.limit[i] > d)
      Fail("dim {}: need 0 <= start ({}) <= limit ({}) <= size ({})", i, s.start[i], s.limit[i], d);
    if (s.strides[i] < 1) Fail("dim {}: stride {} must be >= 1", i, s.strides[i]);
    dims.push_back((s.limit[i] - s.start[i] + s.strides[i] - 1) / s.strides[i]);
  }
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

void CheckStartIndices(Operands indices, int64_t rank) {
  if (static_cast<int64_t>(indices.size()) != rank)
    Fail("{} start indices given, expected one scalar per dimension ({})", indices.size(), rank);
  for (const TensorType& t : indices)
    if (t.rank() != 0 || !IsInteger(t.dtype))
      Fail("start index has type {}, expected an integer scalar", t.ToString());
}

Types DynamicSliceRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& sizes = std::get<DynamicSliceAttrs>(a).sizes;
  CheckStartIndices(ops.subspan(1), ops[0].rank());
  CheckListSize(sizes, ops[0].rank(), "sizes");
  for (int64_t i = 0; i < ops[0].rank(); ++i)
    if (sizes[i] < 0 || sizes[i] > ops[0].shape.dim(i))
      Fail("sizes[{}] = {} must be in [0, {}]", i, sizes[i], ops[0].shape.dim(i));
  return {TensorType(ops[0].dtype, Shape(sizes))};
}

Types DynamicUpdateSliceRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  const TensorType& x = ops[0];
  const TensorType& u = ops[1];
  CheckStartIndices(ops.subspan(2), x.rank());
  if (u.dtype != x.dtype || u.rank() != x.rank())
    Fail("update {} must have the operand's element type and rank ({})", u.ToString(), x.ToString());
  for (int64_t i = 0; i < x.rank(); ++i)
    if (u.shape.dim(i) > x.shape.dim(i))
      Fail("update dim {} (size {}) exceeds the operand's ({})", i, u.shape.dim(i), x.shape.dim(i));
  return {x};
}

Types PadRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& p = std::get<PadAttrs>(a);
  const int64_t rank = ops[0].rank();
  if (ops[1].rank() != 0 || ops[1].dtype != ops[0].dtype)
    Fail("padding value {} must be a scalar of the operand's element type", ops[1].ToString());
  CheckListSize(p.low, rank, "low");
  CheckListSize(p.high, rank, "high");
  CheckListSize(p.interior, rank, "interior");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = ops[0].shape.dim(i);
    if (p.interior[i] < 0) Fail("interior[{}] = {} must be >= 0", i, p.interior[i]);
    const int64_t bound = int64_t{1} << 40;  // keeps the arithmetic below far from overflow
    if (std::abs(p.low[i]) > bound || std::abs(p.high[i]) > bound || p.interior[i] > bound)
      Fail("dim {}: padding amounts must be below 2^40", i);
    const int64_t size = p.low[i] + p.high[i] + d + std::max<int64_t>(d - 1, 0) * p.interior[i];
    if (size < 0) Fail("dim {}: padded size {} is negative", i, size);
    dims.push_back(size);
  }
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types ConcatenateRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const int64_t dim = std::get<ConcatenateAttrs>(a).dim;
  CheckDim(dim, ops[0].rank(), "dim");
  std::vector<int64_t> dims = ops[0].shape.dims();
  dims[dim] = 0;
  for (const TensorType& t : ops) {
    bool ok = t.dtype == ops[0].dtype && t.rank() == ops[0].rank();
    for (int64_t i = 0; ok && i < t.rank(); ++i) ok = i == dim || t.shape.dim(i) == dims[i];
    if (!ok) Fail("{} and {} differ outside dim {}", ops[0].ToString(), t.ToString(), dim);
    dims[dim] += t.shape.dim(dim);
  }
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types ReverseRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  CheckDimList(std::get<ReverseAttrs>(a).dims, ops[0].rank(), "dims");
  return {ops[0]};
}

// Checks gather-style operand/indices agreement and returns the gathered shape.
Shape GatherShape(const TensorType& x, const TensorType& idx, const GatherAttrs& g) {
  if (!IsInteger(idx.dtype)) Fail("indices have type {}, expected integers", idx.ToString());
  if (g.batch_dims < 0 || g.batch_dims > idx.rank())
    Fail("batch_dims {} must be in [0, indices rank {}]", g.batch_dims, idx.rank());
  if (g.axis < g.batch_dims || g.axis >= x.rank())
    Fail("axis {} must be in [batch_dims {}, operand rank {})", g.axis, g.batch_dims, x.rank());
  std::vector<int64_t> dims(x.shape.dims().begin(), x.shape.dims().begin() + g.axis);
  for (int64_t i = 0; i < g.batch_dims; ++i)
    if (x.shape.dim(i) != idx.shape.dim(i))
      Fail("batch dim {} differs: operand {} vs indices {}", i, x.ToString(), idx.ToString());
  dims.insert(dims.end(), idx.shape.dims().begin() + g.batch_dims, idx.shape.dims().end());
  dims.insert(dims.end(), x.shape.dims().begin() + g.axis + 1, x.shape.dims().end());
  if (!CheckedNumElements(dims)) Fail("gathered shape overflows");
  return Shape(std::move(dims));
}

Types GatherRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  return {TensorType(ops[0].dtype, GatherShape(ops[0], ops[1], std::get<GatherAttrs>(a)))};
}

Types ScatterAddRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  CheckDType(ops[0].dtype, DTypeClass::kNumeric, "operand");
  TensorType expected(ops[0].dtype, GatherShape(ops[0], ops[1], std::get<GatherAttrs>(a)));
  if (ops[2] != expected)
    Fail("updates have type {}, expected {} (the shape gather would produce)", ops[2].ToString(),
         expected.ToString());
  return {ops[0]};
}

// ---------------------------------------------------------------------------------------------
// Reductions, scans, sort.

Types ReduceRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& r = std::get<ReduceAttrs>(a);
  CheckDType(ops[0].dtype, ReduceKindClass(r.kind), fmt::format("operand of a {} reduction", EnumName(r.kind)));
  CheckDimList(r.dims, ops[0].rank(), "dims");
  return {TensorType(ops[0].dtype, DropDims(ops[0].shape, r.dims))};
}

Types ArgReduceRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  const auto& r = std::get<ArgReduceAttrs>(a);
  CheckDType(ops[0].dtype, DTypeClass::kNumeric, "operand");
  CheckDim(r.dim, ops[0].rank(), "dim");
  if (ops[0].shape.dim(r.dim) == 0 && DropDims(ops[0].shape, {r.dim}).NumElements() > 0)
    Fail("dim {} has size 0: there is no extreme element to index", r.dim);
  if (r.index_dtype != DType::kI32 && r.index_dtype != DType::kI64)
    Fail("index_dtype {} must be i32 or i64", DTypeName(r.index_dtype));
  return {TensorType(r.index_dtype, DropDims(ops[0].shape, {r.dim}))};
}

Types CumsumRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  CheckDType(ops[0].dtype, DTypeClass::kNumeric, "operand");
  CheckDim(std::get<CumsumAttrs>(a).dim, ops[0].rank(), "dim");
  return {ops[0]};
}

Types SortRule(Operands ops, const Attrs& a, Declared, const ShapeContext&) {
  CheckDType(ops[0].dtype, DTypeClass::kNumeric, "sort key (operand 0)");
  CheckDim(std::get<SortAttrs>(a).dim, ops[0].rank(), "dim");
  for (const TensorType& t : ops)
    if (t.shape != ops[0].shape)
      Fail("operand shapes differ: {} vs {}", ops[0].ToString(), t.ToString());
  return Types(ops.begin(), ops.end());
}

// ---------------------------------------------------------------------------------------------
// Contraction.

Types DotGeneralRule(Operands ops, const Attrs& a, Declared declared, const ShapeContext&) {
  const auto& d = std::get<DotGeneralAttrs>(a);
  const TensorType& l = ops[0];
  const TensorType& r = ops[1];
  if (l.dtype != r.dtype) Fail("operand element types differ: {} vs {}", l.ToString(), r.ToString());
  CheckDType(l.dtype, DTypeClass::kNumeric, "operand");
  if (d.lhs_batch.size() != d.rhs_batch.size())
    Fail("lhs_batch {} and rhs_batch {} differ in length", DimsText(d.lhs_batch), DimsText(d.rhs_batch));
  if (d.lhs_contracting.size() != d.rhs_contracting.size())
    Fail("lhs_contracting {} and rhs_contracting {} differ in length", DimsText(d.lhs_contracting),
         DimsText(d.rhs_contracting));
  std::vector<int64_t> lhs_used = d.lhs_batch, rhs_used = d.rhs_batch;
  lhs_used.insert(lhs_used.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  rhs_used.insert(rhs_used.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  CheckDimList(lhs_used, l.rank(), "lhs batch+contracting dims");
  CheckDimList(rhs_used, r.rank(), "rhs batch+contracting dims");
  for (size_t i = 0; i < lhs_used.size(); ++i)
    if (l.shape.dim(lhs_used[i]) != r.shape.dim(rhs_used[i]))
      Fail("lhs dim {} (size {}) and rhs dim {} (size {}) must match", lhs_used[i],
           l.shape.dim(lhs_used[i]), rhs_used[i], r.shape.dim(rhs_used[i]));
  std::vector<int64_t> dims;
  for (int64_t b : d.lhs_batch) dims.push_back(l.shape.dim(b));
  const Shape lhs_free = DropDims(l.shape, lhs_used);
  const Shape rhs_free = DropDims(r.shape, rhs_used);
  dims.insert(dims.end(), lhs_free.dims().begin(), lhs_free.dims().end());
  dims.insert(dims.end(), rhs_free.dims().begin(), rhs_free.dims().end());
  if (!CheckedNumElements(dims)) Fail("result shape overflows");
  // The result has the operands' dtype, or f32 for bf16 / f16 operands when the node says so
  // (XLA's preferred_element_type: the products' sums come out unrounded; the partitioner's
  // partial products of halves, Note [Partial products of halves] in spmd/partitioner.cc).
  DType result = l.dtype;
  if (declared.size() == 1 && declared[0].dtype != l.dtype) {
    if (declared[0].dtype != DType::kF32 || (l.dtype != DType::kBF16 && l.dtype != DType::kF16))
      Fail("result dtype {} must be the operands' {} (or f32 for bf16 and f16 operands)",
           DTypeName(declared[0].dtype), DTypeName(l.dtype));
    result = DType::kF32;
  }
  return {TensorType(result, Shape(std::move(dims)))};
}

// ---------------------------------------------------------------------------------------------
// Random numbers.

Types RngBitGeneratorRule(Operands ops, const Attrs&, Declared declared, const ShapeContext&) {
  if (ops[0] != TensorType(DType::kU32, Shape{2})) Fail("key has type {}, expected u32[2]", ops[0].ToString());
  if (ops[1] != TensorType(DType::kU32, Shape{4}))
    Fail("counter has type {}, expected u32[4]", ops[1].ToString());
  const TensorType& t = OneDeclared(declared);
  if (t.dtype != DType::kU32) Fail("result type {} must be u32", t.ToString());
  return {t};
}

// ---------------------------------------------------------------------------------------------
// Collectives.

Types AllReduceRule(Operands ops, const Attrs& a, Declared, const ShapeContext& ctx) {
  const auto& r = std::get<AllReduceAttrs>(a);
  CheckDType(ops[0].dtype, ReduceKindClass(r.kind), "operand");
  ReplicaGroupSize(r.groups, ctx.num_replicas);
  return {ops[0]};
}

Types AllGatherRule(Operands ops, const Attrs& a, Declared, const ShapeContext& ctx) {
  const auto& g = std::get<AllGatherAttrs>(a);
  CheckDim(g.dim, ops[0].rank(), "dim");
  const int64_t n = ReplicaGroupSize(g.groups, ctx.num_replicas);
  std::vector<int64_t> dims = ops[0].shape.dims();
  if (dims[g.dim] > INT64_MAX / n) Fail("gathered size overflows");
  dims[g.dim] *= n;
  if (!CheckedNumElements(dims)) Fail("gathered shape overflows");
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types ReduceScatterRule(Operands ops, const Attrs& a, Declared, const ShapeContext& ctx) {
  const auto& r = std::get<ReduceScatterAttrs>(a);
  CheckDType(ops[0].dtype, ReduceKindClass(r.kind), "operand");
  CheckDim(r.dim, ops[0].rank(), "dim");
  const int64_t n = ReplicaGroupSize(r.groups, ctx.num_replicas);
  std::vector<int64_t> dims = ops[0].shape.dims();
  if (dims[r.dim] % n != 0) Fail("dim {} (size {}) is not divisible by the group size {}", r.dim, dims[r.dim], n);
  dims[r.dim] /= n;
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types AllToAllRule(Operands ops, const Attrs& a, Declared, const ShapeContext& ctx) {
  const auto& r = std::get<AllToAllAttrs>(a);
  CheckDim(r.split_dim, ops[0].rank(), "split_dim");
  CheckDim(r.concat_dim, ops[0].rank(), "concat_dim");
  const int64_t n = ReplicaGroupSize(r.groups, ctx.num_replicas);
  std::vector<int64_t> dims = ops[0].shape.dims();
  if (dims[r.split_dim] % n != 0)
    Fail("split_dim {} (size {}) is not divisible by the group size {}", r.split_dim, dims[r.split_dim], n);
  dims[r.split_dim] /= n;
  if (dims[r.concat_dim] > INT64_MAX / n) Fail("concatenated size overflows");
  dims[r.concat_dim] *= n;
  return {TensorType(ops[0].dtype, Shape(std::move(dims)))};
}

Types CollectivePermuteRule(Operands ops, const Attrs& a, Declared, const ShapeContext& ctx) {
  std::set<int64_t> sources, targets;
  for (const auto& pair : std::get<CollectivePermuteAttrs>(a).pairs) {
    if (pair.size() != 2) Fail("each entry of pairs must be [source, target]");
    for (int64_t id : pair)
      if (id < 0 || id >= ctx.num_replicas)
        Fail("replica {} is out of range for {} replicas", id, ctx.num_replicas);
    if (!sources.insert(pair[0]).second) Fail("replica {} is a source twice", pair[0]);
    if (!targets.insert(pair[1]).second) Fail("replica {} is a target twice", pair[1]);
  }
  return {ops[0]};
}

// ---------------------------------------------------------------------------------------------
// Escapes.

Types CustomCallRule(Operands, const Attrs& a, Declared declared, const ShapeContext&) {
  if (std::get<CustomCallAttrs>(a).target.empty()) Fail("custom_call needs a non-empty target");
  for (const TensorType& t : declared)
    if (!t.shape.IsValid()) Fail("declared result type {} is invalid", t.ToString());
  return Types(declared.begin(), declared.end());
}

// The node's own rule; that its types are those of the function it calls is checked by the
// verifier, which sees the module (Verify).
Types FusionRule(Operands, const Attrs& a, Declared declared, const ShapeContext&) {
  const auto& f = std::get<FusionAttrs>(a);
  if (f.kind != "loop" && f.kind != "reduce" && f.kind != "rows")
    Fail("fusion kind '{}' is not one of \"loop\", \"reduce\", \"rows\"", f.kind);
  if (f.calls.empty()) Fail("fusion needs the name of the function it calls (calls=\"...\")");
  if (declared.empty()) Fail("fusion declares no result");
  for (const TensorType& t : declared)
    if (!t.shape.IsValid()) Fail("declared result type {} is invalid", t.ToString());
  return Types(declared.begin(), declared.end());
}

Types OptimizationBarrierRule(Operands ops, const Attrs&, Declared, const ShapeContext&) {
  return Types(ops.begin(), ops.end());
}

// ---------------------------------------------------------------------------------------------
// The table.

std::array<ShapeRule, kNumOps> BuildTable() {
  std::array<ShapeRule, kNumOps> t{};
  auto set = [&](OpKind k, ShapeRule r) { t[static_cast<size_t>(k)] = r; };
  set(OpKind::kConstant, ConstantRule);
  set(OpKind::kIota, IotaRule);
  set(OpKind::kReplicaId, ReplicaIdRule);
  set(OpKind::kParameter, ParameterRule);
  for (OpKind k : {OpKind::kNeg, OpKind::kAbs, OpKind::kSign})
    set(k, UnaryRule<DTypeClass::kNumeric>);
  for (OpKind k : {OpKind::kExp, OpKind::kLog, OpKind::kLog1p, OpKind::kTanh, OpKind::kLogistic,
                   OpKind::kSqrt, OpKind::kRsqrt, OpKind::kSin, OpKind::kCos, OpKind::kErf,
                   OpKind::kFloor, OpKind::kCeil})
    set(k, UnaryRule<DTypeClass::kFloat>);
  set(OpKind::kNot, UnaryRule<DTypeClass::kIntOrBool>);
  set(OpKind::kIsFinite, IsFiniteRule);
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kRem,
                   OpKind::kPow, OpKind::kMax, OpKind::kMin})
    set(k, BinaryRule<DTypeClass::kNumeric>);
  for (OpKind k : {OpKind::kAnd, OpKind::kOr, OpKind::kXor}) set(k, BinaryRule<DTypeClass::kIntOrBool>);
  set(OpKind::kAtan2, BinaryRule<DTypeClass::kFloat>);
  set(OpKind::kCompare, CompareRule);
  set(OpKind::kSelect, SelectRule);
  set(OpKind::kClamp, ClampRule);
  set(OpKind::kConvert, ConvertRule);
  set(OpKind::kBitcastConvert, BitcastConvertRule);
  set(OpKind::kBroadcastInDim, BroadcastInDimRule);
  set(OpKind::kReshape, ReshapeRule);
  set(OpKind::kTranspose, TransposeRule);
  set(OpKind::kSlice, SliceRule);
  set(OpKind::kDynamicSlice, DynamicSliceRule);
  set(OpKind::kDynamicUpdateSlice, DynamicUpdateSliceRule);
  set(OpKind::kPad, PadRule);
  set(OpKind::kConcatenate, ConcatenateRule);
  set(OpKind::kReverse, ReverseRule);
  set(OpKind::kGather, GatherRule);
  set(OpKind::kScatterAdd, ScatterAddRule);
  set(OpKind::kReduce, ReduceRule);
  set(OpKind::kArgMax, ArgReduceRule);
  set(OpKind::kArgMin, ArgReduceRule);
  set(OpKind::kCumsum, CumsumRule);
  set(OpKind::kSort, SortRule);
  set(OpKind::kDotGeneral, DotGeneralRule);
  set(OpKind::kRngBitGenerator, RngBitGeneratorRule);
  set(OpKind::kAllReduce, AllReduceRule);
  set(OpKind::kAllGather, AllGatherRule);
  set(OpKind::kReduceScatter, ReduceScatterRule);
  set(OpKind::kAllToAll, AllToAllRule);
  set(OpKind::kCollectivePermute, CollectivePermuteRule);
  set(OpKind::kCustomCall, CustomCallRule);
  set(OpKind::kOptimizationBarrier, OptimizationBarrierRule);
  set(OpKind::kFusion, FusionRule);
  return t;
}

}  // namespace

ShapeRule GetShapeRule(OpKind op) {
  static const std::array<ShapeRule, kNumOps> table = BuildTable();
  return table[static_cast<size_t>(op)];
}

std::vector<int64_t> DotFreeDims(int64_t rank, const std::vector<int64_t>& batch,
                                 const std::vector<int64_t>& contracting) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end())
      free.push_back(d);
  return free;
}

int64_t ReplicaGroupSize(const ReplicaGroups& groups, int64_t num_replicas) {
  if (num_replicas < 1) Fail("the module's num_replicas {} must be >= 1", num_replicas);
  if (groups.empty()) return num_replicas;
  std::vector<bool> seen(static_cast<size_t>(std::min<int64_t>(num_replicas, 1 << 20)), false);
  const size_t size = groups[0].size();
  int64_t count = 0;
  for (const auto& g : groups) {
    if (g.empty() || g.size() != size) Fail("replica groups must be non-empty and of equal size");
    for (int64_t id : g) {
      if (id < 0 || id >= static_cast<int64_t>(seen.size()))
        Fail("replica {} is out of range for {} replicas", id, num_replicas);
      if (seen[static_cast<size_t>(id)]) Fail("replica {} appears in two groups", id);
      seen[static_cast<size_t>(id)] = true;
      ++count;
    }
  }
  if (count != num_replicas)
    Fail("replica groups cover {} of the module's {} replicas; they must cover each once", count,
         num_replicas);
  return static_cast<int64_t>(size);
}

std::vector<TensorType> InferResultTypes(OpKind op, std::span<const TensorType> operands,
                                         const Attrs& attrs, std::span<const TensorType> declared,
                                         const ShapeContext& ctx) {
  const OpInfo& info = GetOpInfo(op);
  const int n = static_cast<int>(operands.size());
  if (n < info.min_operands || (info.max_operands != kVariadic && n > info.max_operands)) {
    if (info.min_operands == info.max_operands) Fail("takes {} operands, got {}", info.min_operands, n);
    if (info.max_operands == kVariadic) Fail("takes at least {} operands, got {}", info.min_operands, n);
    Fail("takes {} to {} operands, got {}", info.min_operands, info.max_operands, n);
  }
  if (attrs.index() != info.attrs_index) Fail("holds the wrong attribute struct");
  for (const TensorType& t : operands)
    if (!t.shape.IsValid()) Fail("operand type {} is invalid", t.ToString());
  ShapeRule rule = GetShapeRule(op);
  AXLE_CHECK(rule != nullptr, "op {} has no shape rule", info.name);
  std::vector<TensorType> result = rule(operands, attrs, declared, ctx);
  if (info.num_results != kVariadic && static_cast<int>(result.size()) != info.num_results)
    Fail("yields {} results, expected {}", result.size(), info.num_results);
  return result;
}

}  // namespace axle::ir
