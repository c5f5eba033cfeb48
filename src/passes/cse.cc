// cse: common-subexpression elimination. Two nodes are merged (the later one's uses go to the
// earlier one, and the later one is erased) when they have the same op, the same operands in the
// same order, equal attributes (ir::AttrsEqual; constants compare their literals bit for bit)
// and the same result types and sharding annotations.
//
// Never merged: parameter (each is a distinct argument), custom_call (side effects),
// collectives, and optimization_barrier. Barriers also split the function into regions: a node
// is only merged with an equal node of its own region (between the same two barriers), so no
// computation moves across a barrier. rng_bit_generator is a pure function of its key and
// counter operands, so equal ones merge.
//
// Cost: one hash lookup per node (the hash covers op, operands, result types and, for
// constants, the literal bytes), plus AttrsEqual against nodes in the same hash bucket.
#include <functional>
#include <string_view>
#include <unordered_map>

#include "ir/attrs.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

bool Mergeable(const ir::Node& n) {
  switch (n.op()) {
    case ir::OpKind::kParameter:
    case ir::OpKind::kCustomCall:
    case ir::OpKind::kOptimizationBarrier:
      return false;
    default:
      return !n.info().Has(ir::kCollective);
  }
}

// Ops whose two operands may be swapped: exact for integers and bool, and for floats up to the
// payload of a NaN result when both operands are NaN (IEEE add and mul are commutative; the
// max/min rule is symmetric, +0 > -0 included).
bool Commutative(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kAdd:
    case ir::OpKind::kMul:
    case ir::OpKind::kMax:
    case ir::OpKind::kMin:
    case ir::OpKind::kAnd:
    case ir::OpKind::kOr:
    case ir::OpKind::kXor:
      return true;
    default:
      return false;
  }
}

// The operands in a canonical order: commutative operands sorted by address (the order only
// matters for matching, never for the kept node).
std::vector<const ir::Value*> KeyOperands(const ir::Node& n) {
  std::vector<const ir::Value*> ops(n.operands().begin(), n.operands().end());
  if (Commutative(n.op()) && std::less<const ir::Value*>()(ops[1], ops[0])) std::swap(ops[0], ops[1]);
  return ops;
}

void Mix(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

size_t NodeHash(const ir::Node& n) {
  size_t h = static_cast<size_t>(n.op());
  for (const ir::Value* v : KeyOperands(n)) Mix(h, std::hash<const void*>()(v));
  for (size_t i = 0; i < n.num_results(); ++i) {
    const ir::TensorType& t = n.result(i)->type();
    Mix(h, static_cast<size_t>(t.dtype));
    for (int64_t d : t.shape.dims()) Mix(h, static_cast<size_t>(d));
  }
  if (n.op() == ir::OpKind::kConstant) {
    auto bytes = n.attrs_as<ir::ConstantAttrs>().value.bytes();
    Mix(h, std::hash<std::string_view>()(
               std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  }
  return h;
}

bool SameNode(const ir::Node& a, const ir::Node& b) {
  if (a.op() != b.op() || a.num_results() != b.num_results() || KeyOperands(a) != KeyOperands(b))
    return false;
  for (size_t i = 0; i < a.num_results(); ++i) {
    if (a.result(i)->type() != b.result(i)->type()) return false;
    if (a.result(i)->sharding() != b.result(i)->sharding()) return false;
  }
  return ir::AttrsEqual(a.attrs(), b.attrs());
}

bool EliminateCommonSubexpressions(ir::Function& f) {
  Rewrite rw(f);
  std::unordered_multimap<size_t, ir::Node*> seen;  // the current barrier region's nodes
  for (const auto& owned : f.nodes()) {
    ir::Node* n = owned.get();
    rw.Apply(*n);
    if (n->op() == ir::OpKind::kOptimizationBarrier) {
      seen.clear();
      continue;
    }
    if (!Mergeable(*n)) continue;
    const size_t h = NodeHash(*n);
    ir::Node* match = nullptr;
    for (auto [it, end] = seen.equal_range(h); it != end; ++it)
      if (SameNode(*it->second, *n)) {
        match = it->second;
        break;
      }
    if (match) {
      rw.Replace(n, match->results());
    } else {
      seen.emplace(h, n);
    }
  }
  const bool changed = rw.changed();
  rw.Finish();
  return changed;
}

class CsePass : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string_view summary() const override {
    return "Merge nodes with the same op, operands, attributes and types (not across barriers).";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= EliminateCommonSubexpressions(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeCsePass() { return std::make_unique<CsePass>(); }

}  // namespace axle::passes
