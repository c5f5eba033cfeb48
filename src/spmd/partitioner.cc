// The partitioner's driver and its per-op rules (partitioner.h; docs/spmd.md, "Partitioning").
//
// Every global value has a local value in its annotated sharding. A rule picks the sharding each
// operand must have (from the result's annotation, keeping an operand's sharding on the dims the
// op reduces), reshards the operands, emits the local op, and reshards what that yields to the
// result's annotation. Ops without a rule here (gather, dynamic_slice, rng, ...) run on the whole
// value: operands replicated, the op as in the global program, result cut to its sharding.
#include "spmd/partitioner.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "spmd/partitioner_internal.h"
#include "spmd/sharding_rules.h"
#include "spmd/shard_util.h"

namespace axle::spmd {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Sharding;
using ir::TensorType;
using ir::Value;

bool Contains(const std::vector<std::string>& v, const std::string& a) {
  return std::find(v.begin(), v.end(), a) != v.end();
}
bool Intersects(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& x) { return Contains(b, x); });
}
Sharding Replicated(int64_t rank) {
  Sharding s;
  s.dims.resize(static_cast<size_t>(rank));
  return s;
}
// `s` without its partial axes.
Sharding Full(Sharding s) {
  s.partial.clear();
  return s;
}

class Partitioner {
 public:
  Partitioner(const ir::Function& global, const ir::Mesh& mesh, ir::Function* out)
      : global_(global), mesh_(mesh), b_(out, ir::ShapeContext{mesh.size()}), lb_(b_, mesh) {}

  void Run() {
    for (const auto& n : global_.nodes()) {
      b_.set_loc(n->loc());
      Partition(*n);
    }
    std::vector<Value*> results;
    // A returned partial sum is completed here: function results are whole values.
    for (const Value* r : global_.results()) results.push_back(Get(r, Full(Ann(r))));
    b_.set_loc(global_.loc());
    b_.Return(results);
  }

 private:
  std::string Type(const Value* v) const {
    return v->type().ToString() + (v->sharding() ? v->sharding()->ToString() : "");
  }
  // A value's annotated sharding, normalized (errors name the value).
  Sharding Ann(const Value* v) const {
    try {
      return NormalizeSharding(v->sharding(), v->type().rank(), mesh_);
    } catch (const Error& e) {
      Fail("spmd-partition: value %{} ({}): {}", v->name(), v->type().ToString(), e.what());
    }
  }
  // The local value of global operand `v` in sharding `want`.
  // Each (value, layout) is made once: collectives are never merged by CSE afterwards.
  Value* Get(const Value* v, const Sharding& want) {
    Value*& slot = reshards_[{v, NormalizeSharding(want, v->type().rank(), mesh_).ToString()}];
    if (!slot) slot = lb_.Reshard(local_.at(v), v->type(), Ann(v), want);
    return slot;
  }
  // Records `lv` (in sharding `have`) as the local value of global `gv`, resharded to its annotation.
  void Set(const Value* gv, Value* lv, const Sharding& have) {
    Value* out = lb_.Reshard(lv, gv->type(), have, Ann(gv));
    if (out->name().empty() && !gv->name().empty() && names_.insert(gv->name()).second) out->set_name(gv->name());
    local_[gv] = out;
  }
  TensorType LocalType(const Value* gv, const Sharding& s) const {
    return TensorType(gv->dtype(), LocalShape(gv->shape(), s, mesh_));
  }

  void Partition(const Node& n);
  void Elementwise(const Node& n);
  void BroadcastInDim(const Node& n);
  void Reshape(const Node& n);
  void Transpose(const Node& n);
  void Reduce(const Node& n);
  void DotGeneral(const Node& n);
  void Iota(const Node& n);
  void RandomBits(const Node& n);
  void GatherScatter(const Node& n);
  void PerDim(const Node& n, const std::vector<int64_t>& touched);
  void Whole(const Node& n);

  const ir::Function& global_;
  const ir::Mesh& mesh_;
  ir::Builder b_;
  internal::LocalBuilder lb_;
  std::unordered_map<const Value*, Value*> local_;
  std::map<std::pair<const Value*, std::string>, Value*> reshards_;
  std::set<std::string> names_;
};

void Partitioner::Partition(const Node& n) {
  const Value* r = n.num_results() > 0 ? n.result(0) : nullptr;
  switch (n.op()) {
    case OpKind::kParameter: {
      Sharding s = Ann(r);
      if (!s.partial.empty())
        Fail("spmd-partition: parameter %{} is {} with partial axes; parameters must be fully reduced", r->name(),
             Type(r));
      Value* p = b_.Parameter(n.attrs_as<ir::ParameterAttrs>().index, LocalType(r, s), r->name());
      if (!r->name().empty()) names_.insert(r->name());
      local_[r] = p;
      return;
    }
    case OpKind::kConstant: {
      const ir::Literal& lit = n.attrs_as<ir::ConstantAttrs>().value;
      Sharding s = Full(Ann(r));
      if (lit.IsSplat() && lit.NumElements() > 1) {  // any shard of a splat is a smaller splat (same bits)
        ir::Literal local(LocalType(r, s));
        for (int64_t i = 0; i < local.NumElements(); ++i) ir::SetElementBits(local, i, ir::ElementBits(lit, 0));
        return Set(r, b_.Constant(std::move(local)), s);
      }
      Set(r, b_.Constant(lit), Replicated(r->type().rank()));
      return;
    }
    case OpKind::kReplicaId:
      Fail("spmd-partition: replica_id in the global program (node at {}); the partitioner derives device "
           "indices itself",
           n.loc().ToString());
    case OpKind::kFusion:
      Fail("spmd-partition: fusion (calls @{}) in the global program (node at {}); fused kernels are compiler "
           "output: partition the module first, then fuse it (the pipeline's order)",
           n.attrs_as<ir::FusionAttrs>().calls, n.loc().ToString());
    case OpKind::kBroadcastInDim: return BroadcastInDim(n);
    case OpKind::kReshape: return Reshape(n);
    case OpKind::kTranspose: return Transpose(n);
    case OpKind::kReduce: return Reduce(n);
    case OpKind::kDotGeneral: return DotGeneral(n);
    case OpKind::kIota: return Iota(n);
    case OpKind::kRngBitGenerator: return RandomBits(n);
    case OpKind::kSlice: {
      const auto& a = n.attrs_as<ir::SliceAttrs>();
      std::vector<int64_t> touched;
      for (int64_t d = 0; d < r->type().rank(); ++d)
        if (a.start[d] != 0 || a.limit[d] != n.operand(0)->shape().dim(d) || a.strides[d] != 1) touched.push_back(d);
      return PerDim(n, touched);
    }
    case OpKind::kPad: {
      const auto& a = n.attrs_as<ir::PadAttrs>();
      std::vector<int64_t> touched;
      for (int64_t d = 0; d < r->type().rank(); ++d)
        if (a.low[d] != 0 || a.high[d] != 0 || a.interior[d] != 0) touched.push_back(d);
      return PerDim(n, touched);
    }
    case OpKind::kDynamicSlice:
    case OpKind::kDynamicUpdateSlice: {  // a dim taken whole (start clamped to 0) is untouched
      const Shape& x = n.operand(0)->shape();
      const Shape& part = n.op() == OpKind::kDynamicSlice ? r->shape() : n.operand(1)->shape();
      std::vector<int64_t> touched;
      for (int64_t d = 0; d < x.rank(); ++d)
        if (part.dim(d) != x.dim(d)) touched.push_back(d);
      return PerDim(n, touched);
    }
    case OpKind::kGather:
    case OpKind::kScatterAdd: return GatherScatter(n);
    case OpKind::kReverse: return PerDim(n, n.attrs_as<ir::ReverseAttrs>().dims);
    case OpKind::kConcatenate: return PerDim(n, {n.attrs_as<ir::ConcatenateAttrs>().dim});
    case OpKind::kCumsum: return PerDim(n, {n.attrs_as<ir::CumsumAttrs>().dim});
    case OpKind::kSort: return PerDim(n, {n.attrs_as<ir::SortAttrs>().dim});
    case OpKind::kArgMax:
    case OpKind::kArgMin: return PerDim(n, {n.attrs_as<ir::ArgReduceAttrs>().dim});
    case OpKind::kOptimizationBarrier: {
      std::vector<Value*> ops;
      std::vector<Sharding> have;
      for (size_t i = 0; i < n.num_operands(); ++i) {
        have.push_back(Full(Ann(n.result(i))));
        ops.push_back(Get(n.operand(i), have.back()));
      }
      std::vector<Value*> outs = b_.Build(n.op(), ops, n.attrs());
      for (size_t i = 0; i < outs.size(); ++i) Set(n.result(i), outs[i], have[i]);
      return;
    }
    default: break;
  }
  if (n.info().Has(ir::kCollective))
    Fail("spmd-partition: collective {} in the global program (at {}); the input of the partitioner has one "
         "replica and states communication only through shardings",
         n.name(), n.loc().ToString());
  if (n.info().Has(ir::kElementwise)) return Elementwise(n);
  Whole(n);
}

namespace {
// Whether every `from` value is exactly a `to` value: a half to f32 or f64, f32 to f64.
bool ExactFloatWidening(DType from, DType to) {
  if (from == to) return IsFloat(from);
  if (from == DType::kBF16 || from == DType::kF16) return to == DType::kF32 || to == DType::kF64;
  return from == DType::kF32 && to == DType::kF64;
}
}  // namespace

void Partitioner::Elementwise(const Node& n) {
  const Value* r = n.result(0);
  bool same_shape = true;
  for (const Value* o : n.operands())
    same_shape = same_shape && (o->shape() == r->shape() || o->type().rank() == 0);
  if (!same_shape) return Whole(n);
  // An op linear in some operands maps partial sums there to a partial sum: a partial result is
  // computed from those operands left partial (add, sub, neg, float convert: every operand; mul:
  // the one operand already partial; div: the numerator), the others whole.
  const Sharding ann = Ann(r), whole = Full(ann);
  std::vector<bool> keep(n.num_operands(), false);
  if (!ann.partial.empty() && r->type().rank() == n.operand(0)->type().rank()) {
    switch (n.op()) {
      case OpKind::kAdd:
      case OpKind::kSub:
      case OpKind::kNeg: keep.assign(n.num_operands(), true); break;
      // Linear only when exact: a widening float convert (a narrowing one rounds each partial).
      case OpKind::kConvert: keep[0] = ExactFloatWidening(n.operand(0)->dtype(), r->dtype()); break;
      // Note [Partial sums through products]: by a factor known finite, a divisor known nonzero.
      case OpKind::kDiv: keep[0] = IsFloat(r->dtype()) && CarriesPartialSums(*n.operand(1), true); break;
      case OpKind::kMul: {
        const int p = Ann(n.operand(1)).partial == ann.partial ? 1 : 0;
        keep[p] = CarriesPartialSums(*n.operand(1 - p), false);
        break;
      }
      default: break;
    }
  }
  std::vector<Value*> ops;
  for (size_t i = 0; i < n.num_operands(); ++i) {
    const Value* o = n.operand(i);
    ops.push_back(Get(o, o->type().rank() != r->type().rank() ? Replicated(o->type().rank()) : keep[i] ? ann : whole));
  }
  const Sharding have = std::find(keep.begin(), keep.end(), true) != keep.end() ? ann : whole;
  std::vector<TensorType> declared;
  if (n.info().Has(ir::kDeclaresResult)) declared.push_back(LocalType(r, have));
  Set(r, b_.Build1(n.op(), ops, n.attrs(), declared), have);
}

void Partitioner::BroadcastInDim(const Node& n) {
  const Value* r = n.result(0);
  const Value* x = n.operand(0);
  const auto& dims = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
  Sharding have = Full(Ann(r));
  Sharding want = Replicated(x->type().rank());
  for (size_t i = 0; i < dims.size(); ++i)
    if (x->shape().dim(i) == r->shape().dim(dims[i])) want.dims[i] = have.dims[dims[i]];
  Set(r, b_.Build1(n.op(), {Get(x, want)}, n.attrs(), {LocalType(r, have)}), have);
}

void Partitioner::Transpose(const Node& n) {
  const Value* r = n.result(0);
  const auto& perm = n.attrs_as<ir::TransposeAttrs>().perm;
  Sharding have = Full(Ann(r));
  Sharding want = Replicated(r->type().rank());
  for (size_t i = 0; i < perm.size(); ++i) want.dims[perm[i]] = have.dims[i];
  Set(r, b_.Build1(n.op(), {Get(n.operand(0), want)}, n.attrs()), have);
}

// A reshape keeps a sharded dim only as the major (first non-1) dim of a group of input dims whose
// product equals that of a group of output dims, with both major dims divisible by the shard
// count: then every device's block is one contiguous run of the group's elements on both sides.
void Partitioner::Reshape(const Node& n) {
  const Value* r = n.result(0);
  const Value* x = n.operand(0);
  const std::vector<int64_t>& in = x->shape().dims();
  const std::vector<int64_t>& out = r->shape().dims();
  Sharding ann = Full(Ann(r));
  Sharding want = Replicated(x->type().rank()), have = Replicated(r->type().rank());
  const bool empty = x->type().NumElements() == 0;
  size_t i = 0, j = 0;
  while (!empty && (i < in.size() || j < out.size())) {
    const size_t gi = i, gj = j;
    int64_t pi = 1, po = 1;
    if (i < in.size()) pi *= in[i++];
    if (j < out.size()) po *= out[j++];
    while (pi != po) {
      if (pi < po && i < in.size()) pi *= in[i++];
      else if (po < pi && j < out.size()) po *= out[j++];
      else break;
    }
    size_t im = gi, jm = gj;
    while (im + 1 < i && in[im] == 1) ++im;
    while (jm + 1 < j && out[jm] == 1) ++jm;
    if (jm >= j || im >= i) continue;
    bool only_major = true;
    for (size_t k = gj; k < j; ++k)
      if (k != jm && !ann.dims[k].empty()) only_major = false;
    const int64_t cnt = mesh_.AxesSize(ann.dims[jm]);
    if (only_major && cnt > 1 && in[im] % cnt == 0 && out[jm] % cnt == 0) {
      want.dims[im] = ann.dims[jm];
      have.dims[jm] = ann.dims[jm];
    }
  }
  Set(r, b_.Reshape(Get(x, want), LocalShape(r->shape(), have, mesh_)), have);
}

void Partitioner::Reduce(const Node& n) {
  const Value* r = n.result(0);
  const Value* x = n.operand(0);
  const auto& a = n.attrs_as<ir::ReduceAttrs>();
  const int64_t rank = x->type().rank();
  Sharding ann = Full(Ann(r)), xs = Full(Ann(x));
  // The reduced dims keep the operand's sharding (their axes become a partial sum).
  Sharding want = Replicated(rank);
  std::vector<std::string> reduced_axes;
  for (int64_t d : a.dims) {
    if (Intersects(xs.dims[d], reduced_axes)) continue;
    want.dims[d] = xs.dims[d];
    reduced_axes.insert(reduced_axes.end(), xs.dims[d].begin(), xs.dims[d].end());
  }
  Sharding have = Replicated(r->type().rank());
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) != a.dims.end()) continue;
    if (!Intersects(ann.dims[k], reduced_axes)) want.dims[d] = have.dims[k] = ann.dims[k];
    ++k;
  }
  if (a.kind == ir::ReduceKind::kSum) {  // a sum of partial sums stays partial over the same axes
    for (const std::string& axis : Ann(x).partial)
      if (!std::any_of(want.dims.begin(), want.dims.end(), [&](const auto& d) { return Contains(d, axis); }))
        want.partial.push_back(axis);
  }
  Value* v = Get(x, want);
  v = lb_.MaskPadding(v, x->type(), want, a.dims, internal::ReduceIdentity(a.kind, x->dtype()));
  // Note [Partial products of halves], for sums: a sum of halves over a split dim sums in f32 on
  // each device and across them, and rounds once (bias gradients under bf16 autocast).
  const bool half = r->dtype() == DType::kBF16 || r->dtype() == DType::kF16;
  if (half && a.kind == ir::ReduceKind::kSum && !reduced_axes.empty() && want.partial.empty()) {
    Value* sum = b_.Reduce(b_.Convert(v, DType::kF32), a.kind, a.dims);
    have.partial = reduced_axes;
    Value* reduced = lb_.Reshard(sum, TensorType(DType::kF32, r->type().shape), have, ann);
    return Set(r, b_.Convert(reduced, r->dtype()), ann);
  }
  v = b_.Reduce(v, a.kind, a.dims);
  have.partial = want.partial;
  if (!reduced_axes.empty()) {
    if (a.kind == ir::ReduceKind::kSum) {  // all_reduce, reduce_scatter or kept partial: Reshard decides
      have.partial.insert(have.partial.end(), reduced_axes.begin(), reduced_axes.end());
    } else {
      v = b_.Build1(OpKind::kAllReduce, {v}, ir::AllReduceAttrs{a.kind, lb_.Groups(reduced_axes)});
    }
  }
  Set(r, v, have);
}

void Partitioner::DotGeneral(const Node& n) {
  const Value* r = n.result(0);
  const Value* lhs = n.operand(0);
  const Value* rhs = n.operand(1);
  const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
  Sharding ann = Full(Ann(r)), ls = Full(Ann(lhs)), rs = Full(Ann(rhs));
  // Contracting dims: the axes both sides agree on, else the one sharded side's (the other side is
  // resharded to match); their axes make the local product a partial sum.
  std::vector<std::vector<std::string>> contract(a.lhs_contracting.size());
  std::vector<std::string> axes, result_axes;
  for (const auto& d : ann.dims) result_axes.insert(result_axes.end(), d.begin(), d.end());
  for (size_t k = 0; k < contract.size(); ++k) {
    const auto& l = ls.dims[a.lhs_contracting[k]];
    const auto& rr = rs.dims[a.rhs_contracting[k]];
    std::vector<std::string> c = !l.empty() ? l : rr;
    if (c.empty() || Intersects(c, axes)) continue;
    // One side split there over axes the result splits elsewhere (FSDP: a weight split over the
    // batch's axis): gathering that side beats gathering the other side and scattering the result.
    if (l != rr && Intersects(c, result_axes)) continue;
    contract[k] = c;
    axes.insert(axes.end(), c.begin(), c.end());
  }
  Sharding have = Replicated(r->type().rank());
  for (int64_t d = 0; d < r->type().rank(); ++d)
    if (!Intersects(ann.dims[d], axes)) have.dims[d] = ann.dims[d];
  std::vector<int64_t> lf = ir::DotFreeDims(lhs->type().rank(), a.lhs_batch, a.lhs_contracting);
  std::vector<int64_t> rf = ir::DotFreeDims(rhs->type().rank(), a.rhs_batch, a.rhs_contracting);
  Sharding lw = Replicated(lhs->type().rank()), rw = Replicated(rhs->type().rank());
  size_t out = 0;
  for (size_t k = 0; k < a.lhs_batch.size(); ++k, ++out) {
    lw.dims[a.lhs_batch[k]] = have.dims[out];
    rw.dims[a.rhs_batch[k]] = have.dims[out];
  }
  for (int64_t d : lf) lw.dims[d] = have.dims[out++];
  for (int64_t d : rf) rw.dims[d] = have.dims[out++];
  for (size_t k = 0; k < contract.size(); ++k) {
    lw.dims[a.lhs_contracting[k]] = contract[k];
    rw.dims[a.rhs_contracting[k]] = contract[k];
  }
  // The product is linear in each side: one partial operand (not both) stays partial, when its
  // axes are free on both sides.
  auto uses = [](const Sharding& s, const std::vector<std::string>& p) {
    return std::any_of(s.dims.begin(), s.dims.end(), [&](const auto& d) { return Intersects(d, p); });
  };
  const std::vector<std::string>& lp = Ann(lhs).partial;
  const std::vector<std::string>& rp = Ann(rhs).partial;
  // Note [Partial sums through products]: only by a factor known finite.
  if (!lp.empty() && rp.empty() && !uses(lw, lp) && !uses(rw, lp) && CarriesPartialSums(*rhs, false)) lw.partial = lp;
  if (lp.empty() && !rp.empty() && !uses(lw, rp) && !uses(rw, rp) && CarriesPartialSums(*lhs, false)) rw.partial = rp;
  // Padding along a split contracting dim must add nothing: zero it on both sides.
  Value* l = lb_.MaskPadding(Get(lhs, lw), lhs->type(), lw, a.lhs_contracting, 0);
  Value* rr = lb_.MaskPadding(Get(rhs, rw), rhs->type(), rw, a.rhs_contracting, 0);
  have.partial = axes;
  have.partial.insert(have.partial.end(), lw.partial.begin(), lw.partial.end());
  have.partial.insert(have.partial.end(), rw.partial.begin(), rw.partial.end());
  // Note [Partial products of halves]
  // A product of bf16 / f16 values sums in f32 and rounds once (Note [Products of halves],
  // backends/cpu/dot.cc). Its partial products, rounded to the half on each device and summed in
  // the half by the collective, would round twice more (bf16 autocast's tensor-parallel rowwise
  // layers and FSDP's weight gradients drifted from the one-device run by 1e-4 relative in the
  // loss). So a partial product of halves is an f32 dot_general, reduced in f32, then rounded once:
  // the one device's numerics up to the order of the f32 sums.
  if (!have.partial.empty() && (r->dtype() == DType::kBF16 || r->dtype() == DType::kF16)) {
    Value* local = b_.DotGeneral(l, rr, a, DType::kF32);
    const TensorType global(DType::kF32, r->type().shape);
    Value* reduced = lb_.Reshard(local, global, have, ann);
    return Set(r, b_.Convert(reduced, r->dtype()), ann);
  }
  Set(r, b_.DotGeneral(l, rr, a), have);
}

void Partitioner::Iota(const Node& n) {
  const Value* r = n.result(0);
  const int64_t dim = n.attrs_as<ir::IotaAttrs>().dim;
  Sharding have = Full(Ann(r));
  TensorType local = LocalType(r, have);
  if (have.dims[dim].empty()) return Set(r, b_.Iota(local, dim), have);
  if (r->dtype() == DType::kI8 || r->dtype() == DType::kU8 || r->shape().dim(dim) > (int64_t{1} << 31) - 1)
    return Whole(n);  // those wrap, where convert saturates
  Value* i = b_.Iota(TensorType(DType::kI32, local.shape), dim);
  Value* at = b_.Add(i, b_.BroadcastInDim(lb_.BlockOffset(have.dims[dim], r->shape().dim(dim)), local.shape, {}));
  Set(r, r->dtype() == DType::kI32 ? at : b_.Convert(at, r->dtype()), have);
}

// Note [Partitioned random bits]
// rng_bit_generator's element i is word i % 4 of philox(key, counter + i / 4): a device's block is
// a few contiguous runs of the global stream. With one split dimension k (every other dimension
// whole) the block is `outer` runs (the product of the dimensions before k; randn draws [2, ...]
// and splits it, so 2 runs), each of block_k x inner elements (inner: the product of the
// dimensions after k). When every run starts at a multiple of 4, each device draws its runs
// itself, from counter + start / 4 (a 128-bit add whose per-device start is a constant table read
// at replica_id), so the bits are the global program's and nothing is drawn whole: a model's
// random init laid out by fsdp is computed as shards (Note [A model born sharded],
// src/train/trainer.cc). The padding rows of an uneven split draw the stream past the block, which
// no valid element reads. Any other layout: Whole.
void Partitioner::RandomBits(const Node& n) {
  const Value* r = n.result(0);
  const Sharding have = Full(Ann(r));
  const int64_t rank = r->type().rank();
  int64_t k = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (!have.dims[d].empty()) {
      if (k >= 0) return Whole(n);
      k = d;
    }
  if (k < 0 || r->dtype() != DType::kU32) return Whole(n);
  const Shape& gs = r->shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < k; ++d) outer *= gs.dim(d);
  for (int64_t d = k + 1; d < rank; ++d) inner *= gs.dim(d);
  const int64_t size = gs.dim(k), block = BlockSize(size, mesh_.AxesSize(have.dims[k]));
  if ((block * inner) % 4 != 0 || (outer > 1 && (size * inner) % 4 != 0) || outer > 16) return Whole(n);
  Value* key = Get(n.operand(0), Replicated(1));
  Value* counter = Get(n.operand(1), Replicated(1));
  auto word = [&](Value* v, int64_t i) {
    return b_.Build1(OpKind::kSlice, {v}, ir::SliceAttrs{{i}, {i + 1}, {1}});
  };
  auto carry = [&](Value* sum, Value* addend) {  // u32[1]: 1 where sum = x + addend wrapped
    return b_.Convert(b_.Compare(ir::CompareDir::kLt, sum, addend), DType::kU32);
  };
  std::vector<Value*> runs;
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<uint32_t> lo(static_cast<size_t>(mesh_.size())), hi(lo.size());
    for (int64_t d = 0; d < mesh_.size(); ++d) {
      const uint64_t start = static_cast<uint64_t>(o * size * inner + mesh_.ShardIndex(d, have.dims[k]) * block * inner) / 4;
      lo[static_cast<size_t>(d)] = static_cast<uint32_t>(start);
      hi[static_cast<size_t>(d)] = static_cast<uint32_t>(start >> 32);
    }
    Value* add_lo = lb_.PerDevice(ir::Literal::FromVector<uint32_t>(DType::kU32, Shape{mesh_.size()}, lo));
    Value* add_hi = lb_.PerDevice(ir::Literal::FromVector<uint32_t>(DType::kU32, Shape{mesh_.size()}, hi));
    // counter + start / 4, little-endian words with carries (ir/philox.h, AddToCounter).
    Value* w0 = b_.Add(word(counter, 0), add_lo);
    Value* w1 = b_.Add(word(counter, 1), add_hi);
    Value* c1 = carry(w1, add_hi);
    Value* k0 = carry(w0, add_lo);
    Value* w1c = b_.Add(w1, k0);
    c1 = b_.Add(c1, carry(w1c, k0));  // at most one of the two wraps
    Value* w2 = b_.Add(word(counter, 2), c1);
    Value* w3 = b_.Add(word(counter, 3), carry(w2, c1));
    Value* local_counter = b_.Build1(OpKind::kConcatenate, {w0, w1c, w2, w3}, ir::ConcatenateAttrs{0});
    runs.push_back(b_.Build(OpKind::kRngBitGenerator, {key, local_counter}, ir::NoAttrs{},
                            {TensorType(DType::kU32, Shape{block * inner})})[0]);
  }
  Value* flat = runs.size() == 1 ? runs[0] : b_.Build1(OpKind::kConcatenate, runs, ir::ConcatenateAttrs{0});
  Set(r, b_.Reshape(flat, LocalType(r, have).shape), have);
}

// gather / scatter_add: the gathered axis of x is whole; every other dim of x, indices and the
// gathered shape (gather's result, scatter_add's updates) maps to one dim of that shape and takes
// its layout, so each device gathers (or scatters) its own block with no communication.
void Partitioner::GatherScatter(const Node& n) {
  const auto& a = n.attrs_as<ir::GatherAttrs>();
  const bool gather = n.op() == OpKind::kGather;
  const Value* x = n.operand(0);
  const Value* idx = n.operand(1);
  const Value* r = n.result(0);
  const int64_t xr = x->type().rank(), ir_ = idx->type().rank();
  // The layout of the gathered shape, x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis+1:].
  Sharding g = Replicated(a.axis + (ir_ - a.batch_dims) + (xr - a.axis - 1));
  if (gather) {
    g = Full(Ann(r));
  } else {  // x's layout (axis whole); the index dims stay whole: devices holding different updates
            // for one position would each add x too
    Sharding rs = Full(Ann(r));
    for (int64_t d = 0; d < xr; ++d)
      if (d != a.axis) g.dims[d < a.axis ? d : d + ir_ - a.batch_dims - 1] = rs.dims[d];
  }
  Sharding xw = Replicated(xr), iw = Replicated(ir_);
  for (int64_t d = 0; d < xr; ++d)
    if (d != a.axis) xw.dims[d] = g.dims[d < a.axis ? d : d + ir_ - a.batch_dims - 1];
  for (int64_t k = 0; k < ir_; ++k) iw.dims[k] = g.dims[k < a.batch_dims ? k : a.axis + k - a.batch_dims];
  std::vector<Value*> ops{Get(x, xw), Get(idx, iw)};
  if (!gather) ops.push_back(Get(n.operand(2), g));
  Set(r, b_.Build1(n.op(), ops, n.attrs()), gather ? g : xw);
}

// Ops that act along some dims only (`touched`): those are made whole, the others keep the
// result's sharding; operands of another rank (pad's value, dynamic_slice's starts) are replicated.
void Partitioner::PerDim(const Node& n, const std::vector<int64_t>& touched) {
  const Value* x = n.operand(0);
  const int64_t rank = x->type().rank();
  Sharding want = Replicated(rank);
  const Value* r = n.result(0);
  Sharding ann = Full(Ann(r));
  const bool drops = r->type().rank() == rank - 1;  // argmax/argmin remove their dim
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    const bool t = std::find(touched.begin(), touched.end(), d) != touched.end();
    if (!(t && drops)) {
      if (!t) want.dims[d] = ann.dims[k];
      ++k;
    }
  }
  std::vector<Value*> ops;
  for (const Value* o : n.operands()) ops.push_back(Get(o, o->type().rank() == rank ? want : Replicated(o->type().rank())));
  ir::Attrs attrs = n.attrs();
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(touched.begin(), touched.end(), d) != touched.end()) continue;
    if (auto* s = std::get_if<ir::SliceAttrs>(&attrs)) s->limit[d] = ops[0]->shape().dim(d);
    if (auto* s = std::get_if<ir::DynamicSliceAttrs>(&attrs)) s->sizes[d] = ops[0]->shape().dim(d);
  }
  Sharding have = want;
  if (drops) have.dims.erase(have.dims.begin() + touched[0]);
  std::vector<Value*> outs = b_.Build(n.op(), ops, attrs);
  for (size_t i = 0; i < outs.size(); ++i) Set(n.result(i), outs[i], have);
}

// The fallback: the op on whole operands, as in the global program; results cut to their sharding.
void Partitioner::Whole(const Node& n) {
  std::vector<Value*> ops;
  for (const Value* o : n.operands()) ops.push_back(Get(o, Replicated(o->type().rank())));
  std::vector<TensorType> declared;
  if (n.info().Has(ir::kDeclaresResult))
    for (const Value* r : n.results()) declared.push_back(r->type());
  std::vector<Value*> outs = b_.Build(n.op(), ops, n.attrs(), declared);
  for (size_t i = 0; i < outs.size(); ++i) Set(n.result(i), outs[i], Replicated(n.result(i)->type().rank()));
}

}  // namespace

ir::Sharding ParameterSharding(const ir::Module& global, int64_t index) {
  for (const ir::Node* p : global.entry()->Parameters())
    if (p->attrs_as<ir::ParameterAttrs>().index == index) {
      const Value* v = p->result();
      return NormalizeSharding(v->sharding(), v->type().rank(), *global.mesh());
    }
  Fail("module @{} has no parameter {}", global.name(), index);
}

ir::Sharding ResultSharding(const ir::Module& global, int64_t index) {
  const auto& results = global.entry()->results();
  if (index < 0 || index >= static_cast<int64_t>(results.size()))
    Fail("module @{} has {} results, not {}", global.name(), results.size(), index + 1);
  const Value* v = results[index];
  return Full(NormalizeSharding(v->sharding(), v->type().rank(), *global.mesh()));
}

std::unique_ptr<ir::Module> Partition(const ir::Module& global) {
  if (!global.mesh())
    Fail("spmd-partition: module @{} has no mesh; give it one (module @{} {{mesh_axes=[...], mesh_shape=[...]}})",
         global.name(), global.name());
  if (global.num_replicas() != 1)
    Fail("spmd-partition: module @{} has num_replicas {}; the partitioner takes the global program (1 replica) "
         "and makes the {}-device one",
         global.name(), global.num_replicas(), global.mesh()->size());
  ir::Verify(global);
  auto out = std::make_unique<ir::Module>(global.name());
  out->set_mesh(global.mesh());
  out->set_num_replicas(global.mesh()->size());
  const ir::Function& entry = *global.entry();
  ir::Function* f = out->AddFunction(entry.name());
  f->set_loc(entry.loc());
  Partitioner(entry, *out->mesh(), f).Run();
  ir::Verify(*out);
  return out;
}

namespace {

class PartitionPass : public passes::Pass {
 public:
  std::string_view name() const override { return "spmd-partition"; }
  std::string_view summary() const override {
    return "SPMD partitioner: the per-device program of a module with a mesh and shardings";
  }
  bool Run(ir::Module& module) override {
    std::unique_ptr<ir::Module> out = Partition(module);
    module = std::move(*out);
    return true;
  }
};

}  // namespace

std::unique_ptr<passes::Pass> CreatePartitionPass() { return std::make_unique<PartitionPass>(); }

}  // namespace axle::spmd
