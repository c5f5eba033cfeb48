// dce: dead-code elimination. A node is live when a function result uses one of its results,
// when a live node uses one, or when it must stay regardless: parameters (they define the
// function's signature) and custom_call (an opaque kernel, treated as side-effecting). Every
// other node is erased, including dead optimization barriers (a barrier orders computation; with
// no use of its results there is nothing to order) and dead collectives (every replica runs the
// same program, so every replica drops the same collective).
//
// Cost: marking is linear (one backward walk over the nodes with a use-set). Erasing goes through
// Function::EraseNode, which is linear per call, so removing k nodes costs O(k * nodes) pointer
// steps (see EraseNodes in pass_util.h); src/ir has no bulk erase.
#include <unordered_set>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

bool MustKeep(const ir::Node& n) { return n.op() == ir::OpKind::kParameter || HasSideEffects(n); }

bool EliminateDeadCode(ir::Function& f) {
  std::unordered_set<const ir::Value*> used(f.results().begin(), f.results().end());
  std::unordered_set<ir::Node*> dead;
  const auto& nodes = f.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    ir::Node* n = it->get();
    bool live = MustKeep(*n);
    for (size_t i = 0; !live && i < n->num_results(); ++i) live = used.count(n->result(i)) > 0;
    if (!live) {
      dead.insert(n);
      continue;
    }
    for (ir::Value* v : n->operands()) used.insert(v);
  }
  EraseNodes(f, dead);
  return !dead.empty();
}

class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view summary() const override {
    return "Erase nodes no function result depends on (keeps parameters and custom_call).";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (const auto& f : module.functions()) changed |= EliminateDeadCode(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeDcePass() { return std::make_unique<DcePass>(); }

}  // namespace axle::passes
