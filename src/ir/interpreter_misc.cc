// Interpreter kernels of iota, rng_bit_generator and the collectives.
#include <array>

#include "ir/interpreter_internal.h"
#include "ir/philox.h"

namespace axle::ir::interp {
namespace {

std::vector<Literal> ReplicaIdKernel(const Node&, Operands, const ReplicaContext& ctx) {
  return {Literal::FromVector<int32_t>(DType::kI32, Shape({}), {static_cast<int32_t>(ctx.replica)})};
}

std::vector<Literal> IotaKernel(const Node& node, Operands, const ReplicaContext&) {
  Literal out(node.result()->type());
  const size_t dim = static_cast<size_t>(node.attrs_as<IotaAttrs>().dim);
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    StoreInt(out, flat, idx[dim]);  // converted as `convert` would
  });
  return One(std::move(out));
}

// Flat element i of the result is word i % 4 of philox(key, counter + i / 4).
std::vector<Literal> RngBitGeneratorKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const std::array<uint32_t, 2> key = {Get<Int<uint32_t>>(*ops[0], 0), Get<Int<uint32_t>>(*ops[0], 1)};
  PhiloxBlock counter;
  for (size_t k = 0; k < 4; ++k) counter[k] = Get<Int<uint32_t>>(*ops[1], static_cast<int64_t>(k));
  Literal out(node.result()->type());
  PhiloxBlock block{};
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    if (i % 4 == 0) block = Philox4x32_10(key, AddToCounter(counter, static_cast<uint64_t>(i / 4)));
    Put<Int<uint32_t>>(out, i, block[static_cast<size_t>(i % 4)]);
  }
  return One(std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Collectives. Replica groups were checked against the replica count by the shape rule.

ReplicaGroups ResolveGroups(const ReplicaGroups& groups, size_t num_replicas) {
  if (!groups.empty()) return groups;
  std::vector<int64_t> all(num_replicas);
  for (size_t r = 0; r < num_replicas; ++r) all[r] = static_cast<int64_t>(r);
  return {all};
}

using Results = std::vector<std::vector<Literal>>;

// The elementwise combination of the group members' operands, in group order.
Literal CombineGroup(const ReplicaOperands& ops, const std::vector<int64_t>& group, ReduceKind kind) {
  const Literal& first = *ops[static_cast<size_t>(group[0])][0];
  Literal out(first.type());
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    Accumulator acc(kind, first.dtype());
    for (int64_t r : group) acc.Add(*ops[static_cast<size_t>(r)][0], i);
    acc.Store(out, i);
  }
  return out;
}

Results AllReduceKernel(const Node& node, const ReplicaOperands& ops) {
  const auto& a = node.attrs_as<AllReduceAttrs>();
  Results out(ops.size());
  for (const auto& group : ResolveGroups(a.groups, ops.size())) {
    const Literal combined = CombineGroup(ops, group, a.kind);
    for (int64_t r : group) out[static_cast<size_t>(r)].push_back(combined);
  }
  return out;
}

Results AllGatherKernel(const Node& node, const ReplicaOperands& ops) {
  const auto& a = node.attrs_as<AllGatherAttrs>();
  Results out(ops.size());
  for (const auto& group : ResolveGroups(a.groups, ops.size())) {
    std::vector<const Literal*> parts;
    for (int64_t r : group) parts.push_back(ops[static_cast<size_t>(r)][0]);
    const Literal gathered = ConcatAlong(parts, a.dim);
    for (int64_t r : group) out[static_cast<size_t>(r)].push_back(gathered);
  }
  return out;
}

Results ReduceScatterKernel(const Node& node, const ReplicaOperands& ops) {
  const auto& a = node.attrs_as<ReduceScatterAttrs>();
  Results out(ops.size());
  for (const auto& group : ResolveGroups(a.groups, ops.size())) {
    const Literal combined = CombineGroup(ops, group, a.kind);
    const int64_t chunk = combined.shape().dim(a.dim) / static_cast<int64_t>(group.size());
    for (size_t k = 0; k < group.size(); ++k)
      out[static_cast<size_t>(group[k])].push_back(
          SliceAlong(combined, a.dim, static_cast<int64_t>(k) * chunk, chunk));
  }
  return out;
}

// Member j splits its operand into n chunks along split_dim and sends chunk k to member k; member
// k concatenates what it receives along concat_dim in sender order.
Results AllToAllKernel(const Node& node, const ReplicaOperands& ops) {
  const auto& a = node.attrs_as<AllToAllAttrs>();
  Results out(ops.size());
  for (const auto& group : ResolveGroups(a.groups, ops.size())) {
    const int64_t n = static_cast<int64_t>(group.size());
    for (int64_t k = 0; k < n; ++k) {
      std::vector<Literal> received;
      for (int64_t sender : group) {
        const Literal& x = *ops[static_cast<size_t>(sender)][0];
        const int64_t chunk = x.shape().dim(a.split_dim) / n;
        received.push_back(SliceAlong(x, a.split_dim, k * chunk, chunk));
      }
      std::vector<const Literal*> parts;
      for (const Literal& l : received) parts.push_back(&l);
      out[static_cast<size_t>(group[static_cast<size_t>(k)])].push_back(ConcatAlong(parts, a.concat_dim));
    }
  }
  return out;
}

Results CollectivePermuteKernel(const Node& node, const ReplicaOperands& ops) {
  const auto& pairs = node.attrs_as<CollectivePermuteAttrs>().pairs;
  Results out(ops.size());
  for (auto& r : out) r.push_back(Literal(node.result()->type()));  // zeros
  for (const auto& pair : pairs)
    out[static_cast<size_t>(pair[1])][0] = *ops[static_cast<size_t>(pair[0])][0];
  return out;
}

}  // namespace

void RegisterMiscKernels(KernelTable& table) {
  table[static_cast<size_t>(OpKind::kIota)].local = IotaKernel;
  table[static_cast<size_t>(OpKind::kReplicaId)].local = ReplicaIdKernel;
  table[static_cast<size_t>(OpKind::kRngBitGenerator)].local = RngBitGeneratorKernel;
  auto set = [&](OpKind k, CollectiveKernel f) { table[static_cast<size_t>(k)].collective = f; };
  set(OpKind::kAllReduce, AllReduceKernel);
  set(OpKind::kAllGather, AllGatherKernel);
  set(OpKind::kReduceScatter, ReduceScatterKernel);
  set(OpKind::kAllToAll, AllToAllKernel);
  set(OpKind::kCollectivePermute, CollectivePermuteKernel);
}

}  // namespace axle::ir::interp
