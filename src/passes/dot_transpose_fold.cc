// dot-transpose-fold: a transpose that only feeds dot_general's dimension numbers is folded into
// them, so the transpose need not be materialized (the CPU backend's dot hands [B,K,M] / [B,N,K]
// layouts to BLAS with a transpose flag instead of copying, see backends/cpu/dot.cc).
//
// The algebra. t = transpose(x, p): t's dim i is x's dim p[i], t[j...] = x[j permuted by p].
// dot_general(t, y, lhs_batch = Lb, lhs_contracting = Lc, ...) reads t's dim d, which is x's dim
// p[d]; so it reads the same elements as
//   dot_general(x, y, lhs_batch = p∘Lb, lhs_contracting = p∘Lc, ...)   (p∘L)[k] = p[L[k]]
// with the rhs numbers unchanged. The lists keep their order, so batch dim k still pairs with the
// rhs's batch dim k (and is result dim k), and contracting dim k still pairs with the rhs's
// contracting dim k; the interpreter sums over the contracting multi-index in list order, so the
// summation order, and every rounding, is unchanged: the fold is bitwise exact.
// What can change is the result's layout: the free (non-batch, non-contracting) dims of an
// operand appear in the result in increasing dim order. t's free dims F (increasing) are x's dims
// p[F[0]], p[F[1]], ...; the rewritten dot lists x's free dims in increasing order. The two agree
// iff p[F[0]] < p[F[1]] < ... : the permutation keeps the relative order of the free dims. When it
// reorders them the result would be transposed, and the rule declines.
// The rhs is the same with rhs_batch / rhs_contracting; both sides fold independently.
//
// Not folded:
//   - through an optimization_barrier (its operand is not a transpose: the rule only looks at the
//     dot's direct operands);
//   - a transpose whose result carries a sharding annotation (the fold would drop that layout
//     constraint from this use);
//   - broadcast_in_dim: its dims are strictly increasing, so a rank-preserving broadcast that
//     moves nothing is the identity (simplify's broadcast-broadcast removes it), and any other
//     broadcast changes the operand's shape; dot_general has no broadcasting operand form, and
//     dropping a broadcast batch dim would turn it into a free dim of the other operand, which
//     holds only for some dim orders. Not done (docs/passes.md).
// The dot node is rewritten in place (same result type and sharding); the transpose is left for
// dce when nothing else uses it.
#include <vector>

#include "ir/attrs.h"
#include "passes/pass_util.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e == x) return true;
  return false;
}

// Folds a transpose feeding operand `side` (0 = lhs, 1 = rhs) of `dot` (the node at `pos` of f);
// returns whether it did. Note [Converts of transposes]: a convert of a transpose (autocast's
// bf16 copy of a transposed weight, x @ W^T) becomes a convert of the transpose's operand,
// inserted before the dot, and the transpose folds as it would without the convert; a convert is
// elementwise, so each element is the same conversion of the same value. (The convert of x then
// writes in x's layout and the product reads it transposed in place; before, the transposed copy
// was written and read.) Several dots reading one such convert get one convert of x each, which
// CSE merges.
bool FoldSide(ir::Function& f, size_t pos, Node& dot, size_t side) {
  const Node* operand = dot.operand(side)->node();
  const Node* convert = nullptr;
  const Node* t = operand;
  if (operand != nullptr && operand->op() == OpKind::kConvert && !operand->result()->sharding().has_value()) {
    convert = operand;
    t = operand->operand(0)->node();
  }
  if (t == nullptr || t->op() != OpKind::kTranspose) return false;
  if (t->result()->sharding().has_value()) return false;
  const auto& p = t->attrs_as<ir::TransposeAttrs>().perm;
  auto d = dot.attrs_as<ir::DotGeneralAttrs>();
  std::vector<int64_t>& batch = side == 0 ? d.lhs_batch : d.rhs_batch;
  std::vector<int64_t>& contracting = side == 0 ? d.lhs_contracting : d.rhs_contracting;
  // t's free dims, in increasing order, must map to increasing dims of x.
  int64_t last = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(p.size()); ++i) {
    if (Contains(batch, i) || Contains(contracting, i)) continue;
    const int64_t to = p[static_cast<size_t>(i)];
    if (to < last) return false;
    last = to;
  }
  for (int64_t& b : batch) b = p[static_cast<size_t>(b)];
  for (int64_t& c : contracting) c = p[static_cast<size_t>(c)];
  ir::Value* x = t->operand(0);
  if (convert != nullptr) {
    Node* c = f.InsertNode(pos, OpKind::kConvert, {x}, ir::NoAttrs{},
                           {ir::TensorType(convert->result()->dtype(), x->shape())});
    c->set_loc(convert->loc());
    c->result()->set_name(convert->result()->name());
    x = c->result();
  }
  dot.set_operand(side, x);
  dot.mutable_attrs() = d;
  return true;
}

bool FoldFunction(ir::Function& f) {
  bool changed = false;
  for (size_t i = 0; i < f.nodes().size(); ++i) {
    Node& n = *f.nodes()[i];
    if (n.op() != OpKind::kDotGeneral) continue;
    for (size_t side = 0; side < 2; ++side)
      while (FoldSide(f, i, n, side)) {  // transpose(transpose(x)) folds twice
        changed = true;
        while (f.nodes()[i].get() != &n) ++i;  // past an inserted convert
      }
  }
  return changed;
}

class DotTransposeFoldPass : public Pass {
 public:
  std::string_view name() const override { return "dot-transpose-fold"; }
  std::string_view summary() const override {
    return "Folds transpose operands of dot_general into its dimension numbers when the result is unchanged.";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= FoldFunction(*f);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeDotTransposeFoldPass() { return std::make_unique<DotTransposeFoldPass>(); }

}  // namespace axle::passes
