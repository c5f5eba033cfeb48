// Finite-difference checks of the collectives' VJP rules on 2 and 4 replicas
// (EvaluateReplicated). The loss is the sum over replicas of each replica's sum(y * w), with
// different weights w on every replica.
#include <fmt/format.h>

#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::ReduceKind;
using ir::ReplicaGroups;

// Replica groups to try for n replicas: all, and (for 4) pairs.
std::vector<ReplicaGroups> GroupsFor(int64_t n) {
  if (n == 4) return {{}, {{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}};
  return {{}};
}

GradCheckOptions On(int64_t replicas) { return {.num_replicas = replicas}; }

TEST(GradCollectiveTest, AllReduce) {
  for (int64_t n : {2, 4})
    for (const ReplicaGroups& groups : GroupsFor(n))
      for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin})
        CheckGradients(
            fmt::format("all_reduce {} on {}", ir::EnumName(k), n), {F64({2, 3})},
            [&](Builder& b, const Values& p) {
              return b.Mul(b.Build1(OpKind::kAllReduce, {p[0]}, ir::AllReduceAttrs{k, groups}),
                           p[0]);
            },
            On(n));
}

TEST(GradCollectiveTest, AllReduceProdIsNotDifferentiable) {
  EXPECT_THROW(
      CheckGradients(
          "all_reduce prod", {F64({2})},
          [](Builder& b, const Values& p) {
            return b.Build1(OpKind::kAllReduce, {p[0]}, ir::AllReduceAttrs{ReduceKind::kProd, {}});
          },
          On(2)),
      Error);
}

TEST(GradCollectiveTest, AllGatherAndReduceScatter) {
  for (int64_t n : {2, 4})
    for (const ReplicaGroups& groups : GroupsFor(n))
      for (int64_t dim : {0, 1}) {
        CheckGradients(
            fmt::format("all_gather on {}", n), {F64({2, 4})},
            [&](Builder& b, const Values& p) {
              return b.Build1(OpKind::kAllGather, {p[0]}, ir::AllGatherAttrs{dim, groups});
            },
            On(n));
        CheckGradients(
            fmt::format("reduce_scatter on {}", n), {F64({4, 4})},
            [&](Builder& b, const Values& p) {
              Value* s = b.Build1(OpKind::kReduceScatter, {p[0]},
                                  ir::ReduceScatterAttrs{ReduceKind::kSum, dim, groups});
              return b.Mul(s, s);
            },
            On(n));
      }
}

TEST(GradCollectiveTest, AllToAll) {
  for (int64_t n : {2, 4})
    for (const ReplicaGroups& groups : GroupsFor(n))
      for (auto [split, concat] :
           std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}, {0, 0}, {1, 1}})
        CheckGradients(
            fmt::format("all_to_all on {}", n), {F64({4, 4})},
            [&](Builder& b, const Values& p) {
              return b.Build1(OpKind::kAllToAll, {p[0]}, ir::AllToAllAttrs{split, concat, groups});
            },
            On(n));
}

TEST(GradCollectiveTest, CollectivePermute) {
  const std::vector<ReplicaGroups> pairs_2 = {{{0, 1}, {1, 0}}, {{0, 1}}};
  const std::vector<ReplicaGroups> pairs_4 = {
      {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, {{0, 2}, {3, 1}}, {{1, 1}}};
  for (int64_t n : {2, 4})
    for (const ReplicaGroups& pairs : n == 2 ? pairs_2 : pairs_4)
      CheckGradients(
          fmt::format("collective_permute on {}", n), {F64({3})},
          [&](Builder& b, const Values& p) {
            Value* y =
                b.Build1(OpKind::kCollectivePermute, {p[0]}, ir::CollectivePermuteAttrs{pairs});
            return b.Mul(y, p[0]);
          },
          On(n));
}

TEST(GradCollectiveTest, ChainOfCollectives) {
  // h = tanh(x @ w): [4, 2]; gathered: [4n, 2]; scattered: [4, 2]; exchanged: [4/n, 2n];
  // all_reduce max of r * h; then a * collective_permute(a) over a cycle.
  for (int64_t n : {2, 4})
    CheckGradients(
        fmt::format("collective chain on {}", n), {F64({4, 3}), F64({3, 2})},
        [n](Builder& b, const Values& p) {
          Value* h = b.Unary(OpKind::kTanh, b.MatMul(p[0], p[1]));
          Value* s = b.Build1(OpKind::kAllGather, {h}, ir::AllGatherAttrs{0, {}});
          Value* r = b.Build1(OpKind::kReduceScatter, {b.Mul(s, s)},
                              ir::ReduceScatterAttrs{ReduceKind::kSum, 0, {}});
          Value* m =
              b.Build1(OpKind::kAllReduce, {b.Mul(r, h)}, ir::AllReduceAttrs{ReduceKind::kMax, {}});
          Value* a = b.Build1(OpKind::kAllToAll, {b.Add(m, h)}, ir::AllToAllAttrs{0, 1, {}});
          ReplicaGroups cycle;
          for (int64_t i = 0; i < n; ++i) cycle.push_back({i, (i + 1) % n});
          return b.Mul(
              a, b.Build1(OpKind::kCollectivePermute, {a}, ir::CollectivePermuteAttrs{cycle}));
        },
        On(n));
}

TEST(GradCollectiveTest, OptimizationBarrier) {
  CheckGradients("optimization_barrier", {F64({3}), F64({2})}, [](Builder& b, const Values& p) {
    std::vector<Value*> r = b.Build(OpKind::kOptimizationBarrier, {p[0], p[1]});
    return b.Mul(r[0], b.BroadcastInDim(b.Reduce(r[1], ReduceKind::kSum, {0}), Shape{3}, {}));
  });
}

}  // namespace
}  // namespace axle::autodiff::test
