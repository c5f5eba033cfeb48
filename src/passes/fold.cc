// fold: constant folding. A node whose operands are all constants is replaced by a constant
// holding its result, computed by the reference interpreter's own kernel (ir::EvaluateNode), so
// folding is bit-exact with evaluation by construction (the interpreter is the oracle).
//
// Folded: single-result nodes with at least one operand, all of them constants, whose result
// has at most kMaxFoldElements elements. Not folded: source ops (constant, iota, parameter: no
// operands), rng_bit_generator (its bits would be cheap to compute but would bloat the module),
// collectives (they need the replicas), custom_call (side effects), optimization_barrier (it must
// not be seen through), and multi-result nodes (sort: folding one node into several constants
// could grow the module).
#include "ir/interpreter.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 16;

bool Foldable(const ir::Node& n) {
  if (n.num_results() != 1 || n.num_operands() == 0) return false;
  if (HasSideEffects(n) || n.info().Has(ir::kCollective)) return false;
  if (n.op() == ir::OpKind::kRngBitGenerator || n.op() == ir::OpKind::kOptimizationBarrier)
    return false;
  if (n.result()->type().NumElements() > kMaxFoldElements) return false;
  for (const ir::Value* v : n.operands())
    if (v->node()->op() != ir::OpKind::kConstant) return false;
  return true;
}

bool FoldConstants(ir::Function& f) {
  Rewrite rw(f);
  for (size_t i = 0; i < f.nodes().size(); ++i) {
    ir::Node* n = f.nodes()[i].get();
    rw.Apply(*n);
    if (!Foldable(*n)) continue;
    std::vector<const ir::Literal*> operands;
    for (const ir::Value* v : n->operands())
      operands.push_back(&v->node()->attrs_as<ir::ConstantAttrs>().value);
    std::vector<ir::Literal> out;
    try {
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
    for (const auto& f : module.functions()) changed |= FoldConstants(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldPass() { return std::make_unique<FoldPass>(); }

}  // namespace axle::passes
