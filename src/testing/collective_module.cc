#include "testing/collective_module.h"

#include "ir/builder.h"
#include "ir/verifier.h"

namespace axle::testing {

using ir::Builder;
using ir::Module;
using ir::OpKind;
using ir::ReduceKind;
using ir::ReplicaGroups;
using ir::TensorType;
using ir::Value;

// Replica group shapes for n devices: all (empty), one explicit group in reverse order, pairs or
// quads of neighbours, strided groups, singletons.
std::vector<ReplicaGroups> GroupShapes(int64_t n) {
  std::vector<ReplicaGroups> out = {{}};
  std::vector<int64_t> rev;
  for (int64_t r = n - 1; r >= 0; --r) rev.push_back(r);
  out.push_back({rev});
  ReplicaGroups single;
  for (int64_t r = 0; r < n; ++r) single.push_back({r});
  out.push_back(single);
  if (n >= 4) {
    ReplicaGroups pairs, strided;
    for (int64_t r = 0; r < n; r += 2) pairs.push_back({r, r + 1});
    for (int64_t r = 0; r < n / 2; ++r) strided.push_back({r, r + n / 2});
    out.push_back(pairs);
    out.push_back(strided);
  }
  if (n == 8) out.push_back({{0, 2, 4, 6}, {7, 5, 3, 1}});
  return out;
}

// collective_permute pairs: none, a ring, one pair, neighbour swaps.
std::vector<ReplicaGroups> PairShapes(int64_t n) {
  ReplicaGroups ring, one, swap;
  for (int64_t r = 0; r < n; ++r) ring.push_back({r, (r + 1) % n});
  one.push_back({0, n - 1});
  for (int64_t r = 0; r + 1 < n; r += 2) {
    swap.push_back({r, r + 1});
    swap.push_back({r + 1, r});
  }
  return {{}, ring, one, swap};
}

// One module on n replicas with every collective kind over every group shape, on several dtypes;
// elementwise ops before and after so the compiled backend fuses around the collectives.
std::unique_ptr<Module> CollectiveModule(int64_t n) {
  auto m = std::make_unique<Module>("collectives");
  m->set_num_replicas(n);
  Builder b(m->AddFunction("main"), ir::ShapeContext{n});
  const Shape s{8, 16};
  Value* f32 = b.Parameter(0, TensorType(DType::kF32, s), "f32");
  Value* bf16 = b.Parameter(1, TensorType(DType::kBF16, s), "bf16");
  Value* i32 = b.Parameter(2, TensorType(DType::kI32, s), "i32");
  Value* pred = b.Parameter(3, TensorType(DType::kBool, s), "pred");
  Value* u8 = b.Parameter(4, TensorType(DType::kU8, s), "u8");
  Value* f64 = b.Parameter(5, TensorType(DType::kF64, s), "f64");
  Value* f16 = b.Parameter(6, TensorType(DType::kF16, s), "f16");
  Value* x = b.Add(f32, f32);  // a fused kernel feeding the collectives
  std::vector<Value*> results;
  auto id = b.Build1(OpKind::kReplicaId, {});
  results.push_back(id);
  results.push_back(b.Add(x, b.BroadcastInDim(b.Convert(id, DType::kF32), s, {})));
  for (const ReplicaGroups& g : GroupShapes(n)) {
    for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kProd, ReduceKind::kMax, ReduceKind::kMin}) {
      for (Value* v : {x, bf16, i32, u8, f64, f16}) results.push_back(b.Build1(OpKind::kAllReduce, {v}, ir::AllReduceAttrs{k, g}));
    }
    for (ReduceKind k : {ReduceKind::kAnd, ReduceKind::kOr})
      for (Value* v : {i32, pred, u8}) results.push_back(b.Build1(OpKind::kAllReduce, {v}, ir::AllReduceAttrs{k, g}));
    for (int64_t dim : {0, 1})
      for (Value* v : {x, bf16, pred})
        results.push_back(b.Build1(OpKind::kAllGather, {v}, ir::AllGatherAttrs{dim, g}));
    for (int64_t dim : {0, 1}) {
      results.push_back(b.Build1(OpKind::kReduceScatter, {x}, ir::ReduceScatterAttrs{ReduceKind::kSum, dim, g}));
      results.push_back(b.Build1(OpKind::kReduceScatter, {i32}, ir::ReduceScatterAttrs{ReduceKind::kMax, dim, g}));
      results.push_back(b.Build1(OpKind::kReduceScatter, {bf16}, ir::ReduceScatterAttrs{ReduceKind::kSum, dim, g}));
    }
    for (auto [split, concat] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}, {1, 1}, {0, 0}})
      for (Value* v : {x, i32})
        results.push_back(b.Build1(OpKind::kAllToAll, {v}, ir::AllToAllAttrs{split, concat, g}));
    // A collective result consumed by generated code.
    Value* r = b.Build1(OpKind::kAllReduce, {x}, ir::AllReduceAttrs{ReduceKind::kSum, g});
    results.push_back(b.Mul(r, x));
  }
  for (const ReplicaGroups& p : PairShapes(n))
    for (Value* v : {x, i32, pred}) results.push_back(b.Build1(OpKind::kCollectivePermute, {v}, ir::CollectivePermuteAttrs{p}));
  b.Return(results);
  ir::Verify(*m);
  return m;
}

}  // namespace axle::testing
