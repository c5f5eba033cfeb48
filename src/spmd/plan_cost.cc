#include "spmd/plan_cost.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/attrs.h"

namespace axle::spmd {
namespace {

std::optional<Collective> CollectiveOf(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kAllReduce: return Collective::kAllReduce;
    case ir::OpKind::kAllGather: return Collective::kAllGather;
    case ir::OpKind::kReduceScatter: return Collective::kReduceScatter;
    case ir::OpKind::kAllToAll: return Collective::kAllToAll;
    case ir::OpKind::kCollectivePermute: return Collective::kCollectivePermute;
    default: return std::nullopt;
  }
}

// One group of the collective (all devices when the attribute lists none) and its size.
std::vector<int64_t> FirstGroup(const ir::Node& n, int64_t devices) {
  const ir::ReplicaGroups* groups = nullptr;
  switch (n.op()) {
    case ir::OpKind::kAllReduce: groups = &n.attrs_as<ir::AllReduceAttrs>().groups; break;
    case ir::OpKind::kAllGather: groups = &n.attrs_as<ir::AllGatherAttrs>().groups; break;
    case ir::OpKind::kReduceScatter: groups = &n.attrs_as<ir::ReduceScatterAttrs>().groups; break;
    case ir::OpKind::kAllToAll: groups = &n.attrs_as<ir::AllToAllAttrs>().groups; break;
    case ir::OpKind::kCollectivePermute: {
      // A permute's pairs: a message between two devices.
      const auto& pairs = n.attrs_as<ir::CollectivePermuteAttrs>().pairs;
      return pairs.empty() ? std::vector<int64_t>{} : pairs.front();
    }
    default: break;
  }
  if (groups == nullptr || groups->empty()) {
    std::vector<int64_t> all(static_cast<size_t>(devices));
    for (int64_t d = 0; d < devices; ++d) all[static_cast<size_t>(d)] = d;
    return all;
  }
  return groups->front();
}

// The mesh axes along which the members of `group` differ.
std::vector<std::string> AxesSpanned(const std::vector<int64_t>& group, const std::optional<ir::Mesh>& mesh) {
  std::vector<std::string> axes;
  if (!mesh || group.size() < 2) return axes;
  const std::vector<int64_t> first = mesh->Coords(group.front());
  std::vector<bool> varies(first.size(), false);
  for (int64_t d : group) {
    const std::vector<int64_t> c = mesh->Coords(d);
    for (size_t a = 0; a < c.size(); ++a) varies[a] = varies[a] || c[a] != first[a];
  }
  for (size_t a = 0; a < varies.size(); ++a)
    if (varies[a]) axes.push_back(mesh->axis_names()[a]);
  return axes;
}

}  // namespace

bool MakesNoData(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kParameter:
    case ir::OpKind::kConstant:
    case ir::OpKind::kReshape:
    case ir::OpKind::kBroadcastInDim:
    case ir::OpKind::kIota:
    case ir::OpKind::kReplicaId:
    case ir::OpKind::kOptimizationBarrier: return true;
    default: return false;
  }
}

std::unordered_set<const ir::Node*> FusedIntoTheirUser(const ir::Function& fn) {
  std::unordered_map<const ir::Value*, const ir::Node*> sole_user;
  std::unordered_map<const ir::Value*, int> uses;
  for (const auto& n : fn.nodes())
    for (const ir::Value* v : n->operands())
      if (++uses[v] == 1) sole_user[v] = n.get();
  for (const ir::Value* r : fn.results()) uses[r] += 2;  // written out
  std::unordered_set<const ir::Node*> out;
  for (const auto& n : fn.nodes()) {
    if (!n->info().Has(ir::kElementwise) || n->num_results() != 1 || uses[n->result()] != 1) continue;
    const ir::Node& user = *sole_user.at(n->result());
    if (user.info().Has(ir::kElementwise) && user.num_results() == 1 && user.result()->shape() == n->result()->shape())
      out.insert(n.get());
  }
  return out;
}

int64_t PlanCost::collective_count() const {
  int64_t n = 0;
  for (const CollectiveCost& c : collectives) n += c.count;
  return n;
}

int64_t PlanCost::collective_bytes() const {
  int64_t n = 0;
  for (const CollectiveCost& c : collectives) n += c.bytes;
  return n;
}

PlanCost EvaluatePartitioned(const ir::Module& partitioned, const CostModel& model) {
  const ir::Function* fn = partitioned.entry();
  if (fn == nullptr) Fail("EvaluatePartitioned: module @{} has no entry function", partitioned.name());
  const int64_t devices = std::max<int64_t>(partitioned.num_replicas(), 1);
  PlanCost cost;
  std::map<std::pair<Collective, std::vector<std::string>>, CollectiveCost> by_kind;

  // Liveness in program order: a value's buffer (a reshape's is its operand's) lives from its
  // definition to its last use; the function's results to the end.
  const auto& nodes = fn->nodes();
  std::unordered_map<const ir::Value*, const ir::Value*> buffer_of;  // reshape -> its operand's buffer
  auto root = [&](const ir::Value* v) {
    auto it = buffer_of.find(v);
    return it == buffer_of.end() ? v : it->second;
  };
  std::unordered_map<const ir::Value*, size_t> last_use;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = *nodes[i];
    if (n.op() == ir::OpKind::kReshape) buffer_of[n.result()] = root(n.operand(0));
    for (const ir::Value* v : n.operands()) last_use[root(v)] = i;
  }
  for (const ir::Value* r : fn->results()) last_use[root(r)] = nodes.size();
  const std::unordered_set<const ir::Node*> fused = FusedIntoTheirUser(*fn);

  std::vector<int64_t> freed_after(nodes.size() + 1, 0);
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = *nodes[i];
    if (n.op() == ir::OpKind::kParameter) {
      cost.argument_bytes += n.result()->type().ByteSize();
    } else if (n.op() != ir::OpKind::kReshape) {
      for (const ir::Value* r : n.results()) {
        auto it = last_use.find(r);
        if (it == last_use.end()) continue;  // dead
        live += r->type().ByteSize();
        freed_after[it->second] += r->type().ByteSize();
      }
    }
    peak = std::max(peak, live);
    live -= freed_after[i];

    if (const std::optional<Collective> kind = CollectiveOf(n.op())) {
      const std::vector<int64_t> group = FirstGroup(n, devices);
      const int64_t moved = n.op() == ir::OpKind::kAllGather ? n.result()->type().ByteSize()
                                                              : n.operand(0)->type().ByteSize();
      CollectiveCost& c = by_kind[{*kind, AxesSpanned(group, partitioned.mesh())}];
      c.kind = *kind;
      c.axes = AxesSpanned(group, partitioned.mesh());
      ++c.count;
      c.bytes += moved;
      const int64_t group_size = n.op() == ir::OpKind::kCollectivePermute ? 2 : static_cast<int64_t>(group.size());
      c.seconds += model.CollectiveSeconds(*kind, group_size, moved);
      continue;
    }
    if (n.op() == ir::OpKind::kDotGeneral) {
      const auto& a = n.attrs_as<ir::DotGeneralAttrs>();
      double k = 1;
      for (int64_t d : a.lhs_contracting) k *= static_cast<double>(n.operand(0)->shape().dim(d));
      const double flops = 2 * static_cast<double>(n.result()->type().NumElements()) * k;
      cost.flops += flops;
      cost.compute_s += flops / model.product_flops_per_s;
      continue;
    }
    if (MakesNoData(n.op()) || fused.count(&n)) continue;
    for (const ir::Value* r : n.results())
      cost.compute_s += static_cast<double>(r->type().ByteSize()) / model.memory_bytes_per_s;
  }
  cost.peak_bytes = cost.argument_bytes + peak;
  for (auto& [key, c] : by_kind) {
    cost.collective_s += c.seconds;
    cost.collectives.push_back(std::move(c));
  }
  return cost;
}

}  // namespace axle::spmd
