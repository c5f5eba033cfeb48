// canonicalize: puts the module into canonical printed form:
//   - value names are dropped (the printer numbers values %0, %1, ... in order);
//   - parameters come first, in index order; other nodes keep their order.
// It changes no semantics and keeps source locations and shardings.
#include <algorithm>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

class CanonicalizePass : public Pass {
 public:
  std::string_view name() const override { return "canonicalize"; }
  std::string_view summary() const override {
    return "Drop value names and order parameters first (by index), then nodes as written.";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= CanonicalizeFunction(*f);
    return changed;
  }

 private:
  static bool CanonicalizeFunction(ir::Function& f) {
    bool changed = false;
    for (const auto& n : f.nodes())
      for (ir::Value* v : n->results())
        if (!v->name().empty()) {
          v->set_name("");
          changed = true;
        }
    // Parameters first, by index: a parameter has no operands, so moving it up keeps the order
    // valid.
    std::vector<ir::Node*> params = f.Parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (f.nodes()[i].get() == params[i]) continue;
      ir::Node* p = params[i];
      std::vector<ir::TensorType> types = {p->result()->type()};
      ir::Node* moved = f.InsertNode(i, p->op(), {}, p->attrs(), types);
      moved->set_loc(p->loc());
      moved->result()->set_sharding(p->result()->sharding());
      f.ReplaceAllUsesWith(p->result(), moved->result());
      f.EraseNode(p);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

}  // namespace axle::passes
