#include "spmd/sharding_rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "core/dtype.h"
#include "ir/shape_inference.h"

namespace axle::spmd {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Sharding;
using Operands = std::span<const MaybeSharding>;
using Pairs = std::vector<std::pair<int64_t, int64_t>>;  // (source dim, target dim)
using Axes = std::vector<std::string>;

int64_t Rank(const ir::Value* v) { return v->type().rank(); }
const Shape& ShapeOf(const ir::Value* v) { return v->type().shape; }
const Axes& PartialOf(Operands s, size_t i) {
  static const Axes kNone;
  return i < s.size() && s[i] ? s[i]->partial : kNone;
}

// A sharding of rank `target_rank` whose dim `t` takes `src`'s dim `s` for each (s, t) in `pairs`.
Sharding Map(const Sharding& src, int64_t target_rank, const Pairs& pairs, Axes partial = {}) {
  Sharding out = Replicated(target_rank);
  for (auto [s, t] : pairs)
    if (s >= 0 && s < static_cast<int64_t>(src.dims.size()) && t >= 0 && t < target_rank) out.dims[t] = src.dims[s];
  out.partial = std::move(partial);
  return out;
}

Pairs Invert(const Pairs& pairs) {
  Pairs out;
  for (auto [s, t] : pairs) out.push_back({t, s});
  return out;
}

// Identity pairs over `rank` dims, skipping `touched` (dims an op moves data along).
Pairs IdentityExcept(int64_t rank, const std::vector<bool>& touched) {
  Pairs out;
  for (int64_t d = 0; d < rank; ++d)
    if (d >= static_cast<int64_t>(touched.size()) || !touched[d]) out.push_back({d, d});
  return out;
}

std::vector<bool> TouchedDims(int64_t rank, const std::vector<int64_t>& dims) {
  std::vector<bool> t(rank, false);
  for (int64_t d : dims)
    if (d >= 0 && d < rank) t[d] = true;
  return t;
}

// Proposals for result `target` from every known operand in `operand_pairs` (operand index ->
// pairs from its dims to the result's), all carrying `partial`.
std::vector<Proposal> Project(const Node& n, Operands ops, int target,
                              const std::vector<std::pair<int, Pairs>>& operand_pairs, const Axes& partial) {
  std::vector<Proposal> out;
  for (const auto& [i, pairs] : operand_pairs)
    if (i < static_cast<int>(ops.size()) && ops[i])
      out.push_back({target, i, Map(*ops[i], Rank(n.result(target)), pairs, partial)});
  return out;
}

// Proposals for operands from result `source` (backward), one per entry of `operand_pairs`
// (operand index -> pairs from the operand's dims to the result's; inverted here).
std::vector<Proposal> ProjectBack(const Node& n, Operands results, int source,
                                  const std::vector<std::pair<int, Pairs>>& operand_pairs) {
  std::vector<Proposal> out;
  if (source >= static_cast<int>(results.size()) || !results[source]) return out;
  for (const auto& [i, pairs] : operand_pairs)
    out.push_back({i, source, Map(*results[source], Rank(n.operand(i)), Invert(pairs))});
  return out;
}

std::vector<Proposal> None(const Node&, Operands, const ir::Mesh&) { return {}; }

// ---------------------------------------------------------------------------------------------
// Elementwise: every operand of the result's rank maps dim to dim (clamp and select may take
// scalar bounds / predicates, which map nothing).

Axes ElementwisePartial(const Node& n, Operands ops) {
  const Axes& p0 = PartialOf(ops, 0);
  const Axes& p1 = PartialOf(ops, 1);
  switch (n.op()) {
    case OpKind::kNeg: return p0;
    case OpKind::kConvert:
      return IsFloat(n.operand(0)->dtype()) && IsFloat(n.result()->dtype()) ? p0 : Axes{};
    case OpKind::kAdd:
    case OpKind::kSub: return p0 == p1 ? p0 : Axes{};
    case OpKind::kMul:  // linear in each side: one partial operand (Note [Partial sums through products])
      if (!p0.empty() && p1.empty() && CarriesPartialSums(*n.operand(1), false)) return p0;
      if (p0.empty() && !p1.empty() && CarriesPartialSums(*n.operand(0), false)) return p1;
      return {};
    case OpKind::kDiv:  // linear in a float numerator
      return p1.empty() && IsFloat(n.result()->dtype()) && CarriesPartialSums(*n.operand(1), true) ? p0 : Axes{};
    default: return {};
  }
}

std::vector<std::pair<int, Pairs>> ElementwisePairs(const Node& n) {
  std::vector<std::pair<int, Pairs>> out;
  const int64_t rank = Rank(n.result());
  for (size_t i = 0; i < n.num_operands(); ++i)
    if (Rank(n.operand(i)) == rank) out.push_back({static_cast<int>(i), IdentityExcept(rank, {})});
  return out;
}

std::vector<Proposal> ElementwiseForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, ElementwisePairs(n), ElementwisePartial(n, ops));
}
std::vector<Proposal> ElementwiseBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, ElementwisePairs(n));
}

// ---------------------------------------------------------------------------------------------
// Data movement.

// broadcast_in_dim: operand dim i -> result dim dims[i] where the size is kept (an expanded
// size-1 dim has nothing to split).
Pairs BroadcastPairs(const Node& n) {
  const auto& dims = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
  Pairs out;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < Rank(n.result()) && ShapeOf(n.operand(0)).dim(i) == ShapeOf(n.result()).dim(dims[i]))
      out.push_back({static_cast<int64_t>(i), dims[i]});
  return out;
}
std::vector<Proposal> BroadcastForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, {{0, BroadcastPairs(n)}}, {});
}
std::vector<Proposal> BroadcastBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, {{0, BroadcastPairs(n)}});
}

// reshape: both shapes are cut into groups of dims with equal products (a split, a merge or a
// kept dim). A sharded dim survives only as the major (first non-1) dim of its group, landing on
// the other side's major dim, and only when the shard count divides both sizes: then every
// device's block stays contiguous. Anything else is replicated.
Sharding ReshapeMap(const Sharding& src, const Shape& from, const Shape& to, const ir::Mesh& mesh) {
  Sharding out = Replicated(to.rank());
  if (from.NumElements() == 0 || static_cast<int64_t>(src.dims.size()) != from.rank()) return out;
  int64_t i = 0, j = 0;
  while (i < from.rank() && j < to.rank()) {
    const int64_t i0 = i, j0 = j;
    int64_t pi = from.dim(i++), pj = to.dim(j++);
    while (pi != pj) {
      if (pi < pj) {
        if (i >= from.rank()) return out;
        pi *= from.dim(i++);
      } else {
        if (j >= to.rank()) return out;
        pj *= to.dim(j++);
      }
    }
    int64_t mi = i0, mj = j0;
    while (mi < i - 1 && from.dim(mi) == 1) ++mi;
    while (mj < j - 1 && to.dim(mj) == 1) ++mj;
    const Axes& axes = src.dims[mi];
    if (axes.empty()) continue;
    const int64_t k = mesh.AxesSize(axes);
    if (from.dim(mi) % k == 0 && to.dim(mj) % k == 0) out.dims[mj] = axes;
  }
  return out;
}
std::vector<Proposal> ReshapeForward(const Node& n, Operands ops, const ir::Mesh& mesh) {
  if (!ops[0]) return {};
  return {{0, 0, ReshapeMap(*ops[0], ShapeOf(n.operand(0)), ShapeOf(n.result()), mesh)}};
}
std::vector<Proposal> ReshapeBackward(const Node& n, Operands res, const ir::Mesh& mesh) {
  if (!res[0]) return {};
  return {{0, 0, ReshapeMap(*res[0], ShapeOf(n.result()), ShapeOf(n.operand(0)), mesh)}};
}

// transpose: result dim i is operand dim perm[i].
Pairs TransposePairs(const Node& n) {
  const auto& perm = n.attrs_as<ir::TransposeAttrs>().perm;
  Pairs out;
  for (size_t i = 0; i < perm.size(); ++i) out.push_back({perm[i], static_cast<int64_t>(i)});
  return out;
}
std::vector<Proposal> TransposeForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, {{0, TransposePairs(n)}}, {});
}
std::vector<Proposal> TransposeBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, {{0, TransposePairs(n)}});
}

// Ops that keep every dim but move data along some (the "touched" dims, replicated): slice, pad,
// reverse, cumsum, dynamic_slice.
template <std::vector<bool> (*Touched)(const Node&)>
std::vector<Proposal> KeepDimsForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, {{0, IdentityExcept(Rank(n.result()), Touched(n))}}, {});
}
template <std::vector<bool> (*Touched)(const Node&)>
std::vector<Proposal> KeepDimsBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, {{0, IdentityExcept(Rank(n.result()), Touched(n))}});
}

std::vector<bool> SliceTouched(const Node& n) {
  const auto& a = n.attrs_as<ir::SliceAttrs>();
  const Shape& s = ShapeOf(n.operand(0));
  std::vector<bool> t(s.rank(), false);
  for (int64_t d = 0; d < s.rank(); ++d)
    t[d] = a.start.at(d) != 0 || a.limit.at(d) != s.dim(d) || a.strides.at(d) != 1;
  return t;
}
std::vector<bool> PadTouched(const Node& n) {
  const auto& a = n.attrs_as<ir::PadAttrs>();
  std::vector<bool> t(Rank(n.result()), false);
  for (size_t d = 0; d < t.size(); ++d) t[d] = a.low.at(d) != 0 || a.high.at(d) != 0 || a.interior.at(d) != 0;
  return t;
}
std::vector<bool> ReverseTouched(const Node& n) {
  return TouchedDims(Rank(n.result()), n.attrs_as<ir::ReverseAttrs>().dims);
}
std::vector<bool> CumsumTouched(const Node& n) {
  return TouchedDims(Rank(n.result()), {n.attrs_as<ir::CumsumAttrs>().dim});
}
std::vector<bool> DynamicSliceTouched(const Node& n) {
  const Shape& s = ShapeOf(n.operand(0));
  const auto& sizes = n.attrs_as<ir::DynamicSliceAttrs>().sizes;
  std::vector<bool> t(s.rank(), false);
  for (int64_t d = 0; d < s.rank(); ++d) t[d] = sizes.at(d) != s.dim(d);
  return t;
}

// dynamic_update_slice(x, update, starts...): dims the update does not cover whole are touched;
// x and update both map to the result elsewhere.
std::vector<std::pair<int, Pairs>> DusPairs(const Node& n) {
  const Shape& x = ShapeOf(n.operand(0));
  const Shape& u = ShapeOf(n.operand(1));
  std::vector<bool> t(x.rank(), false);
  for (int64_t d = 0; d < x.rank(); ++d) t[d] = u.dim(d) != x.dim(d);
  Pairs p = IdentityExcept(x.rank(), t);
  return {{0, p}, {1, p}};
}
std::vector<Proposal> DusForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, DusPairs(n), {});
}
std::vector<Proposal> DusBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, DusPairs(n));
}

// concatenate: the joined dim is replicated; every operand maps the others.
std::vector<std::pair<int, Pairs>> ConcatPairs(const Node& n) {
  const int64_t rank = Rank(n.result());
  Pairs p = IdentityExcept(rank, TouchedDims(rank, {n.attrs_as<ir::ConcatenateAttrs>().dim}));
  std::vector<std::pair<int, Pairs>> out;
  for (size_t i = 0; i < n.num_operands(); ++i) out.push_back({static_cast<int>(i), p});
  return out;
}
std::vector<Proposal> ConcatForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, ConcatPairs(n), {});
}
std::vector<Proposal> ConcatBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, ConcatPairs(n));
}

// gather(x, indices) {axis, batch_dims}: result = x[:axis] + indices[batch_dims:] + x[axis+1:].
// x's gathered axis is replicated (any row may be read); every other dim of x and of indices maps
// to its result dim.
std::pair<Pairs, Pairs> GatherPairs(const Node& n, int64_t x_rank, int64_t idx_rank) {
  const auto& a = n.attrs_as<ir::GatherAttrs>();
  Pairs x, idx;
  for (int64_t d = 0; d < x_rank; ++d) {
    if (d < a.axis) x.push_back({d, d});
    if (d > a.axis) x.push_back({d, a.axis + (idx_rank - a.batch_dims) + (d - a.axis - 1)});
  }
  for (int64_t j = 0; j < idx_rank; ++j) idx.push_back({j, j < a.batch_dims ? j : a.axis + (j - a.batch_dims)});
  return {x, idx};
}
std::vector<std::pair<int, Pairs>> GatherOperandPairs(const Node& n) {
  auto [x, idx] = GatherPairs(n, Rank(n.operand(0)), Rank(n.operand(1)));
  return {{0, x}, {1, idx}};
}
std::vector<Proposal> GatherForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, GatherOperandPairs(n), {});
}
std::vector<Proposal> GatherBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, GatherOperandPairs(n));
}

// scatter_add(x, indices, updates): conservative. The result is x's shape with the scattered axis
// replicated; x and updates map their other dims (updates through gather's layout); indices get
// nothing from here.
std::vector<std::pair<int, Pairs>> ScatterPairs(const Node& n) {
  const auto& a = n.attrs_as<ir::GatherAttrs>();
  const int64_t rank = Rank(n.result());
  Pairs x = IdentityExcept(rank, TouchedDims(rank, {a.axis}));
  auto [gx, gidx] = GatherPairs(n, rank, Rank(n.operand(1)));
  // gx maps result (= x) dims to update dims; the pairs here go update dim -> result dim.
  return {{0, x}, {2, Invert(gx)}};
}
std::vector<Proposal> ScatterForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, ScatterPairs(n), {});
}
std::vector<Proposal> ScatterBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, ScatterPairs(n));
}

// ---------------------------------------------------------------------------------------------
// Reductions, scans, sort.

// Operand dims kept by dropping `dropped`, mapped to their result positions.
Pairs DropPairs(int64_t rank, const std::vector<int64_t>& dropped) {
  std::vector<bool> gone = TouchedDims(rank, dropped);
  Pairs out;
  for (int64_t d = 0, r = 0; d < rank; ++d)
    if (!gone[d]) out.push_back({d, r++});
  return out;
}

Axes AppendNew(Axes to, const Axes& more) {
  for (const auto& a : more)
    if (std::find(to.begin(), to.end(), a) == to.end()) to.push_back(a);
  return to;
}

// reduce: a sum over sharded dims leaves a partial sum over their axes; other kinds cannot be
// left pending (partial means sum), so their reduced dims simply end replicated.
std::vector<Proposal> ReduceForward(const Node& n, Operands ops, const ir::Mesh&) {
  if (!ops[0]) return {};
  const auto& a = n.attrs_as<ir::ReduceAttrs>();
  Axes partial;
  if (a.kind == ir::ReduceKind::kSum) {
    partial = ops[0]->partial;
    for (int64_t d : a.dims)
      if (d >= 0 && d < static_cast<int64_t>(ops[0]->dims.size())) partial = AppendNew(partial, ops[0]->dims[d]);
  }
  return Project(n, ops, 0, {{0, DropPairs(Rank(n.operand(0)), a.dims)}}, partial);
}
std::vector<Proposal> ReduceBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, {{0, DropPairs(Rank(n.operand(0)), n.attrs_as<ir::ReduceAttrs>().dims)}});
}

std::vector<Proposal> ArgReduceForward(const Node& n, Operands ops, const ir::Mesh&) {
  return Project(n, ops, 0, {{0, DropPairs(Rank(n.operand(0)), {n.attrs_as<ir::ArgReduceAttrs>().dim})}}, {});
}
std::vector<Proposal> ArgReduceBackward(const Node& n, Operands res, const ir::Mesh&) {
  return ProjectBack(n, res, 0, {{0, DropPairs(Rank(n.operand(0)), {n.attrs_as<ir::ArgReduceAttrs>().dim})}});
}

// sort: every operand and result share a shape; the sorted dim is replicated.
Pairs SortPairs(const Node& n) {
  const int64_t rank = Rank(n.result());
  return IdentityExcept(rank, TouchedDims(rank, {n.attrs_as<ir::SortAttrs>().dim}));
}
std::vector<Proposal> SortForward(const Node& n, Operands ops, const ir::Mesh&) {
  std::vector<Proposal> out;
  for (size_t r = 0; r < n.num_results(); ++r)
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]) out.push_back({static_cast<int>(r), static_cast<int>(i), Map(*ops[i], Rank(n.result(r)), SortPairs(n))});
  return out;
}
std::vector<Proposal> SortBackward(const Node& n, Operands res, const ir::Mesh&) {
  std::vector<Proposal> out;
  for (size_t r = 0; r < res.size(); ++r)
    for (size_t i = 0; i < n.num_operands(); ++i)
      if (res[r]) out.push_back({static_cast<int>(i), static_cast<int>(r), Map(*res[r], Rank(n.operand(i)), SortPairs(n))});
  return out;
}

// ---------------------------------------------------------------------------------------------
// dot_general: result dims are batch, lhs free, rhs free. Batch dims are shared by both operands,
// free dims keep their axes, and contracting dims sharded on axes A (on either side; both must
// agree, so the other is sliced to match) give a result that is a partial sum over A; so does one
// partial operand (the product is linear in each side).

struct DotDims {
  Pairs lhs, rhs;  // operand dim -> result dim
};
DotDims DotPairs(const Node& n) {
  const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
  std::vector<int64_t> lf = ir::DotFreeDims(Rank(n.operand(0)), a.lhs_batch, a.lhs_contracting);
  std::vector<int64_t> rf = ir::DotFreeDims(Rank(n.operand(1)), a.rhs_batch, a.rhs_contracting);
  DotDims out;
  const int64_t nb = static_cast<int64_t>(a.lhs_batch.size());
  for (int64_t i = 0; i < nb; ++i) {
    out.lhs.push_back({a.lhs_batch[i], i});
    out.rhs.push_back({a.rhs_batch[i], i});
  }
  for (size_t k = 0; k < lf.size(); ++k) out.lhs.push_back({lf[k], nb + static_cast<int64_t>(k)});
  for (size_t k = 0; k < rf.size(); ++k)
    out.rhs.push_back({rf[k], nb + static_cast<int64_t>(lf.size() + k)});
  return out;
}

Axes DotPartial(const Node& n, Operands ops) {
  const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
  Axes partial;
  const bool lhs_larger = n.operand(0)->type().ByteSize() >= n.operand(1)->type().ByteSize();
  for (size_t k = 0; k < a.lhs_contracting.size(); ++k) {
    Axes l = ops[0] ? ops[0]->dims.at(a.lhs_contracting[k]) : Axes{};
    Axes r = ops[1] ? ops[1]->dims.at(a.rhs_contracting[k]) : Axes{};
    // Both sides must be split alike; when they disagree, the larger operand keeps its layout.
    partial = AppendNew(partial, l.empty() ? r : r.empty() ? l : lhs_larger ? l : r);
  }
  // Linear in each side: one partial operand (not both) leaves its partial axes pending too, by a
  // factor known finite (Note [Partial sums through products]).
  const Axes& pl = PartialOf(ops, 0);
  const Axes& pr = PartialOf(ops, 1);
  if (!pl.empty() && pr.empty() && CarriesPartialSums(*n.operand(1), false)) partial = AppendNew(partial, pl);
  if (pl.empty() && !pr.empty() && CarriesPartialSums(*n.operand(0), false)) partial = AppendNew(partial, pr);
  return partial;
}

std::vector<Proposal> DotForward(const Node& n, Operands ops, const ir::Mesh&) {
  DotDims p = DotPairs(n);
  return Project(n, ops, 0, {{0, p.lhs}, {1, p.rhs}}, DotPartial(n, ops));
}
std::vector<Proposal> DotBackward(const Node& n, Operands res, const ir::Mesh&) {
  DotDims p = DotPairs(n);
  std::vector<Proposal> out = ProjectBack(n, res, 0, {{0, p.lhs}, {1, p.rhs}});
  // A partial result asks for its contracting dims split over the partial axes (the first
  // contracting dim takes them all).
  const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
  if (!res[0] || res[0]->partial.empty() || a.lhs_contracting.empty()) return out;
  for (Proposal& prop : out) {
    Axes free;
    for (const Axes& d : prop.sharding.dims)
      for (const auto& x : d)
        if (std::find(res[0]->partial.begin(), res[0]->partial.end(), x) != res[0]->partial.end())
          free.push_back(x);
    if (!free.empty()) continue;  // an axis both partial and on a dim: not a layout to copy
    const int64_t c = prop.target == 0 ? a.lhs_contracting[0] : a.rhs_contracting[0];
    prop.sharding.dims[c] = res[0]->partial;
  }
  return out;
}

// optimization_barrier: result i is operand i.
std::vector<Proposal> BarrierForward(const Node& n, Operands ops, const ir::Mesh&) {
  std::vector<Proposal> out;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]) out.push_back({static_cast<int>(i), static_cast<int>(i), Sharding{ops[i]->dims, {}}});
  return out;
}
std::vector<Proposal> BarrierBackward(const Node& n, Operands res, const ir::Mesh&) {
  std::vector<Proposal> out;
  for (size_t i = 0; i < res.size(); ++i)
    if (res[i]) out.push_back({static_cast<int>(i), static_cast<int>(i), Map(*res[i], Rank(n.operand(i)),
                                                                              IdentityExcept(Rank(n.operand(i)), {}))});
  return out;
}

// ---------------------------------------------------------------------------------------------
// The table.

std::array<ShardingRule, ir::kNumOps> BuildTable() {
  std::array<ShardingRule, ir::kNumOps> t{};
  auto set = [&](OpKind k, ForwardRule f, BackwardRule b) { t[static_cast<size_t>(k)] = {f, b, {}}; };
  auto replicated = [&](OpKind k, std::string_view why) { t[static_cast<size_t>(k)] = {nullptr, nullptr, why}; };

  // Sources: nothing flows in; users' layouts flow back into iota and constants (the partitioner
  // materialises each device's block).
  set(OpKind::kConstant, None, None);
  set(OpKind::kIota, None, None);
  replicated(OpKind::kParameter, "a parameter's layout is the caller's: it is annotated or replicated");
  replicated(OpKind::kReplicaId, "the replica's own index: a scalar, the same in the global program");
  for (const ir::OpInfo& info : ir::AllOps())
    if (info.Has(ir::kElementwise)) set(info.kind, ElementwiseForward, ElementwiseBackward);
  set(OpKind::kBroadcastInDim, BroadcastForward, BroadcastBackward);
  set(OpKind::kReshape, ReshapeForward, ReshapeBackward);
  set(OpKind::kTranspose, TransposeForward, TransposeBackward);
  set(OpKind::kSlice, KeepDimsForward<SliceTouched>, KeepDimsBackward<SliceTouched>);
  set(OpKind::kPad, KeepDimsForward<PadTouched>, KeepDimsBackward<PadTouched>);
  set(OpKind::kReverse, KeepDimsForward<ReverseTouched>, KeepDimsBackward<ReverseTouched>);
  set(OpKind::kDynamicSlice, KeepDimsForward<DynamicSliceTouched>, KeepDimsBackward<DynamicSliceTouched>);
  set(OpKind::kDynamicUpdateSlice, DusForward, DusBackward);
  set(OpKind::kConcatenate, ConcatForward, ConcatBackward);
  set(OpKind::kGather, GatherForward, GatherBackward);
  set(OpKind::kScatterAdd, ScatterForward, ScatterBackward);
  set(OpKind::kReduce, ReduceForward, ReduceBackward);
  set(OpKind::kArgMax, ArgReduceForward, ArgReduceBackward);
  set(OpKind::kArgMin, ArgReduceForward, ArgReduceBackward);
  set(OpKind::kCumsum, KeepDimsForward<CumsumTouched>, KeepDimsBackward<CumsumTouched>);
  set(OpKind::kSort, SortForward, SortBackward);
  set(OpKind::kDotGeneral, DotForward, DotBackward);
  // Random bits: users' layouts flow back, and the partitioner draws each device's runs of the
  // stream (Note [Partitioned random bits], partitioner.cc); key and counter stay replicated.
  set(OpKind::kRngBitGenerator, None, None);
  for (OpKind k : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kAllToAll,
                   OpKind::kCollectivePermute})
    replicated(k, "a collective works on per-replica values: it belongs in a partitioned module");
  replicated(OpKind::kCustomCall, "an opaque kernel sees whole tensors");
  set(OpKind::kOptimizationBarrier, BarrierForward, BarrierBackward);
  replicated(OpKind::kFusion, "a fused kernel is compiler output: the fuse pass runs on the partitioned module");
  return t;
}

}  // namespace

const ShardingRule* GetShardingRule(ir::OpKind op) {
  static const std::array<ShardingRule, ir::kNumOps> table = BuildTable();
  const ShardingRule& r = table[static_cast<size_t>(op)];
  if (r.forward == nullptr && r.replicated_reason.empty()) return nullptr;
  return &r;
}

namespace {
bool Carries(const ir::Value& factor, bool divisor, int depth) {
  const DType t = factor.dtype();
  if (!divisor && (IsInteger(t) || IsBool(t))) return true;  // integer products wrap exactly
  if (depth > 64) return false;
  const Node& n = *factor.node();
  switch (n.op()) {
    case OpKind::kConstant: {
      const ir::Literal& v = n.attrs_as<ir::ConstantAttrs>().value;
      for (int64_t i = 0; i < v.NumElements(); ++i) {
        const double x = v.GetDouble(i);
        if (divisor ? x == 0 : std::isinf(x)) return false;  // NaN gives NaN either way
      }
      return true;
    }
    case OpKind::kIota:  // 0, 1, 2, ...: no divisor; finite unless an f16 counts past 65504
      return !divisor && (t != DType::kF16 || factor.shape().dim(n.attrs_as<ir::IotaAttrs>().dim) <= 65505);
    case OpKind::kConvert: {
      const DType from = n.operand(0)->dtype();
      if (IsFloat(from)) {
        const bool exact = from == t || ((from == DType::kBF16 || from == DType::kF16) && DTypeSize(t) >= 4) ||
                           (from == DType::kF32 && t == DType::kF64);
        return exact && Carries(*n.operand(0), divisor, depth + 1);
      }
      if (divisor) return Carries(*n.operand(0), true, depth + 1);
      return t != DType::kF16 || DTypeSize(from) == 1;  // an integer in range: finite
    }
    case OpKind::kBroadcastInDim:
    case OpKind::kReshape:
    case OpKind::kTranspose:
    case OpKind::kSlice:
    case OpKind::kReverse: return Carries(*n.operand(0), divisor, depth + 1);
    case OpKind::kConcatenate:
      return std::all_of(n.operands().begin(), n.operands().end(),
                         [&](const ir::Value* o) { return Carries(*o, divisor, depth + 1); });
    default: return false;
  }
}
}  // namespace

bool CarriesPartialSums(const ir::Value& factor, bool divisor) { return Carries(factor, divisor, 0); }

Sharding Replicated(int64_t rank) {
  Sharding s;
  s.dims.resize(static_cast<size_t>(rank));
  return s;
}

bool IsReplicated(const Sharding& s) {
  if (!s.partial.empty()) return false;
  for (const auto& d : s.dims)
    if (!d.empty()) return false;
  return true;
}

int64_t NumShards(const Sharding& s, const ir::Mesh& mesh) {
  int64_t n = 1;
  for (const auto& d : s.dims) n *= mesh.AxesSize(d);
  return n;
}

}  // namespace axle::spmd
