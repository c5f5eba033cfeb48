#include "ir/builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace axle::ir {

std::vector<Value*> Builder::Build(OpKind op, std::vector<Value*> operands, Attrs attrs,
                                   std::vector<TensorType> declared) {
  return BuildNode(op, std::move(operands), std::move(attrs), std::move(declared))->results();
}

Node* Builder::BuildNode(OpKind op, std::vector<Value*> operands, Attrs attrs, std::vector<TensorType> declared) {
  // Reused across calls (the lazy trace builds thousands of nodes a step); InferResultTypes does
  // not build nodes, so no call re-enters while it is in use.
  static thread_local std::vector<TensorType> operand_types;
  operand_types.clear();
  for (Value* v : operands) {
    AXLE_CHECK(v != nullptr, "null operand passed to {}", OpName(op));
    operand_types.push_back(v->type());
  }
  std::vector<TensorType> types;
  try {
    types = InferResultTypes(op, operand_types, attrs, declared, ctx_);
  } catch (const Error& e) {
    std::vector<std::string> parts;
    for (const TensorType& t : operand_types) parts.push_back(t.ToString());
    throw Error(loc_, fmt::format("{}: {}\n  operand types: ({})", OpName(op), e.message(),
                                  fmt::join(parts, ", ")));
  }
  Node* n = f_->AddNode(op, std::move(operands), std::move(attrs), types);
  n->set_loc(loc_);
  return n;
}

Value* Builder::Build1(OpKind op, std::vector<Value*> operands, Attrs attrs,
                       std::vector<TensorType> declared) {
  Node* n = BuildNode(op, std::move(operands), std::move(attrs), std::move(declared));
  AXLE_CHECK(n->num_results() == 1, "{} yields {} results; use Build", OpName(op), n->num_results());
  return n->result(0);
}

Value* Builder::Parameter(int64_t index, TensorType type, std::string name) {
  Value* v = Build1(OpKind::kParameter, {}, ParameterAttrs{index}, {std::move(type)});
  v->set_name(std::move(name));
  return v;
}

Value* Builder::Constant(Literal value) {
  return Build1(OpKind::kConstant, {}, ConstantAttrs{std::move(value)});
}

Value* Builder::Scalar(DType dtype, double value) {
  return Constant(Literal::Splat(TensorType(dtype, Shape{}), value));
}

Value* Builder::Iota(TensorType type, int64_t dim) {
  return Build1(OpKind::kIota, {}, IotaAttrs{dim}, {std::move(type)});
}

Value* Builder::Convert(Value* x, DType to) {
  return Build1(OpKind::kConvert, {x}, NoAttrs{}, {TensorType(to, x->shape())});
}

Value* Builder::DotGeneral(Value* lhs, Value* rhs, DotGeneralAttrs attrs, DType result) {
  if (result == lhs->dtype()) return DotGeneral(lhs, rhs, std::move(attrs));
  // The declared type: the rule's shape with `result` (the rule checks the dtype).
  ir::TensorType t = InferResultTypes(OpKind::kDotGeneral, std::vector<TensorType>{lhs->type(), rhs->type()}, attrs,
                                      {}, ctx_)[0];
  t.dtype = result;
  return Build1(OpKind::kDotGeneral, {lhs, rhs}, std::move(attrs), {t});
}

Value* Builder::BroadcastInDim(Value* x, Shape shape, std::vector<int64_t> dims) {
  return Build1(OpKind::kBroadcastInDim, {x}, BroadcastInDimAttrs{std::move(dims)},
                {TensorType(x->dtype(), std::move(shape))});
}

Value* Builder::Reshape(Value* x, Shape shape) {
  return Build1(OpKind::kReshape, {x}, NoAttrs{}, {TensorType(x->dtype(), std::move(shape))});
}

Value* Builder::MatMul(Value* lhs, Value* rhs) {
  DotGeneralAttrs d;
  d.lhs_contracting = {lhs->type().rank() - 1};
  d.rhs_contracting = {0};
  return DotGeneral(lhs, rhs, std::move(d));
}

void Builder::Return(std::vector<Value*> results) { f_->set_results(std::move(results)); }

}  // namespace axle::ir
