// widen-half-products: bf16 / f16 products as f32 products of widened operands, for a backend
// without half products (docs/precision.md, "Without bf16 products").
//
// Note [Widening half products once]
// A CPU without AVX512-BF16 (or without oneDNN, or any f16 product) multiplies halves by widening
// each block of both operands to f32 and calling sgemm (Note [Products of halves],
// backends/cpu/dot.cc): correct, but every product widens its operands again, a weight once per
// product that reads it, and GPT-2 124M's bf16-mixed step ran 23% slower than its f32 step. XLA
// normalizes such a program instead (FloatNormalization): this pass rewrites
//
//   %y = dot_general(%a, %b) : bf16[...]          %a.f = convert(%a) : f32[...]
//                                           ->    %b.f = convert(%b) : f32[...]
//                                                 %y.f = dot_general(%a.f, %b.f) : f32[...]
//                                                 %y = convert(%y.f) : bf16[...]
//
// (no last convert for a product declared f32, Note [Partial products of halves]). A half widens
// exactly, so the f32 product multiplies the same values and sums them in f32 as the widened path
// does, and the result is rounded once to the half as before; only which sgemm calls sum them
// differs. The converts are elementwise: fusion puts each operand's into the kernel that makes
// it (an autocast cast of a weight becomes one kernel that rounds it to bf16 and stores it as
// f32). The pass makes one convert per value, however many products read it: with one per
// product, fusion copied the weight's cast into each, and GPT-2's weights were rounded and
// widened twice a step (forward and backward), 8 bytes a parameter each time. The compiled backend runs
// it after the simplify stage (transposes folded into products first) when its products of halves
// would be widened (PipelineOptions::widen_half_products).
#include <unordered_map>

#include "core/dtype.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

bool IsHalf(DType t) { return t == DType::kBF16 || t == DType::kF16; }

bool WidenFunction(ir::Function& f, bool native_bf16) {
  bool changed = false;
  // One convert per half value, placed before the first product that reads it (nodes are in
  // program order, so it precedes every later reader): a weight that the forward and the
  // backward multiply is rounded and widened by one kernel, not by one per product.
  std::unordered_map<Value*, Value*> widened;
  for (size_t pos = 0; pos < f.nodes().size(); ++pos) {
    Node* dot = f.nodes()[pos].get();
    if (dot->op() != OpKind::kDotGeneral || !IsHalf(dot->operand(0)->dtype()) || !IsHalf(dot->operand(1)->dtype()))
      continue;
    if (native_bf16 && dot->operand(0)->dtype() == DType::kBF16 && dot->operand(1)->dtype() == DType::kBF16) continue;
    std::vector<Value*> wide;
    for (size_t i = 0; i < 2; ++i) {
      Value* x = dot->operand(i);
      Value*& w = widened[x];
      if (w == nullptr) {
        Node* c = f.InsertNode(pos++, OpKind::kConvert, {x}, ir::NoAttrs{}, {ir::TensorType(DType::kF32, x->shape())});
        c->set_loc(dot->loc());
        c->result()->set_sharding(x->sharding());
        w = c->result();
      }
      wide.push_back(w);
    }
    Value* y = dot->result();
    Node* product = f.InsertNode(pos++, OpKind::kDotGeneral, wide, dot->attrs(), {ir::TensorType(DType::kF32, y->shape())});
    product->set_loc(dot->loc());
    product->result()->set_sharding(y->sharding());
    Value* out = product->result();
    if (y->dtype() != DType::kF32) {
      Node* narrow = f.InsertNode(pos++, OpKind::kConvert, {out}, ir::NoAttrs{}, {y->type()});
      narrow->set_loc(dot->loc());
      narrow->result()->set_sharding(y->sharding());
      out = narrow->result();
    }
    out->set_name(y->name());
    f.ReplaceAllUsesWith(y, out);
    f.EraseNode(dot);
    --pos;  // the node after the rewrite is at pos now
    changed = true;
  }
  return changed;
}

class WidenHalfProductsPass : public Pass {
 public:
  std::string_view name() const override { return "widen-half-products"; }
  std::string_view summary() const override {
    return "Rewrites bf16/f16 dot_general as f32 dot_general of converted operands (and a convert of the result), "
           "for backends without half products: each operand is widened once, fused into its producer.";
  }
  void set_context(const PassContext& context) override { native_bf16_ = context.native_bf16_products; }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (const auto& f : module.functions()) changed |= WidenFunction(*f, native_bf16_);
    return changed;
  }

 private:
  bool native_bf16_ = false;
};

}  // namespace

std::unique_ptr<Pass> MakeWidenHalfProductsPass() { return std::make_unique<WidenHalfProductsPass>(); }

}  // namespace axle::passes
