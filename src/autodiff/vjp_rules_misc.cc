// VJP entries of the sources, random numbers, collectives and escapes.
//
// Collectives: the differentiated quantity is the sum over replicas of each replica's
// <output, cotangent> (SPMD: every replica runs the same backward program), so each rule sends the
// cotangent back along the forward communication, transposed.
#include <fmt/format.h>

#include "autodiff/vjp_internal.h"
#include "ir/printer.h"

namespace axle::autodiff::internal {
namespace {

using ir::CompareDir;
using ir::ReduceKind;
using G = std::span<Value* const>;

Value* X(const Node& n) { return n.operand(0); }

[[noreturn]] void NotDifferentiableKind(const Node& n, ReduceKind kind, std::string_view why) {
  FailAt(n.loc(), "autodiff: cannot differentiate {} with kind={}: {}\n  node: {}", n.name(),
         ir::EnumName(kind), why, ir::PrintNode(n));
}

// all_reduce sum: every member's result is the group sum, so x_r receives the group sum of the
//   cotangents: all_reduce(sum, g).
// all_reduce max/min: the group sum of the cotangents goes to the members whose operand equals
//   the result, divided equally among ties (as reduce max/min):
//   all_reduce(sum, g) * [x == r] / all_reduce(sum, [x == r]).
Cotangents AllReduceVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::AllReduceAttrs>();
  ir::AllReduceAttrs sum{ReduceKind::kSum, a.groups};
  Value* total = b.Build1(OpKind::kAllReduce, {g[0]}, sum);
  if (a.kind == ReduceKind::kSum) return {total};
  if (a.kind == ReduceKind::kMax || a.kind == ReduceKind::kMin) {
    Value* hit = Mask(b, Cmp(b, CompareDir::kEq, X(n), n.result()), X(n));
    Value* count = b.Build1(OpKind::kAllReduce, {hit}, sum);
    return {b.Div(b.Mul(total, hit), count)};
  }
  NotDifferentiableKind(n, a.kind,
                        a.kind == ReduceKind::kProd
                            ? "the zero-safe product of the other replicas' operands is not "
                              "implemented (all_gather, then reduce prod, is differentiable)"
                            : "integer/bool reduction");
}

// all_gather(dim): member k's operand is chunk k of every member's result, so it receives the
// group sum of chunk k of the cotangents: reduce_scatter(sum, g, dim).
Cotangents AllGatherVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::AllGatherAttrs>();
  return {b.Build1(OpKind::kReduceScatter, {g[0]},
                   ir::ReduceScatterAttrs{ReduceKind::kSum, a.dim, a.groups})};
}

// reduce_scatter(sum, dim): member k's result is chunk k of the group sum, so every member's
// operand receives all the chunks' cotangents: all_gather(g, dim).
Cotangents ReduceScatterVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::ReduceScatterAttrs>();
  if (a.kind != ReduceKind::kSum)
    NotDifferentiableKind(n, a.kind,
                          "only kind=sum is differentiable (use all_reduce, then slice)");
  return {b.Build1(OpKind::kAllGather, {g[0]}, ir::AllGatherAttrs{a.dim, a.groups})};
}

// all_to_all(split=s, concat=c): the inverse exchange, all_to_all(split=c, concat=s): chunk j of
// member k's cotangent along c came from member j's chunk k along s.
Cotangents AllToAllVjp(Builder& b, const Node& n, G g) {
  const auto& a = n.attrs_as<ir::AllToAllAttrs>();
  return {
      b.Build1(OpKind::kAllToAll, {g[0]}, ir::AllToAllAttrs{a.concat_dim, a.split_dim, a.groups})};
}

// collective_permute(pairs): the inverse permutation (each [s, t] becomes [t, s]); replicas that
// sent nothing receive zeros, which is their gradient.
Cotangents CollectivePermuteVjp(Builder& b, const Node& n, G g) {
  ir::CollectivePermuteAttrs inv;
  for (const auto& p : n.attrs_as<ir::CollectivePermuteAttrs>().pairs)
    inv.pairs.push_back({p[1], p[0]});
  return {b.Build1(OpKind::kCollectivePermute, {g[0]}, std::move(inv))};
}

// optimization_barrier: the identity on every operand. (The backward values do not pass through
// a barrier of their own.)
Cotangents OptimizationBarrierVjp(Builder&, const Node& n, G g) {
  Cotangents r;
  for (size_t i = 0; i < n.num_operands(); ++i)
    r.push_back(CarriesGradient(n.operand(i)) ? g[i] : nullptr);
  return r;
}

}  // namespace

void RegisterMiscVjps(VjpTable& t) {
  SetZero(t, OpKind::kConstant, "a source: no operands");
  SetZero(t, OpKind::kParameter, "a source: no operands (a leaf of the gradient)");
  SetNotDifferentiable(t, OpKind::kIota, "a source of integer counts: no operands");
  SetNotDifferentiable(t, OpKind::kReplicaId, "the replica's index: an integer with no operands");
  SetNotDifferentiable(t, OpKind::kRngBitGenerator, "random bits: integer key, counter and result");
  SetRule(t, OpKind::kAllReduce, AllReduceVjp);
  SetRule(t, OpKind::kAllGather, AllGatherVjp);
  SetRule(t, OpKind::kReduceScatter, ReduceScatterVjp);
  SetRule(t, OpKind::kAllToAll, AllToAllVjp);
  SetRule(t, OpKind::kCollectivePermute, CollectivePermuteVjp);
  SetNotDifferentiable(t, OpKind::kCustomCall,
                       "an opaque kernel; express it with primitives, or differentiate the "
                       "frontend composite it came from");
  SetRule(t, OpKind::kOptimizationBarrier, OptimizationBarrierVjp);
  SetNotDifferentiable(t, OpKind::kFusion,
                       "a fused kernel is compiler output (the fuse pass runs after differentiation); "
                       "differentiate the module before fusing it");
}

}  // namespace axle::autodiff::internal
