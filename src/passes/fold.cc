// fold: constant folding. A node whose operands are all constants is replaced by a constant
// holding its result, computed by the reference interpreter's own kernel (ir::EvaluateNode), so
// folding is bit-exact with evaluation by construction (the interpreter is the oracle).
//
// Folded: single-result nodes with at least one operand, all of them constants, whose result
// has at most kMaxFoldElements elements. An operand that is a broadcast_in_dim of a constant
// counts as a constant (it is expanded for the kernel, up to kMaxFoldElements elements), but a
// broadcast_in_dim itself is not folded: as in XLA, a broadcast of a scalar is free in fused code
// while a materialized constant costs memory, and simplify and cse see through broadcasts anyway.
// Not folded: source ops (constant, iota, parameter: no operands), broadcast_in_dim (above),
// rng_bit_generator (its bits would be cheap to compute but would bloat the module),
// collectives (they need the replicas), custom_call (side effects), optimization_barrier (it must
// not be seen through), and multi-result nodes (sort: folding one node into several constants
// could grow the module).
#include <memory>
#include <span>

#include "ir/interpreter.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 16;

bool IsConstant(const ir::Value* v) { return v->node()->op() == ir::OpKind::kConstant; }

// A constant, or a broadcast_in_dim of one small enough to expand.
bool IsConstantLike(const ir::Value* v) {
  if (IsConstant(v)) return true;
  return v->node()->op() == ir::OpKind::kBroadcastInDim && IsConstant(v->node()->operand(0)) &&
         v->type().NumElements() <= kMaxFoldElements;
}

bool Foldable(const ir::Node& n) {
  if (n.num_results() != 1 || n.num_operands() == 0) return false;
  if (HasSideEffects(n) || n.info().Has(ir::kCollective)) return false;
  switch (n.op()) {
    case ir::OpKind::kRngBitGenerator:
    case ir::OpKind::kOptimizationBarrier:
    case ir::OpKind::kBroadcastInDim:
      return false;
    default: break;
  }
  if (n.result()->type().NumElements() > kMaxFoldElements) return false;
  for (const ir::Value* v : n.operands())
    if (!IsConstantLike(v)) return false;
  return true;
}

const ir::Literal& ConstantValue(const ir::Value* v) {
  return v->node()->attrs_as<ir::ConstantAttrs>().value;
}

bool FoldConstants(ir::Function& f) {
  Rewrite rw(f);
  for (size_t i = 0; i < f.nodes().size(); ++i) {
    ir::Node* n = f.nodes()[i].get();
    rw.Apply(*n);
    if (!Foldable(*n)) continue;
    std::vector<const ir::Literal*> operands;
    std::vector<std::unique_ptr<ir::Literal>> expanded;  // broadcasts of constants, evaluated
    std::vector<ir::Literal> out;
    try {
      for (const ir::Value* v : n->operands()) {
        if (IsConstant(v)) {
          operands.push_back(&ConstantValue(v));
          continue;
        }
        const ir::Literal* c = &ConstantValue(v->node()->operand(0));
        expanded.push_back(std::make_unique<ir::Literal>(
            std::move(ir::EvaluateNode(*v->node(), std::span<const ir::Literal* const>(&c, 1))[0])));
        operands.push_back(expanded.back().get());
      }
      out = ir::EvaluateNode(*n, operands);
    } catch (const Error&) {
      continue;  // an op the kernel refuses (e.g. a gather from an empty axis) fails at run time
    }
    AXLE_CHECK(out.size() == 1 && out[0].type() == n->result()->type(),
               "fold: the kernel of {} returned an unexpected type", n->name());
    ir::Node* c = f.InsertNode(i, ir::OpKind::kConstant, {}, ir::ConstantAttrs{std::move(out[0])},
                               {n->result()->type()});
    ++i;  // n moved one position up
    c->set_loc(n->loc());
    c->result()->set_name(n->result()->name());
    c->result()->set_sharding(n->result()->sharding());
    rw.Replace(n, {c->result()});
  }
  const bool changed = rw.changed();
  rw.Finish();
  return changed;
}

class FoldPass : public Pass {
 public:
  std::string_view name() const override { return "fold"; }
  std::string_view summary() const override {
    return "Replace nodes whose operands are all constants by the constant the interpreter computes.";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= FoldConstants(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldPass() { return std::make_unique<FoldPass>(); }

}  // namespace axle::passes
