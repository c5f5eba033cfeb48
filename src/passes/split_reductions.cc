// split-reductions: a full reduction of many elements becomes two levels, so it runs on every core.
//
// A generated reduction kernel parallelizes over its outputs; reducing a whole tensor to one
// scalar (the squared norm of a gradient for clipping, a loss) has one output and ran on one
// thread, reading tens of MB. The rewrite
//
//   y = reduce(x) {kind=k, dims=[all]} : f32[]
//     =>
//   r = reshape(x) : f32[C, N/C]
//   p = reduce(r) {kind=k, dims=[1]} : f32[C]      C partial results, one row each: parallel
//   y = reduce(p) {kind=k, dims=[0]} : f32[]
//
// is exact for max and min (they do not round) and reassociates a sum: each row accumulates in
// double in order, then the C row results are summed in order. The result is as accurate (a
// two-level sum has a smaller error bound than one long one), deterministic (C does not depend on
// the thread count) but not bitwise the interpreter's, so the compiled backend runs this pass only
// with fast math (AXLE_FAST_MATH, on by default; docs/compiler.md "Fast math").
//
// Split: floating-point sum / max / min over every dim of an operand of at least kMinElements
// elements, with C = the largest power of two <= kMaxRows dividing N (at least kMinRows; otherwise
// declined). The prologue of the reduce (elementwise ops, transposes) fuses into the first level
// as before, now a row reduction with C outputs.
#include <vector>

#include "ir/attrs.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;

constexpr int64_t kMinElements = int64_t{1} << 16;
constexpr int64_t kMaxRows = 64;
constexpr int64_t kMinRows = 8;

bool SplitOne(ir::Function& f, size_t pos) {
  Node& n = *f.nodes()[pos];
  if (n.op() != OpKind::kReduce) return false;
  const auto& a = n.attrs_as<ir::ReduceAttrs>();
  const ir::Value* x = n.operand(0);
  // f32 / f64 only: a bf16 or f16 partial would round each row result to 8 or 11 bits.
  if ((x->dtype() != DType::kF32 && x->dtype() != DType::kF64) || a.kind == ir::ReduceKind::kProd) return false;
  if (static_cast<int64_t>(a.dims.size()) != x->type().rank() || n.result()->sharding()) return false;
  const int64_t size = x->shape().NumElements();
  if (size < kMinElements) return false;
  int64_t rows = kMaxRows;
  while (rows >= kMinRows && size % rows != 0) rows /= 2;
  if (rows < kMinRows) return false;
  const DType dt = x->dtype();
  Node* reshape = f.InsertNode(pos, OpKind::kReshape, {n.operand(0)}, ir::NoAttrs{},
                               {ir::TensorType(dt, Shape{rows, size / rows})});
  Node* partial = f.InsertNode(pos + 1, OpKind::kReduce, {reshape->result()}, ir::ReduceAttrs{a.kind, {1}},
                               {ir::TensorType(dt, Shape{rows})});
  partial->set_loc(n.loc());
  // The original node becomes the second level, in place: its users and result stay.
  n.set_operand(0, partial->result());
  n.mutable_attrs() = ir::ReduceAttrs{a.kind, {0}};
  return true;
}

class SplitReductionsPass : public Pass {
 public:
  std::string_view name() const override { return "split-reductions"; }
  std::string_view summary() const override {
    return "Fast math: a full reduction of >= 64K elements becomes [C, N/C] row results, then their reduction.";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module))
      for (size_t i = 0; i < f->nodes().size(); ++i)
        if (SplitOne(*f, i)) {
          changed = true;
          i += 2;  // past the inserted reshape and partial reduce, to the rewritten node
        }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeSplitReductionsPass() { return std::make_unique<SplitReductionsPass>(); }

}  // namespace axle::passes
