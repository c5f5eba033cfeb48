// The per-op generators of RandomModule: one function per op (or family of ops) that draws valid
// operands and attributes. GetOpGenerator at the end maps every op of ops.def to its generator;
// RandomModule fails loudly when an op lacks one.
#include <algorithm>
#include <array>

#include "ir/shape_inference.h"
#include "testing/random_module_internal.h"

namespace axle::testing::internal {
namespace {

using ir::OpKind;
using ir::TensorType;
using ir::Value;

bool AnyDType(DType) { return true; }
bool NumericDType(DType t) { return IsNumeric(t); }
bool NotBool(DType t) { return !IsBool(t); }
// The element types a reduction with `kind` accepts (and/or: integers and bool; else numeric).
DTypePred ReduceDTypes(ir::ReduceKind kind) {
  if (kind == ir::ReduceKind::kAnd || kind == ir::ReduceKind::kOr)
    return [](DType t) { return IsInteger(t) || IsBool(t); };
  return NumericDType;
}
ir::ReduceKind RandomReduceKind(Rng& rng) {
  return static_cast<ir::ReduceKind>(
      rng.Uniform(0, ir::EnumNames<ir::ReduceKind>::kNames.size() - 1));
}

// A random subset of 0..rank-1 in random order.
std::vector<int64_t> RandomDimSubset(Rng& rng, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d : rng.Permutation(rank))
    if (rng.Coin()) dims.push_back(d);
  return dims;
}

Shape WithDim(const Shape& s, int64_t i, int64_t size) {
  std::vector<int64_t> dims = s.dims();
  dims[static_cast<size_t>(i)] = size;
  return Shape(std::move(dims));
}

// ---------------------------------------------------------------------------------------------
// Sources.

bool GenConstant(Generator& g, OpKind) {
  std::optional<DType> t = g.PickDType(AnyDType);
  if (!t) return false;
  ir::Literal lit(TensorType(*t, g.RandomShape(0)));
  FillRandom(lit, g.rng(), ElementMix{});
  g.Build(OpKind::kConstant, {}, ir::ConstantAttrs{std::move(lit)});
  return true;
}

bool GenIota(Generator& g, OpKind) {
  std::optional<DType> t = g.PickDType(NumericDType);
  if (!t || g.options().max_rank < 1) return false;
  TensorType type(*t, g.RandomShape(1));
  g.Build(OpKind::kIota, {}, ir::IotaAttrs{g.rng().Uniform(0, type.rank() - 1)}, {type});
  return true;
}

bool GenReplicaId(Generator& g, OpKind) {
  g.Build(OpKind::kReplicaId, {}, ir::NoAttrs{}, {TensorType(DType::kI32, Shape({}))});
  return true;
}

bool GenParameter(Generator& g, OpKind) {
  std::optional<DType> t = g.PickDType(AnyDType);
  if (!t) return false;
  // Fresh makes a parameter while there is room, else a constant or iota.
  g.Fresh(TensorType(*t, g.RandomShape(0)));
  return true;
}

// ---------------------------------------------------------------------------------------------
// Elementwise.

// Whether elementwise `op` accepts scalar operands of type `t` (asks the shape rule once per op
// and dtype, so the generator follows the rules rather than restating them).
bool ElementwiseAccepts(OpKind op, DType t) {
  static const auto table = [] {
    std::array<std::array<bool, kNumDTypes>, ir::kNumOps> accepts{};
    for (const ir::OpInfo& info : ir::AllOps()) {
      if (!info.Has(ir::kElementwise)) continue;
      for (int d = 0; d < kNumDTypes; ++d) {
        std::vector<TensorType> operands(static_cast<size_t>(info.min_operands),
                                         TensorType(static_cast<DType>(d), Shape{}));
        try {
          ir::InferResultTypes(info.kind, operands, ir::DefaultAttrs(info.kind), {}, {});
          accepts[static_cast<size_t>(info.kind)][static_cast<size_t>(d)] = true;
        } catch (const Error&) {
        }
      }
    }
    return accepts;
  }();
  return table[static_cast<size_t>(op)][static_cast<size_t>(t)];
}

// Unary and binary elementwise ops, compare included: operands of one type.
bool GenElementwise(Generator& g, OpKind op) {
  Value* x = g.Operand([op](DType t) { return ElementwiseAccepts(op, t); });
  if (x == nullptr) return false;
  std::vector<Value*> operands = {x};
  for (int i = 1; i < ir::GetOpInfo(op).min_operands; ++i) operands.push_back(g.OfType(x->type()));
  ir::Attrs attrs = ir::DefaultAttrs(op);
  if (auto* c = std::get_if<ir::CompareAttrs>(&attrs))
    c->dir = static_cast<ir::CompareDir>(g.rng().Uniform(0, 5));
  g.Build(op, std::move(operands), std::move(attrs));
  return true;
}

bool GenSelect(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  const Shape pred_shape = g.rng().Percent(30) ? Shape{} : x->shape();
  Value* pred = g.OfType(TensorType(DType::kBool, pred_shape));
  g.Build(OpKind::kSelect, {pred, x, g.OfType(x->type())});
  return true;
}

bool GenClamp(Generator& g, OpKind) {
  Value* x = g.Operand(NumericDType);
  if (x == nullptr) return false;
  auto bound = [&] {
    return g.OfType(TensorType(x->dtype(), g.rng().Percent(40) ? Shape{} : x->shape()));
  };
  Value* lo = bound();
  Value* hi = bound();
  g.Build(OpKind::kClamp, {lo, x, hi});
  return true;
}

bool GenConvert(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  std::optional<DType> to = g.PickDType(AnyDType);
  if (x == nullptr || !to) return false;
  g.Build(OpKind::kConvert, {x}, ir::NoAttrs{}, {TensorType(*to, x->shape())});
  return true;
}

bool GenBitcastConvert(Generator& g, OpKind) {
  Value* x = g.Operand(NotBool);
  if (x == nullptr) return false;
  const int64_t size = DTypeSize(x->dtype());
  DType to =
      g.PickDType([&](DType t) { return !IsBool(t) && DTypeSize(t) == size; }).value_or(x->dtype());
  g.Build(OpKind::kBitcastConvert, {x}, ir::NoAttrs{}, {TensorType(to, x->shape())});
  return true;
}

// ---------------------------------------------------------------------------------------------
// Data movement.

bool GenBroadcastInDim(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  Rng& rng = g.rng();
  const int64_t rank = rng.Uniform(x->type().rank(), g.options().max_rank);
  std::vector<int64_t> dims = rng.Permutation(rank);
  dims.resize(static_cast<size_t>(x->type().rank()));
  std::sort(dims.begin(), dims.end());
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) shape.push_back(g.RandomDim());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t from = x->shape().dim(static_cast<int64_t>(i));
    if (from != 1 || rng.Coin()) shape[static_cast<size_t>(dims[i])] = from;
  }
  g.Build(OpKind::kBroadcastInDim, {x}, ir::BroadcastInDimAttrs{std::move(dims)},
          {TensorType(x->dtype(), Shape(std::move(shape)))});
  return true;
}

// A random shape with `n` elements within the generator's bounds, or nullopt.
std::optional<Shape> ShapeWithElements(Generator& g, int64_t n) {
  Rng& rng = g.rng();
  const int64_t max_rank = g.options().max_rank;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int64_t rank = rng.Uniform(n == 1 ? 0 : 1, std::max<int64_t>(max_rank, 1));
    if (rank > max_rank) return std::nullopt;
    std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
    if (n == 0) {
      for (int64_t& d : dims) d = rng.Uniform(0, g.DimLimit());
      dims[static_cast<size_t>(rng.Uniform(0, rank - 1))] = 0;
    } else {
      int64_t rest = n;  // distribute the prime factors of n over the dims
      for (int64_t p = 2; rest > 1; ++p)
        for (; rest % p == 0; rest /= p) dims[static_cast<size_t>(rng.Uniform(0, rank - 1))] *= p;
    }
    if (std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return d <= g.DimLimit(); }))
      return Shape(std::move(dims));
  }
  return std::nullopt;
}

bool GenReshape(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  const Shape shape = ShapeWithElements(g, x->type().NumElements()).value_or(x->shape());
  g.Build(OpKind::kReshape, {x}, ir::NoAttrs{}, {TensorType(x->dtype(), shape)});
  return true;
}

bool GenTranspose(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  g.Build(OpKind::kTranspose, {x}, ir::TransposeAttrs{g.rng().Permutation(x->type().rank())});
  return true;
}

bool GenSlice(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  Rng& rng = g.rng();
  ir::SliceAttrs s;
  for (int64_t d : x->shape().dims()) {
    const int64_t min_size = std::min(g.MinDim(), d);
    const int64_t start = rng.Uniform(0, d - min_size);
    s.start.push_back(start);
    s.limit.push_back(rng.Uniform(start + min_size, d));
    s.strides.push_back(rng.Uniform(1, 3));
  }
  g.Build(OpKind::kSlice, {x}, std::move(s));
  return true;
}

// Index bounds for indices in [0, max_index]: usually that, sometimes a little beyond on both
// sides (gather, dynamic_slice and dynamic_update_slice clamp; scatter_add drops out of range
// updates: docs/design.md).
std::pair<int64_t, int64_t> IndexRange(Generator& g, int64_t max_index) {
  if (g.rng().Percent(15)) return {-2, max_index + 2};
  return {0, max_index};
}

// One start index per dim of `x` for a window of `sizes`.
std::vector<Value*> StartIndices(Generator& g, Value* x, const std::vector<int64_t>& sizes) {
  std::vector<Value*> starts;
  for (int64_t i = 0; i < x->type().rank(); ++i) {
    auto [lo, hi] = IndexRange(g, x->shape().dim(i) - sizes[static_cast<size_t>(i)]);
    starts.push_back(g.IndexConstant(g.IndexDType(), Shape{}, lo, hi));
  }
  return starts;
}

// Random window sizes within `shape` (each >= MinDim unless the dim is smaller).
std::vector<int64_t> WindowSizes(Generator& g, const Shape& shape) {
  std::vector<int64_t> sizes;
  for (int64_t d : shape.dims()) sizes.push_back(g.rng().Uniform(std::min(g.MinDim(), d), d));
  return sizes;
}

bool GenDynamicSlice(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  std::vector<int64_t> sizes = WindowSizes(g, x->shape());
  std::vector<Value*> operands = StartIndices(g, x, sizes);
  operands.insert(operands.begin(), x);
  g.Build(OpKind::kDynamicSlice, std::move(operands), ir::DynamicSliceAttrs{std::move(sizes)});
  return true;
}

bool GenDynamicUpdateSlice(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  std::vector<int64_t> sizes = WindowSizes(g, x->shape());
  Value* update = g.OfType(TensorType(x->dtype(), Shape(sizes)));
  std::vector<Value*> operands = StartIndices(g, x, sizes);
  operands.insert(operands.begin(), {x, update});
  g.Build(OpKind::kDynamicUpdateSlice, std::move(operands));
  return true;
}

bool GenPad(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  Rng& rng = g.rng();
  const int64_t limit = g.DimLimit();
  ir::PadAttrs p;
  for (int64_t d : x->shape().dims()) {
    int64_t interior = rng.Uniform(0, 2);
    if (d + std::max<int64_t>(d - 1, 0) * interior > limit) interior = 0;
    const int64_t base = d + std::max<int64_t>(d - 1, 0) * interior;
    const int64_t low = rng.Uniform(-base, std::min<int64_t>(2, limit - base));
    // The padded size base + low + high must land in [MinDim, limit].
    const int64_t high = rng.Uniform(std::max(g.MinDim() - base - low, -base),
                                     std::min<int64_t>(2, limit - base - low));
    p.low.push_back(low);
    p.high.push_back(high);
    p.interior.push_back(interior);
  }
  Value* value = g.OfType(TensorType(x->dtype(), Shape{}));
  g.Build(OpKind::kPad, {x, value}, std::move(p));
  return true;
}

bool GenConcatenate(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType, 1);
  if (x == nullptr) return false;
  Rng& rng = g.rng();
  const int64_t dim = rng.Uniform(0, x->type().rank() - 1);
  int64_t total = x->shape().dim(dim);
  std::vector<Value*> operands = {x};
  for (int64_t i = rng.Uniform(0, 2); i > 0; --i) {
    if (total + g.MinDim() > g.DimLimit()) break;
    const int64_t size =
        rng.Uniform(g.MinDim(), std::min(g.options().max_dim, g.DimLimit() - total));
    operands.push_back(g.OfType(TensorType(x->dtype(), WithDim(x->shape(), dim, size))));
    total += size;
  }
  rng.Shuffle(operands);
  g.Build(OpKind::kConcatenate, std::move(operands), ir::ConcatenateAttrs{dim});
  return true;
}

bool GenReverse(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  g.Build(OpKind::kReverse, {x}, ir::ReverseAttrs{RandomDimSubset(g.rng(), x->type().rank())});
  return true;
}

// Gather/scatter attributes and constant indices for operand `x`, or false when the bounds leave
// no choice (the result would exceed max_rank, or indices into an empty axis are not empty).
bool GatherIndices(Generator& g, Value* x, ir::GatherAttrs& attrs, Value*& indices) {
  Rng& rng = g.rng();
  const int64_t rank = x->type().rank();
  attrs.axis = rng.Uniform(0, rank - 1);
  attrs.batch_dims = rng.Uniform(0, attrs.axis);
  // Result rank = rank - 1 + extra.
  const int64_t max_extra = std::min<int64_t>(2, g.options().max_rank - rank + 1);
  if (max_extra < 0) return false;
  std::vector<int64_t> dims(x->shape().dims().begin(),
                            x->shape().dims().begin() + attrs.batch_dims);
  for (int64_t i = rng.Uniform(0, max_extra); i > 0; --i) dims.push_back(g.RandomDim());
  const Shape shape(std::move(dims));
  const int64_t axis_size = x->shape().dim(attrs.axis);
  if (axis_size == 0 && shape.NumElements() > 0) return false;
  auto [lo, hi] = IndexRange(g, std::max<int64_t>(axis_size - 1, 0));
  indices = g.IndexConstant(g.IndexDType(), shape, lo, hi);
  return true;
}

bool GenGather(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType, 1);
  ir::GatherAttrs attrs;
  Value* indices = nullptr;
  if (x == nullptr || !GatherIndices(g, x, attrs, indices)) return false;
  g.Build(OpKind::kGather, {x, indices}, attrs);
  return true;
}

bool GenScatterAdd(Generator& g, OpKind) {
  Value* x = g.Operand(NumericDType, 1);
  ir::GatherAttrs attrs;
  Value* indices = nullptr;
  if (x == nullptr || !GatherIndices(g, x, attrs, indices)) return false;
  const std::vector<TensorType> operand_types = {x->type(), indices->type()};
  std::vector<TensorType> gathered =
      ir::InferResultTypes(OpKind::kGather, operand_types, attrs, {}, {});
  g.Build(OpKind::kScatterAdd, {x, indices, g.OfType(gathered[0])}, attrs);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reductions, scans, sort.

bool GenReduce(Generator& g, OpKind) {
  const ir::ReduceKind kind = RandomReduceKind(g.rng());
  Value* x = g.Operand(ReduceDTypes(kind));
  if (x == nullptr) return false;
  g.Build(OpKind::kReduce, {x}, ir::ReduceAttrs{kind, RandomDimSubset(g.rng(), x->type().rank())});
  return true;
}

bool GenArgReduce(Generator& g, OpKind op) {
  Value* x = g.Operand(NumericDType, 1);
  if (x == nullptr) return false;
  // Reducing an empty dim is only valid when the result is empty too.
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x->type().rank(); ++d) {
    int64_t rest = 1;
    for (int64_t i = 0; i < x->type().rank(); ++i)
      if (i != d) rest *= x->shape().dim(i);
    if (x->shape().dim(d) > 0 || rest == 0) dims.push_back(d);
  }
  if (dims.empty()) return false;
  const DType index = g.rng().Coin() ? DType::kI32 : DType::kI64;
  g.Build(op, {x}, ir::ArgReduceAttrs{g.rng().Pick(dims), index});
  return true;
}

bool GenCumsum(Generator& g, OpKind) {
  Value* x = g.Operand(NumericDType, 1);
  if (x == nullptr) return false;
  g.Build(OpKind::kCumsum, {x},
          ir::CumsumAttrs{g.rng().Uniform(0, x->type().rank() - 1), g.rng().Coin()});
  return true;
}

bool GenSort(Generator& g, OpKind) {
  Value* key = g.Operand(NumericDType, 1);
  if (key == nullptr) return false;
  std::vector<Value*> operands = {key};
  for (int64_t i = g.rng().Uniform(0, 2); i > 0; --i) {
    Value* v = g.rng().Percent(50)
                   ? g.Pick([&](const Value& v) { return v.shape() == key->shape(); })
                   : nullptr;
    if (v == nullptr)
      v = g.Fresh(TensorType(g.PickDType(AnyDType).value_or(key->dtype()), key->shape()));
    operands.push_back(v);
  }
  g.Build(OpKind::kSort, std::move(operands),
          ir::SortAttrs{g.rng().Uniform(0, key->type().rank() - 1), g.rng().Coin()});
  return true;
}

// ---------------------------------------------------------------------------------------------
// Contraction and random numbers.

bool GenDotGeneral(Generator& g, OpKind) {
  Value* lhs = g.Operand(NumericDType);
  if (lhs == nullptr) return false;
  Rng& rng = g.rng();
  const int64_t lhs_rank = lhs->type().rank();
  const int64_t num_batch = rng.Uniform(0, lhs_rank);
  const int64_t num_contracting = rng.Uniform(0, lhs_rank - num_batch);
  const int64_t lhs_free = lhs_rank - num_batch - num_contracting;
  // Both the result (batch, lhs free, rhs free) and rhs must stay within max_rank.
  const int64_t rhs_free =
      rng.Uniform(0, g.options().max_rank - num_batch - std::max(lhs_free, num_contracting));
  const int64_t rhs_rank = num_batch + num_contracting + rhs_free;
  std::vector<int64_t> lhs_dims = rng.Permutation(lhs_rank);
  std::vector<int64_t> rhs_dims = rng.Permutation(rhs_rank);
  ir::DotGeneralAttrs d;
  std::vector<int64_t> rhs_shape(static_cast<size_t>(rhs_rank), -1);
  for (int64_t i = 0; i < num_batch + num_contracting; ++i) {
    const int64_t l = lhs_dims[static_cast<size_t>(i)], r = rhs_dims[static_cast<size_t>(i)];
    (i < num_batch ? d.lhs_batch : d.lhs_contracting).push_back(l);
    (i < num_batch ? d.rhs_batch : d.rhs_contracting).push_back(r);
    rhs_shape[static_cast<size_t>(r)] = lhs->shape().dim(l);
  }
  for (int64_t& s : rhs_shape)
    if (s < 0) s = g.RandomDim();
  Value* rhs = g.OfType(TensorType(lhs->dtype(), Shape(std::move(rhs_shape))));
  g.Build(OpKind::kDotGeneral, {lhs, rhs}, std::move(d));
  return true;
}

bool GenRngBitGenerator(Generator& g, OpKind) {
  // The key and counter are u32[2] and u32[4]: they need rank 1 and dims up to 4.
  if (g.options().max_rank < 1 || g.DimLimit() < 4) return false;
  Value* key = g.OfType(TensorType(DType::kU32, Shape{2}));
  Value* counter = g.OfType(TensorType(DType::kU32, Shape{4}));
  g.Build(OpKind::kRngBitGenerator, {key, counter}, ir::NoAttrs{},
          {TensorType(DType::kU32, g.RandomShape(0))});
  return true;
}

// ---------------------------------------------------------------------------------------------
// Collectives.

bool GenAllReduce(Generator& g, OpKind) {
  const ir::ReduceKind kind = RandomReduceKind(g.rng());
  Value* x = g.Operand(ReduceDTypes(kind));
  if (x == nullptr) return false;
  g.Build(OpKind::kAllReduce, {x}, ir::AllReduceAttrs{kind, g.RandomGroups().first});
  return true;
}

bool GenAllGather(Generator& g, OpKind) {
  auto [groups, n] = g.RandomGroups();
  Value* x = g.Operand(AnyDType, 1);
  if (x == nullptr) return false;
  std::vector<int64_t> dims;  // dims that stay within bounds when multiplied by n
  for (int64_t d = 0; d < x->type().rank(); ++d)
    if (x->shape().dim(d) * n <= g.DimLimit()) dims.push_back(d);
  if (dims.empty()) return false;
  g.Build(OpKind::kAllGather, {x}, ir::AllGatherAttrs{g.rng().Pick(dims), std::move(groups)});
  return true;
}

// The dims of `s` whose size splits into `n` parts (of at least MinDim each).
std::vector<int64_t> SplittableDims(Generator& g, const Shape& s, int64_t n) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < s.rank(); ++d)
    if (s.dim(d) % n == 0 && s.dim(d) / n >= g.MinDim()) dims.push_back(d);
  return dims;
}

// An operand with a dim that splits into `n` parts: existing, or a new one made so.
Value* SplittableOperand(Generator& g, const DTypePred& pred, int64_t n) {
  if (Value* v = g.Pick([&](const Value& v) {
        return pred(v.dtype()) && !SplittableDims(g, v.shape(), n).empty();
      }))
    return v;
  std::optional<DType> t = g.PickDType(pred);
  if (!t || g.options().max_rank < 1) return nullptr;
  const int64_t max_parts = g.DimLimit() / n;
  if (max_parts < g.MinDim()) return nullptr;
  Shape s = g.RandomShape(1);
  s = WithDim(s, g.rng().Uniform(0, s.rank() - 1), n * g.rng().Uniform(g.MinDim(), max_parts));
  return g.Fresh(TensorType(*t, s));
}

bool GenReduceScatter(Generator& g, OpKind) {
  const ir::ReduceKind kind = RandomReduceKind(g.rng());
  auto [groups, n] = g.RandomGroups();
  Value* x = SplittableOperand(g, ReduceDTypes(kind), n);
  if (x == nullptr) return false;
  const int64_t dim = g.rng().Pick(SplittableDims(g, x->shape(), n));
  g.Build(OpKind::kReduceScatter, {x}, ir::ReduceScatterAttrs{kind, dim, std::move(groups)});
  return true;
}

bool GenAllToAll(Generator& g, OpKind) {
  auto [groups, n] = g.RandomGroups();
  Value* x = SplittableOperand(g, AnyDType, n);
  if (x == nullptr) return false;
  const int64_t split = g.rng().Pick(SplittableDims(g, x->shape(), n));
  std::vector<int64_t> concat = {split};  // concatenating where we split keeps the size
  for (int64_t d = 0; d < x->type().rank(); ++d)
    if (d != split && x->shape().dim(d) * n <= g.DimLimit()) concat.push_back(d);
  g.Build(OpKind::kAllToAll, {x},
          ir::AllToAllAttrs{split, g.rng().Pick(concat), std::move(groups)});
  return true;
}

bool GenCollectivePermute(Generator& g, OpKind) {
  Value* x = g.Operand(AnyDType);
  if (x == nullptr) return false;
  const int64_t n = g.options().num_replicas;
  std::vector<int64_t> sources = g.rng().Permutation(n), targets = g.rng().Permutation(n);
  ir::ReplicaGroups pairs;
  for (int64_t i = g.rng().Uniform(0, n) - 1; i >= 0; --i)
    pairs.push_back({sources[static_cast<size_t>(i)], targets[static_cast<size_t>(i)]});
  g.Build(OpKind::kCollectivePermute, {x}, ir::CollectivePermuteAttrs{std::move(pairs)});
  return true;
}

// ---------------------------------------------------------------------------------------------
// Escapes.

// A config string with bytes the printer must escape.
std::string RandomConfig(Rng& rng) {
  static const std::vector<std::string> kPieces = {"",   "a=1", "\"q\"",    "\\",
                                                   "\n", "x y", "\xc3\xa9", "{}"};
  std::string s;
  for (int64_t i = rng.Uniform(0, 3); i > 0; --i) s += rng.Pick(kPieces);
  return s;
}

// Some operands of any type, or none.
std::vector<Value*> SomeOperands(Generator& g, int64_t min_count) {
  std::vector<Value*> operands;
  for (int64_t i = g.rng().Uniform(min_count, 3); i > 0; --i)
    if (Value* v = g.Operand(AnyDType)) operands.push_back(v);
  return operands;
}

bool GenCustomCall(Generator& g, OpKind) {
  // axle.test.identity: results = operands (the interpreter's test target).
  std::vector<Value*> operands = SomeOperands(g, 0);
  std::vector<TensorType> types;
  for (Value* v : operands) types.push_back(v->type());
  g.Build(OpKind::kCustomCall, std::move(operands),
          ir::CustomCallAttrs{"axle.test.identity", RandomConfig(g.rng())}, std::move(types));
  return true;
}

// A fused kernel as the fuse pass writes it: a new function of the module computing
// add(neg(p0), p1) (or neg(p0) for one operand) over float values of one type, and the node
// that calls it.
bool GenFusion(Generator& g, OpKind) {
  Value* x = g.Operand([](DType t) { return t == DType::kF32 || t == DType::kF64; });
  if (x == nullptr) return false;
  const bool two = g.rng().Percent(50);
  ir::Function* f = g.function();
  ir::Module* m = f->module();
  std::string name;
  for (int i = 0; name.empty() || m->FindFunction(name) != nullptr; ++i) name = fmt::format("{}.fused.{}", f->name(), i);
  ir::Builder cb(m->AddFunction(name));
  Value* r = cb.Unary(OpKind::kNeg, cb.Parameter(0, x->type()));
  std::vector<Value*> operands = {x};
  if (two) {
    r = cb.Binary(OpKind::kAdd, r, cb.Parameter(1, x->type()));
    operands.push_back(g.OfType(x->type()));
  }
  cb.Return({r});
  g.Build(OpKind::kFusion, std::move(operands), ir::FusionAttrs{"loop", name}, {x->type()});
  return true;
}

bool GenOptimizationBarrier(Generator& g, OpKind) {
  std::vector<Value*> operands = SomeOperands(g, 1);
  if (operands.empty()) return false;
  g.Build(OpKind::kOptimizationBarrier, std::move(operands));
  return true;
}

}  // namespace

// clang-format off
OpGenerator GetOpGenerator(OpKind op) {
  switch (op) {  // no default: the compiler warns about a new op, RandomModule fails on it
    case OpKind::kConstant: return GenConstant;
    case OpKind::kIota: return GenIota;
    case OpKind::kReplicaId: return GenReplicaId;
    case OpKind::kParameter: return GenParameter;
    case OpKind::kNeg: case OpKind::kAbs: case OpKind::kExp: case OpKind::kLog:
    case OpKind::kLog1p: case OpKind::kTanh: case OpKind::kLogistic: case OpKind::kSqrt:
    case OpKind::kRsqrt: case OpKind::kSin: case OpKind::kCos: case OpKind::kErf:
    case OpKind::kFloor: case OpKind::kCeil: case OpKind::kSign: case OpKind::kNot:
    case OpKind::kIsFinite: case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul:
    case OpKind::kDiv: case OpKind::kRem: case OpKind::kPow: case OpKind::kMax:
    case OpKind::kMin: case OpKind::kAnd: case OpKind::kOr: case OpKind::kXor:
    case OpKind::kAtan2: case OpKind::kCompare:
      return GenElementwise;
    case OpKind::kSelect: return GenSelect;
    case OpKind::kClamp: return GenClamp;
    case OpKind::kConvert: return GenConvert;
    case OpKind::kBitcastConvert: return GenBitcastConvert;
    case OpKind::kBroadcastInDim: return GenBroadcastInDim;
    case OpKind::kReshape: return GenReshape;
    case OpKind::kTranspose: return GenTranspose;
    case OpKind::kSlice: return GenSlice;
    case OpKind::kDynamicSlice: return GenDynamicSlice;
    case OpKind::kDynamicUpdateSlice: return GenDynamicUpdateSlice;
    case OpKind::kPad: return GenPad;
    case OpKind::kConcatenate: return GenConcatenate;
    case OpKind::kReverse: return GenReverse;
    case OpKind::kGather: return GenGather;
    case OpKind::kScatterAdd: return GenScatterAdd;
    case OpKind::kReduce: return GenReduce;
    case OpKind::kArgMax: case OpKind::kArgMin: return GenArgReduce;
    case OpKind::kCumsum: return GenCumsum;
    case OpKind::kSort: return GenSort;
    case OpKind::kDotGeneral: return GenDotGeneral;
    case OpKind::kRngBitGenerator: return GenRngBitGenerator;
    case OpKind::kAllReduce: return GenAllReduce;
    case OpKind::kAllGather: return GenAllGather;
    case OpKind::kReduceScatter: return GenReduceScatter;
    case OpKind::kAllToAll: return GenAllToAll;
    case OpKind::kCollectivePermute: return GenCollectivePermute;
    case OpKind::kCustomCall: return GenCustomCall;
    case OpKind::kOptimizationBarrier: return GenOptimizationBarrier;
    case OpKind::kFusion: return GenFusion;
  }
  return nullptr;
}
// clang-format on

}  // namespace axle::testing::internal
