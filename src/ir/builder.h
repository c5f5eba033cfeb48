// Builder: appends nodes to a Function, inferring their result types with the op's shape rule.
//
//   Module m("mlp");
//   Builder b(m.AddFunction("main"));
//   Value* x = b.Parameter(0, {DType::kF32, {4, 8}}, "x");      // x: [4, 8]
//   Value* w = b.Parameter(1, {DType::kF32, {8, 2}}, "w");      // w: [8, 2]
//   Value* y = b.MatMul(x, w);                                  // y: [4, 2]
//   b.Return({y});
//
// A broken rule throws axle::Error naming the op, the operand types and the builder's current
// SourceLoc (set_loc), which the frontend points at the user's call.
#pragma once

#include <vector>

#include "ir/module.h"
#include "ir/shape_inference.h"

namespace axle::ir {

class Builder {
 public:
  explicit Builder(Function* f, ShapeContext ctx = {}) : f_(f), ctx_(ctx) {}

  Function* function() const { return f_; }
  // Location recorded on the nodes built from now on.
  void set_loc(SourceLoc loc) { loc_ = std::move(loc); }

  // The general form: any op, operands, attributes; `declared` gives the result types of
  // kDeclaresResult ops (reshape's target, convert's dtype, ...).
  std::vector<Value*> Build(OpKind op, std::vector<Value*> operands, Attrs attrs = NoAttrs{},
                            std::vector<TensorType> declared = {});
  // Build for single-result ops.
  Value* Build1(OpKind op, std::vector<Value*> operands, Attrs attrs = NoAttrs{},
                std::vector<TensorType> declared = {});
  // Build returning the node.
  Node* BuildNode(OpKind op, std::vector<Value*> operands, Attrs attrs = NoAttrs{},
                  std::vector<TensorType> declared = {});

  Value* Parameter(int64_t index, TensorType type, std::string name = "");
  Value* Constant(Literal value);
  Value* Scalar(DType dtype, double value);  // f32[] constant etc.
  Value* Iota(TensorType type, int64_t dim);

  Value* Unary(OpKind op, Value* x) { return Build1(op, {x}); }
  Value* Binary(OpKind op, Value* a, Value* b) { return Build1(op, {a, b}); }
  Value* Add(Value* a, Value* b) { return Binary(OpKind::kAdd, a, b); }
  Value* Sub(Value* a, Value* b) { return Binary(OpKind::kSub, a, b); }
  Value* Mul(Value* a, Value* b) { return Binary(OpKind::kMul, a, b); }
  Value* Div(Value* a, Value* b) { return Binary(OpKind::kDiv, a, b); }
  Value* Max(Value* a, Value* b) { return Binary(OpKind::kMax, a, b); }
  Value* Min(Value* a, Value* b) { return Binary(OpKind::kMin, a, b); }
  Value* Compare(CompareDir dir, Value* a, Value* b) {
    return Build1(OpKind::kCompare, {a, b}, CompareAttrs{dir});
  }
  Value* Select(Value* pred, Value* on_true, Value* on_false) {
    return Build1(OpKind::kSelect, {pred, on_true, on_false});
  }
  Value* Convert(Value* x, DType to);
  Value* BroadcastInDim(Value* x, Shape shape, std::vector<int64_t> dims);
  Value* Reshape(Value* x, Shape shape);
  Value* Transpose(Value* x, std::vector<int64_t> perm) {
    return Build1(OpKind::kTranspose, {x}, TransposeAttrs{std::move(perm)});
  }
  Value* Reduce(Value* x, ReduceKind kind, std::vector<int64_t> dims) {
    return Build1(OpKind::kReduce, {x}, ReduceAttrs{kind, std::move(dims)});
  }
  Value* DotGeneral(Value* lhs, Value* rhs, DotGeneralAttrs attrs) {
    return Build1(OpKind::kDotGeneral, {lhs, rhs}, std::move(attrs));
  }
  // A product of bf16 / f16 operands whose result is f32 (result = f32), or of the operands' dtype.
  Value* DotGeneral(Value* lhs, Value* rhs, DotGeneralAttrs attrs, DType result);
  // [..., m, k] x [k, n] -> [..., m, n]: contracts lhs's last dim with rhs's first.
  Value* MatMul(Value* lhs, Value* rhs);

  // Sets the function's results.
  void Return(std::vector<Value*> results);

 private:
  Function* f_;
  ShapeContext ctx_;
  SourceLoc loc_;
};

}  // namespace axle::ir
