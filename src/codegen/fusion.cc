// Loop fusion (see fusion.h). Greedy, consumers first: nodes are visited in reverse order, so a
// node's users have their groups when the node is visited.
#include "codegen/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace axle::codegen {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

bool IsF(DType t) { return t == DType::kF32 || t == DType::kF64; }
// Fused kernels hold f32, f64, bool and the integer dtypes (i8, i32, i64, u8, u32).
bool IsFB(DType t) { return IsF(t) || t == DType::kBool || IsInteger(t); }
bool IsNum(DType t) { return IsF(t) || IsInteger(t); }
bool IsIB(DType t) { return t == DType::kBool || IsInteger(t); }

// A broadcast that adds elements: each consumer group reads its (smaller) operand at a mapped
// index, which costs no more than reading a materialized copy and saves writing one (layer norm's
// broadcast mean and rsqrt, a bias or gain used by several kernels).
bool IsDuplicable(const Node& n) {
  if (n.op() != OpKind::kBroadcastInDim) return false;
  return n.operand(0)->shape().NumElements() < n.result()->shape().NumElements();
}

}  // namespace

bool IsIndexMap(const Node& n) { return n.op() == OpKind::kSlice || n.op() == OpKind::kTranspose; }

bool IsFusible(const Node& n) {
  if (n.num_results() != 1) return false;
  const DType r = n.result()->dtype();
  auto all_ops = [&](auto pred) {
    return std::all_of(n.operands().begin(), n.operands().end(),
                       [&](const Value* v) { return pred(v->dtype()); });
  };
  switch (n.op()) {
    case OpKind::kExp: case OpKind::kLog:
    case OpKind::kLog1p: case OpKind::kTanh: case OpKind::kLogistic: case OpKind::kSqrt:
    case OpKind::kRsqrt: case OpKind::kSin: case OpKind::kCos: case OpKind::kErf:
    case OpKind::kFloor: case OpKind::kCeil: case OpKind::kPow: case OpKind::kAtan2:
      return IsF(r) && all_ops(IsF);
    case OpKind::kNeg: case OpKind::kAbs: case OpKind::kSign:
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kDiv:
    case OpKind::kRem: case OpKind::kMax: case OpKind::kMin: case OpKind::kClamp:
      return IsNum(r) && all_ops([&](DType t) { return t == r; });
    case OpKind::kIsFinite:
      return r == DType::kBool && all_ops(IsF);
    case OpKind::kCompare:
      return r == DType::kBool && all_ops(IsFB);
    case OpKind::kNot: case OpKind::kAnd: case OpKind::kOr: case OpKind::kXor:
      return IsIB(r) && all_ops([&](DType t) { return t == r; });
    case OpKind::kIota:
      return IsFB(r);
    case OpKind::kSlice:
    case OpKind::kTranspose:
      return IsFB(r) && n.operand(0)->dtype() == r;
    case OpKind::kSelect:
      return IsFB(r) && n.operand(0)->dtype() == DType::kBool && n.operand(1)->dtype() == r &&
             n.operand(2)->dtype() == r;
    case OpKind::kConvert:
    case OpKind::kBroadcastInDim:
    case OpKind::kReshape:
      return IsFB(r) && IsFB(n.operand(0)->dtype());
    default:
      return false;
  }
}

std::vector<Kernel> FuseFunction(const ir::Function& f) {
  const auto& nodes = f.nodes();
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i].get()] = i;
  std::unordered_map<const Value*, std::vector<const Node*>> users;
  for (const auto& n : nodes)
    for (const Value* v : n->operands()) users[v].push_back(n.get());
  std::set<const Value*> is_result(f.results().begin(), f.results().end());

  struct Group {
    bool fused = false;
    int64_t elements = 0;
    std::set<const Node*> members;
    size_t root = 0;  // position of the last node: groups run in root order
  };
  std::vector<Group> groups;
  // Groups a node belongs to (several only for duplicated broadcasts).
  std::unordered_map<const Node*, std::vector<int>> group_of;
  auto new_group = [&](const Node* n, bool fused) {
    Group g;
    g.fused = fused;
    g.elements = n->num_results() == 1 ? n->result()->shape().NumElements() : 0;
    g.members.insert(n);
    g.root = pos[n];
    groups.push_back(std::move(g));
    group_of[n].push_back(static_cast<int>(groups.size()) - 1);
  };

  // A slice or transpose reads its operand at a mapped index: the operand never joins its group.
  auto mapped_user_in = [&](const Value* v, int g) {
    for (const Node* u : users[v])
      if (IsIndexMap(*u) && groups[g].members.count(u)) return true;
    return false;
  };

  for (size_t k = nodes.size(); k-- > 0;) {
    const Node* n = nodes[k].get();
    if (n->op() == OpKind::kParameter || n->op() == OpKind::kConstant) continue;
    if (!IsFusible(*n)) {
      new_group(n, false);
      continue;
    }
    const Value* v = n->result();
    const int64_t count = v->shape().NumElements();
    const std::vector<const Node*>& us = users[v];
    if (IsDuplicable(*n)) {
      bool materialize = is_result.count(v) > 0 || us.empty();
      std::set<int> joined;
      for (const Node* u : us) {
        bool in = false;
        for (int g : group_of[u]) {
          if (groups[g].fused && groups[g].elements == count && groups[g].members.count(u) &&
              !IsIndexMap(*u)) {
            if (joined.insert(g).second) {
              groups[g].members.insert(n);
              group_of[n].push_back(g);
            }
            in = true;
            break;
          }
        }
        if (!in) materialize = true;
      }
      if (materialize) new_group(n, true);
      continue;
    }
    // Join the single group of all users (duplicated broadcasts count in each of their groups).
    int target = -1;
    bool ok = !us.empty();
    for (const Node* u : us) {
      const std::vector<int>& gs = group_of[u];
      if (gs.size() != 1 || !groups[gs[0]].fused || groups[gs[0]].elements != count ||
          (target >= 0 && gs[0] != target)) {
        ok = false;
        break;
      }
      target = gs[0];
    }
    if (target >= 0 && mapped_user_in(v, target)) ok = false;
    if (!ok || target < 0) {
      // Multi-output fusion: join the fused group T of some users when every other user comes
      // after T's root (then no other user can feed T: no cycle) and n becomes an extra output.
      target = -1;
      for (const Node* u : us) {
        const std::vector<int>& gs = group_of[u];
        if (gs.size() == 1 && groups[gs[0]].fused && groups[gs[0]].elements == count &&
            !mapped_user_in(v, gs[0])) {
          target = gs[0];
          break;
        }
      }
      if (target >= 0) {
        for (const Node* u : us) {
          const std::vector<int>& gs = group_of[u];
          const bool inside = gs.size() == 1 && gs[0] == target;
          if (!inside && pos[u] <= groups[target].root) target = -1;
          if (target < 0) break;
        }
      }
    }
    if (target >= 0) {
      groups[target].members.insert(n);
      group_of[n].push_back(target);
    } else {
      new_group(n, true);
    }
  }

  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.root < b.root; });
  std::vector<Kernel> kernels;
  for (const Group& g : groups) {
    Kernel kern;
    kern.fused = g.fused;
    kern.num_elements = g.elements;
    std::vector<const Node*> ordered(g.members.begin(), g.members.end());
    std::sort(ordered.begin(), ordered.end(), [&](const Node* a, const Node* b) { return pos[a] < pos[b]; });
    kern.nodes = ordered;
    std::set<const Value*> seen;
    for (const Node* n : ordered) {
      for (const Value* v : n->operands()) {
        if (g.members.count(v->node())) continue;
        if (seen.insert(v).second) kern.inputs.push_back(v);
      }
      for (const Value* r : n->results()) {
        bool out = !g.fused || is_result.count(r) > 0;
        // A duplicated broadcast is materialized only by its own group (where it is the root).
        if (g.fused && !out && (group_of[n].size() == 1 || pos[n] == g.root)) {
          for (const Node* u : users[r])
            if (!g.members.count(u)) out = true;
        }
        if (g.fused && group_of[n].size() > 1 && pos[n] != g.root) out = false;
        if (out) kern.outputs.push_back(r);
      }
    }
    kernels.push_back(std::move(kern));
  }
  return kernels;
}

std::string DescribeKernels(const std::vector<Kernel>& kernels) {
  std::string s = fmt::format("{} kernels:", kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    s += i ? ", " : " ";
    if (!k.fused) {
      s += k.nodes[0]->name();
      continue;
    }
    std::vector<std::string> names;
    for (const Node* n : k.nodes) names.emplace_back(n->name());
    s += fmt::format("fused{{{}}}[{}]", fmt::join(names, ","), k.num_elements);
  }
  return s;
}

}  // namespace axle::codegen
