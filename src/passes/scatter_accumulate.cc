// scatter-accumulate: add(x, scatter_add(0, i, u)) -> scatter_add(x, i, u) (fast math).
//
// The gradient of an embedding lookup is a scatter-add of the rows' gradients into zeros, which
// autodiff then adds to the parameter's other gradient (GPT-2's tied wte: the LM head's). The
// zeros are materialized (154 MB for GPT-2 124M's [50257, 768]) and the add reads both tensors
// again. Scattering the rows straight into the other gradient does neither. In exact arithmetic
// both are x + sum(u); in floating point each element's sum is reassociated (x + (0 + u1 + u2)
// against x + u1 + u2), so the compiled backend runs this pass only with fast math, after the
// default pipeline (docs/compiler.md "Fast math"). Applies when the scatter's operand is a splat
// zero (either sign), its result feeds only this add, and the types agree (floats; integers would
// be exact, but the pass is not in the exact pipeline).
#include <unordered_map>
#include <vector>

#include "ir/attrs.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

bool AccumulateFunction(ir::Function& f) {
  std::unordered_map<const Value*, int> uses;
  for (const auto& n : f.nodes())
    for (const Value* v : n->operands()) ++uses[v];
  for (const Value* r : f.results()) ++uses[r];
  bool changed = false;
  for (size_t pos = 0; pos < f.nodes().size(); ++pos) {
    Node* add = f.nodes()[pos].get();
    if (add->op() != OpKind::kAdd || !IsFloat(add->result()->dtype())) continue;
    for (size_t side = 0; side < 2; ++side) {
      Value* s = add->operand(side);
      const Node* scatter = s->node();
      if (scatter->op() != OpKind::kScatterAdd || uses[s] != 1 || s->sharding()) continue;
      const std::optional<Splat> zero = GetSplat(scatter->operand(0));
      if (!zero || zero->value != 0) continue;
      Value* x = add->operand(1 - side);
      if (x->type() != s->type()) continue;
      // A new scatter into x where the add stands (x and the scatter's indices and rows are all
      // defined before it); the old scatter, the add and the zeros are left for dce.
      Node* acc = f.InsertNode(pos, OpKind::kScatterAdd, {x, scatter->operand(1), scatter->operand(2)},
                               scatter->attrs(), {add->result()->type()});
      acc->set_loc(scatter->loc());
      acc->result()->set_name(add->result()->name());
      f.ReplaceAllUsesWith(add->result(), acc->result());
      ++pos;  // the add moved down by one
      changed = true;
      break;
    }
  }
  return changed;
}

class ScatterAccumulatePass : public Pass {
 public:
  std::string_view name() const override { return "scatter-accumulate"; }
  std::string_view summary() const override {
    return "Fast math: add(x, scatter_add(0, i, u)) becomes scatter_add(x, i, u) (no zeros, no add).";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= AccumulateFunction(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeScatterAccumulatePass() { return std::make_unique<ScatterAccumulatePass>(); }

}  // namespace axle::passes
