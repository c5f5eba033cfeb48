// Loop fusion (see fusion.h). Greedy, consumers first: nodes are visited in reverse order, so a
// node's users have their groups when the node is visited.
#include "codegen/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace axle::codegen {
namespace {

// Note [Recomputing cheap values]: the largest computation a second group recomputes.
constexpr size_t kMaxRecompute = 24;

using ir::Node;
using ir::OpKind;
using ir::Value;

// Fused kernels hold every float dtype (bf16 and f16 as floats, rounded after each op: Note
// [Halves in generated kernels], emit_cpp.cc), bool and the integer dtypes (i8, i32, i64, u8, u32).
bool IsHalf(DType t) { return t == DType::kBF16 || t == DType::kF16; }
bool IsF(DType t) { return t == DType::kF32 || t == DType::kF64 || IsHalf(t); }
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

bool ReductionView(const Node& n, int64_t* reduced, bool* column) {
  if (n.op() != OpKind::kReduce || n.num_operands() != 1 || n.num_results() != 1) return false;
  const auto& a = n.attrs_as<ir::ReduceAttrs>();
  if (a.kind != ir::ReduceKind::kSum && a.kind != ir::ReduceKind::kMax && a.kind != ir::ReduceKind::kMin)
    return false;
  const DType t = n.result()->dtype();
  if (!IsF(t) || n.operand(0)->dtype() != t) return false;
  const std::vector<int64_t>& dims = n.operand(0)->shape().dims();
  std::vector<bool> is_reduced(dims.size(), false);
  for (int64_t d : a.dims) {
    if (d < 0 || d >= static_cast<int64_t>(dims.size())) return false;
    is_reduced[static_cast<size_t>(d)] = true;
  }
  // The non-trivial dims as a string of 'r' (reduced) and 'k' (kept).
  std::string pattern;
  int64_t r = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (is_reduced[d]) r *= dims[d];
    if (dims[d] != 1) pattern += is_reduced[d] ? 'r' : 'k';
  }
  const bool row = pattern.find("rk") == std::string::npos;  // k...k r...r
  const bool col = pattern.find("kr") == std::string::npos;  // r...r k...k
  if (!row && !col) return false;
  *reduced = r;
  *column = !row;
  return true;
}

int64_t PrologueElements(const Kernel& k) {
  if (k.reduce != nullptr) return k.reduce->operand(0)->shape().NumElements();
  return IsRowKernel(k) ? k.num_elements * k.reduced : k.num_elements;
}

// Note [Recomputing cheap values]: a transcendental is not cheap; reading it back from the kernel
// that computed it costs 4 bytes an element.
bool IsTranscendental(const Node& n) {
  switch (n.op()) {
    case OpKind::kExp: case OpKind::kLog: case OpKind::kLog1p: case OpKind::kTanh: case OpKind::kLogistic:
    case OpKind::kErf: case OpKind::kSin: case OpKind::kCos: case OpKind::kPow: case OpKind::kAtan2:
      return true;
    default:
      return false;
  }
}

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
      return IsFB(r) && !IsHalf(r);  // a coordinate rounded to 8 or 11 bits: the executor's kernel
    case OpKind::kSlice:
    case OpKind::kTranspose:
      return IsFB(r) && n.operand(0)->dtype() == r;
    case OpKind::kSelect:
      return IsFB(r) && n.operand(0)->dtype() == DType::kBool && n.operand(1)->dtype() == r &&
             n.operand(2)->dtype() == r;
    case OpKind::kConvert:
      // An integer becomes a half by integer rounding (Note [Single rounding]): the executor's.
      return IsFB(r) && IsFB(n.operand(0)->dtype()) && !(IsHalf(r) && IsInteger(n.operand(0)->dtype()));
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
    std::set<const Node*> read_elsewhere;  // members whose users, recomputed in later groups, read them
  };
  std::vector<Group> groups;
  // Groups a node belongs to (several for duplicated broadcasts and recomputed values).
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

  // Note [Recomputing cheap values]: the distinct full-size values n's computation reads from
  // outside, walking up through the elementwise nodes a group could recompute (kMaxRecompute
  // nodes at most; more: a large number). Broadcasts of smaller values read little and are free.
  auto outside_streams = [&](const Node* n, int64_t count) -> size_t {
    std::set<const Value*> leaves;
    std::set<const Node*> seen;
    std::vector<const Node*> stack = {n};
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      if (seen.size() > kMaxRecompute) return std::numeric_limits<size_t>::max();
      for (const Value* o : x->operands()) {
        const Node* p = o->node();
        if (IsDuplicable(*p)) continue;
        if (p->op() == OpKind::kParameter || p->op() == OpKind::kConstant || !IsFusible(*p) || IsIndexMap(*p) ||
            IsTranscendental(*p) || is_result.count(o) || o->shape().NumElements() != count) {
          leaves.insert(o);
          continue;
        }
        stack.push_back(p);
      }
    }
    return leaves.size();
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
        // Every group that computes u needs n (a recomputed user is in two, Note [Recomputing
        // cheap values]); a group that cannot hold n reads it materialized.
        bool in = false;
        for (int g : group_of[u]) {
          if (!groups[g].members.count(u)) continue;
          if (groups[g].fused && groups[g].elements == count && !IsIndexMap(*u)) {
            if (joined.insert(g).second) {
              groups[g].members.insert(n);
              group_of[n].push_back(g);
            }
            in = true;
          } else {
            materialize = true;
          }
        }
        if (!in) materialize = true;
      }
      if (materialize) new_group(n, true);
      continue;
    }
    // Note [Results beside their siblings]: a result that no node reads joins a later fused group
    // of its element count that reads one of its operands, as an extra output. AdamW on a bf16
    // parameter stores convert(m1) and updates the parameter from m1 itself: alone, the store
    // was a kernel of its own that also wrote m1 in f32 for the update to read back (three
    // kernels for each parameter's update: GPT-2 small's --precision bf16 step had 243 kernels,
    // now 186). Its operands then have all their users in that group and join it too. The
    // group runs after every node before the result, so the result's operands are ready there;
    // an operand's producer that would join an earlier group cannot (multi-output fusion's
    // order check sees the result's position), so it runs earlier still.
    if (us.empty() && is_result.count(v)) {
      int sibling = -1;
      for (const Value* o : n->operands())
        for (const Node* u : users[o]) {
          if (sibling >= 0 || pos[u] <= pos[n]) continue;
          for (int g : group_of[u])
            if (sibling < 0 && groups[g].members.count(u) && groups[g].fused && groups[g].elements == count)
              sibling = g;
        }
      if (sibling >= 0) {
        groups[sibling].members.insert(n);
        group_of[n].push_back(sibling);
        continue;
      }
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
    if (!ok && !is_result.count(v) && !us.empty()) {
      // Note [Recomputing cheap values]: users in two fused groups of this element count, and a
      // value computed from at most one full-size outside value: each group computes it again.
      std::set<int> targets;
      bool all_fused = true;
      for (const Node* u : us) {
        for (int g : group_of[u]) {
          if (!groups[g].members.count(u)) continue;
          if (!groups[g].fused || groups[g].elements != count || mapped_user_in(v, g)) all_fused = false;
          targets.insert(g);
        }
        if (group_of[u].empty()) all_fused = false;
      }
      if (all_fused && targets.size() == 2 && !IsTranscendental(*n) && outside_streams(n, count) <= 1) {
        for (int g : targets) {
          groups[g].members.insert(n);
          group_of[n].push_back(g);
        }
        continue;
      }
    }
    if (!ok || target < 0) {
      // Multi-output fusion: join the fused group T of some users when every other user comes
      // after T's root (then no other user can feed T: no cycle) and n becomes an extra output. A
      // user that is also recomputed in other groups (Note [Recomputing cheap values]) is inside T
      // when T is one of them; the others must then run after T, since they read n.
      auto member_of = [&](const Node* u, int g) { return groups[g].members.count(u) > 0; };
      auto joinable = [&](int t) {
        if (!groups[t].fused || groups[t].elements != count || mapped_user_in(v, t)) return false;
        for (const Node* u : us) {
          if (!member_of(u, t)) {
            if (pos[u] <= groups[t].root) return false;
            continue;
          }
          for (int g : group_of[u])
            if (g != t && member_of(u, g) && groups[g].root <= groups[t].root) return false;
        }
        return true;
      };
      target = -1;
      for (const Node* u : us) {
        for (int g : group_of[u])
          if (target < 0 && member_of(u, g) && joinable(g)) target = g;
      }
    }
    if (target >= 0) {
      groups[target].members.insert(n);
      group_of[n].push_back(target);
    } else {
      new_group(n, true);
    }
  }

  // A member whose user is also recomputed in another group that does not compute the member
  // itself is read there: it is an output even when every user is a member here.
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].fused) continue;
    for (const Node* n : groups[g].members)
      for (const Value* r : n->results())
        for (const Node* u : users[r])
          for (int h : group_of[u])
            if (static_cast<size_t>(h) != g && groups[h].members.count(u) && !groups[h].members.count(n))
              groups[g].read_elsewhere.insert(n);
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
          if (g.read_elsewhere.count(n)) out = true;
        }
        if (g.fused && group_of[n].size() > 1 && pos[n] != g.root) out = false;
        if (out) kern.outputs.push_back(r);
      }
    }
    kernels.push_back(std::move(kern));
  }

  // Reductions with a fused prologue (fusion.h): the fused group that produces a reduce's operand
  // and the reduce become one kernel, at the group's place (the reduce's only input is the group's
  // output, so every later user still comes after it). The group's other outputs stay outputs.
  std::unordered_map<const Value*, size_t> producer;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (kernels[k].fused)
      for (const Value* v : kernels[k].outputs) producer[v] = k;
  std::vector<bool> merged(kernels.size(), false);
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k].fused) continue;
    const Node* red = kernels[k].nodes[0];
    int64_t reduced = 0;
    bool column = false;
    if (!ReductionView(*red, &reduced, &column)) continue;
    const Value* x = red->operand(0);
    auto it = producer.find(x);
    if (it == producer.end()) continue;
    Kernel& p = kernels[it->second];
    if (p.reduce != nullptr || merged[it->second]) continue;
    const std::set<const Node*> members(p.nodes.begin(), p.nodes.end());
    const bool x_elsewhere =
        is_result.count(x) > 0 ||
        std::any_of(users[x].begin(), users[x].end(), [&](const Node* u) { return u != red && !members.count(u); });
    std::vector<const Value*> outs = {red->result()};
    for (const Value* v : p.outputs)
      if (v != x || x_elsewhere) outs.push_back(v);
    p.outputs = std::move(outs);
    p.nodes.push_back(red);
    p.reduce = red;
    p.reduced = reduced;
    p.column = column;
    p.num_elements = red->result()->shape().NumElements();
    merged[k] = true;
  }
  // A reduce with no fusible producer (its operand a parameter, a product, a gather, ...) is a
  // reduction kernel with an empty prologue: the generated loop reads its operand directly, in
  // the same order and with the same accumulation as one with a prologue (GPT-2's bias gradients
  // of the products' outputs took 2-3x as long in the per-node executor's reduce).
  for (size_t k = 0; k < kernels.size(); ++k) {
    Kernel& kern = kernels[k];
    if (kern.fused || merged[k]) continue;
    const Node* red = kern.nodes[0];
    int64_t reduced = 0;
    bool column = false;
    if (!ReductionView(*red, &reduced, &column)) continue;
    kern.fused = true;
    kern.inputs = {red->operand(0)};
    kern.outputs = {red->result()};
    kern.reduce = red;
    kern.reduced = reduced;
    kern.column = column;
    kern.num_elements = red->result()->shape().NumElements();
  }
  std::vector<Kernel> result;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (!merged[k]) result.push_back(std::move(kernels[k]));
  FuseRows(f, result);
  return result;
}

std::string DescribeKernel(const Kernel& k) {
  if (!k.fused) return std::string(k.nodes[0]->name());
  std::vector<std::string> names;
  for (const Node* n : k.nodes)
    if (n != k.reduce) names.emplace_back(n->name());
  if (k.reduce != nullptr && names.empty()) return fmt::format("reduce[{}]", k.num_elements);  // no prologue
  const char* kind = k.reduce ? "reduce" : IsRowKernel(k) ? "rows" : "fused";
  return fmt::format("{}{{{}}}[{}]", kind, fmt::join(names, ","), k.num_elements);
}

std::string DescribeKernels(const std::vector<Kernel>& kernels) {
  std::string s = fmt::format("{} kernels:", kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) s += (i ? ", " : " ") + DescribeKernel(kernels[i]);
  return s;
}

}  // namespace axle::codegen
