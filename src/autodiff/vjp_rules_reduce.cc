// VJP rules of the reductions, scans, sort and dot_general.
//
// Notation: x = operand 0, r = the result, g = r's cotangent.
#include <algorithm>
#include <array>
#include <numeric>

#include "autodiff/vjp_internal.h"

namespace axle::autodiff::internal {
namespace {

using ir::CompareDir;
using ir::ReduceKind;
using G = std::span<Value* const>;

Value* X(const Node& n, int i = 0) { return n.operand(static_cast<size_t>(i)); }

// reduce sum: g broadcast back over the reduced dims.
// reduce prod: g * (product of the other elements of x's group), zero-safe: with z = the number
//   of zeros in the group and P = the product of its nonzero elements, the product of the others
//   is P / x when z = 0, P at the zero when z = 1 (0 elsewhere), and 0 when z >= 2.
// reduce max/min: g goes to the elements equal to the result, divided equally among ties
//   (JAX's convention): g * [x == r] / count(x == r).
Cotangents ReduceVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::ReduceAttrs>();
  Value* x = X(n);
  const Shape& shape = x->shape();
  const std::vector<int64_t> kept = KeptDims(shape.rank(), a.dims);
  Value* gb = Broadcast(b, g[0], shape, kept);
  switch (a.kind) {
    case ReduceKind::kSum:
      return {gb};
    case ReduceKind::kProd: {
      Value* zero = FullLike(b, x, 0.0);
      Value* one = FullLike(b, x, 1.0);
      Value* is_zero = Cmp(b, CompareDir::kEq, x, zero);
      Value* safe_x = b.Select(is_zero, one, x);
      Value* p = Broadcast(b, b.Reduce(safe_x, ReduceKind::kProd, a.dims), shape, kept);
      Value* z = Broadcast(b, ReduceSum(b, Mask(b, is_zero, x), a.dims), shape, kept);
      Value* at_zero = b.Select(Cmp(b, CompareDir::kEq, z, one), p, zero);
      Value* at_nonzero = b.Select(Cmp(b, CompareDir::kEq, z, zero), b.Div(p, safe_x), zero);
      return {b.Mul(gb, b.Select(is_zero, at_zero, at_nonzero))};
    }
    case ReduceKind::kMax:
    case ReduceKind::kMin: {
      Value* hit = Mask(b, Cmp(b, CompareDir::kEq, x, Broadcast(b, n.result(), shape, kept)), x);
      Value* count = Broadcast(b, ReduceSum(b, hit, a.dims), shape, kept);
      return {b.Div(b.Mul(gb, hit), count)};
    }
    case ReduceKind::kAnd:
    case ReduceKind::kOr:
      return {nullptr};  // integer/bool only: never reached with a cotangent
  }
  return {nullptr};
}

// cumsum(dim, reverse): the running sum in the other direction, cumsum(g, dim, !reverse).
Cotangents CumsumVjp(Builder& b, const Node& n, G g) {
  auto a = n.attrs_as<ir::CumsumAttrs>();
  a.reverse = !a.reverse;
  return {b.Build1(OpKind::kCumsum, {g[0]}, a)};
}

// sort(keys, others...): result j along dim came from position perm[j] of the operands, where
// perm = the second result of sort(keys, iota) with the same attributes (the sort is stable, so
// the permutation is the forward one). Each float operand receives its result's cotangent
// scattered back: out[..., perm[j]] = g[..., j]. scatter_add takes along the last axis with all
// leading dims as batch dims, so dim is transposed to the end and back.
Cotangents SortVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::SortAttrs>();
  Value* keys = X(n);
  const int64_t rank = keys->type().rank();
  const DType idx_type = keys->shape().dim(a.dim) > (int64_t{1} << 30) ? DType::kI64 : DType::kI32;
  Value* iota = b.Iota(ir::TensorType(idx_type, keys->shape()), a.dim);
  Value* perm = b.Build(OpKind::kSort, {keys, iota}, a)[1];
  std::vector<int64_t> to_last(static_cast<size_t>(rank));
  std::iota(to_last.begin(), to_last.end(), 0);
  to_last.erase(to_last.begin() + a.dim);
  to_last.push_back(a.dim);
  const bool moved = a.dim != rank - 1;
  auto to_end = [&](Value* v) { return moved ? b.Transpose(v, to_last) : v; };
  Value* perm_t = to_end(perm);
  const ir::GatherAttrs ga{rank - 1, rank - 1};
  Cotangents r;
  for (size_t k = 0; k < n.num_operands(); ++k) {
    if (g[k] == nullptr || !CarriesGradient(X(n, static_cast<int>(k)))) {
      r.push_back(nullptr);
      continue;
    }
    Value* gt = to_end(g[k]);
    Value* s = b.Build1(OpKind::kScatterAdd, {Zeros(b, gt->type()), perm_t, gt}, ga);
    r.push_back(moved ? b.Transpose(s, InversePermutation(to_last)) : s);
  }
  return r;
}

// Positions of `dims` in sorted order: rank[i] = how many entries of dims are smaller than dims[i].
std::vector<int64_t> SortedRanks(const std::vector<int64_t>& dims) {
  std::vector<int64_t> ranks;
  for (int64_t d : dims)
    ranks.push_back(std::count_if(dims.begin(), dims.end(), [&](int64_t e) { return e < d; }));
  return ranks;
}

// The cotangent of one side of dot_general(lhs, rhs). With result dims [batch, lhs free, rhs
// free], the cotangent of `self` is dot_general(g, other) contracting g's `other`-free dims (from
// g_other_free_first on) with
// other's free dims and batching g's batch dims with other's batch dims. That yields
// [batch, self free, self contracting (in other's contracting dim order, sorted)], which a
// transpose puts back into self's dim order.
Value* DotSide(Builder& b, Value* g, Value* self, Value* other,
               const std::vector<int64_t>& self_batch, const std::vector<int64_t>& self_contracting,
               const std::vector<int64_t>& other_batch,
               const std::vector<int64_t>& other_contracting, int64_t g_other_free_first) {
  const int64_t nb = static_cast<int64_t>(self_batch.size());
  std::vector<int64_t> self_used = self_batch, other_used = other_batch;
  self_used.insert(self_used.end(), self_contracting.begin(), self_contracting.end());
  other_used.insert(other_used.end(), other_contracting.begin(), other_contracting.end());
  const std::vector<int64_t> self_free = KeptDims(self->type().rank(), self_used);
  const std::vector<int64_t> other_free = KeptDims(other->type().rank(), other_used);
  ir::DotGeneralAttrs d;
  for (int64_t i = 0; i < nb; ++i) d.lhs_batch.push_back(i);
  d.rhs_batch = other_batch;
  for (size_t i = 0; i < other_free.size(); ++i)
    d.lhs_contracting.push_back(g_other_free_first + static_cast<int64_t>(i));
  d.rhs_contracting = other_free;
  Value* dot = b.DotGeneral(g, other, std::move(d));
  // dot dims: [batch (nb), g's remaining free dims = self free, other's free after removing
  // batch+contracting-with-g = other_contracting dims in ascending order].
  std::vector<int64_t> perm(static_cast<size_t>(self->type().rank()));
  for (int64_t i = 0; i < nb; ++i) perm[static_cast<size_t>(self_batch[i])] = i;
  for (size_t j = 0; j < self_free.size(); ++j)
    perm[static_cast<size_t>(self_free[j])] = nb + static_cast<int64_t>(j);
  const std::vector<int64_t> ranks = SortedRanks(other_contracting);
  const int64_t base = nb + static_cast<int64_t>(self_free.size());
  for (size_t m = 0; m < self_contracting.size(); ++m)
    perm[static_cast<size_t>(self_contracting[m])] = base + ranks[m];
  // result dim i of the transpose must be dot dim perm[i]: that is exactly "self dim i <- perm[i]".
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  return identity ? dot : b.Transpose(dot, perm);
}

// dot_general: the standard XLA VJP, one dot_general per operand (see DotSide).
Cotangents DotGeneralVjp(Builder& b, const Node& n, G g_in) {
  const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
  Value* lhs = X(n, 0);
  Value* rhs = X(n, 1);
  // An f32 product of halves: its cotangent goes back in the operands' dtype, as each side's
  // product is one of halves again.
  Value* g0 = g_in[0]->dtype() == lhs->dtype() ? g_in[0] : b.Convert(g_in[0], lhs->dtype());
  const std::array<Value*, 1> g = {g0};
  const int64_t nb = static_cast<int64_t>(a.lhs_batch.size());
  const int64_t lhs_free = lhs->type().rank() - nb - static_cast<int64_t>(a.lhs_contracting.size());
  Value* gl = DotSide(b, g[0], lhs, rhs, a.lhs_batch, a.lhs_contracting, a.rhs_batch,
                      a.rhs_contracting, nb + lhs_free);
  Value* gr = DotSide(b, g[0], rhs, lhs, a.rhs_batch, a.rhs_contracting, a.lhs_batch,
                      a.lhs_contracting, nb);
  return {gl, gr};
}

}  // namespace

void RegisterReduceVjps(VjpTable& t) {
  SetRule(t, OpKind::kReduce, ReduceVjp);
  SetNotDifferentiable(t, OpKind::kArgMax, "integer result (an index)");
  SetNotDifferentiable(t, OpKind::kArgMin, "integer result (an index)");
  SetRule(t, OpKind::kCumsum, CumsumVjp);
  SetRule(t, OpKind::kSort, SortVjp);
  SetRule(t, OpKind::kDotGeneral, DotGeneralVjp);
}

}  // namespace axle::autodiff::internal
