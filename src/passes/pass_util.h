// Helpers shared by the optimizing passes (internal to src/passes).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/literal.h"
#include "ir/module.h"

namespace axle::passes {

// The functions a rewriting pass may change: every function of the module but those a `fusion`
// node calls (Note [Fusion in the IR], codegen/fuse_pass.cc). A fused function is a kernel whose
// parameters and results are the emitter's; simplifying it could leave a function no kernel can
// be (one that returns its parameter, or one value twice), so a fused file keeps the fusion
// decisions it was written with (`axle opt --passes=fuse` then `axle compile`).
std::vector<ir::Function*> RewritableFunctions(ir::Module& module);

// A forward rewrite of one function: records "value `from` is now `to`" and redirects operands
// lazily. Passes walk nodes in order, call Resolve on every operand before looking at a node
// (Apply does it), record replacements, and call Finish at the end, which redirects the function
// results and erases the replaced nodes. Cost: one hash lookup per operand, instead of the
// function-wide scan of Function::ReplaceAllUsesWith per replacement.
class Rewrite {
 public:
  explicit Rewrite(ir::Function& f) : f_(f) {}
  // The value `v` stands for now.
  ir::Value* Resolve(ir::Value* v) const;
  // Redirects the operands of `n` to their replacements.
  void Apply(ir::Node& n) const;
  // True when every use of `from` may become a use of `to`: the same type, and no sharding
  // annotation of `from` is lost or changed.
  static bool CanReplace(const ir::Value* from, const ir::Value* to);
  // Records that every result of `node` is replaced (by the values in `to`, one per result); the
  // node is erased by Finish.
  void Replace(ir::Node* node, const std::vector<ir::Value*>& to);
  bool changed() const { return !replaced_.empty(); }
  // Redirects the function results and erases the replaced nodes (which have no uses left).
  void Finish();

 private:
  ir::Function& f_;
  std::unordered_map<const ir::Value*, ir::Value*> map_;
  std::unordered_set<ir::Node*> replaced_;
};

// Erases the nodes in `dead`, which nobody outside `dead` may use. Function::EraseNode is linear
// (it searches the node, then shifts the vector), and src/ir offers no bulk erase, so this costs
// O(|dead| * nodes) pointer steps; erasing from the back keeps the shifted tails short.
void EraseNodes(ir::Function& f, const std::unordered_set<ir::Node*>& dead);

// Ops whose nodes passes never remove, merge or evaluate at compile time: custom_call (an opaque
// kernel that may have side effects).
bool HasSideEffects(const ir::Node& n);

// The element of a splat constant seen through broadcast_in_dim: `v` is a constant whose
// elements all have the same bits, or a broadcast_in_dim of one. nullopt otherwise (also for
// empty tensors).
struct Splat {
  DType dtype;
  uint64_t bits;   // storage bits of the element (ElementBits)
  double value;    // the element as a double (exact for floats, bool and small integers)
};
std::optional<Splat> GetSplat(const ir::Value* v);

}  // namespace axle::passes
