// The verifier rejects malformed modules with a message that names the node, its operand types
// and the rule broken. Modules are built in memory here; tests/ir/parse_errors/ covers text.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace axle::ir {
namespace {

TensorType F32(Shape s) { return TensorType(DType::kF32, std::move(s)); }

// Expects Verify(m) to throw an Error whose text contains every one of `parts`.
void ExpectVerifyError(const Module& m, std::initializer_list<std::string_view> parts) {
  try {
    Verify(m);
    FAIL() << "expected a verifier error";
  } catch (const Error& e) {
    for (std::string_view p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "missing '" << p << "' in:\n" << e.what();
  }
}

TEST(Verifier, AcceptsBuiltModule) {
  Module m;
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({4, 8}), "x");
  Value* w = b.Parameter(1, F32({8, 2}), "w");
  b.Return({b.MatMul(x, w)});
  EXPECT_NO_THROW(Verify(m));
}

TEST(Verifier, WrongDeclaredResultType) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4}), "x");
  Node* n = f->AddNode(OpKind::kAdd, {x, x}, NoAttrs{}, {F32({5})});
  n->set_loc({"bad.axir", 3, 5});
  b.Return({n->result()});
  ExpectVerifyError(m, {"bad.axir:3:5: error: add:", "result types (f32[5]) differ from the inferred (f32[4])",
                        "operand types: (f32[4], f32[4])", "axle opt --passes=verify bad.axir"});
}

// dot_general's result is the operands' dtype, or f32 for halves (XLA's preferred_element_type);
// nothing else.
TEST(Verifier, DotResultDtype) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, TensorType(DType::kBF16, Shape{2, 3}), "x");
  Value* y = b.Parameter(1, TensorType(DType::kBF16, Shape{3, 4}), "y");
  ir::DotGeneralAttrs d;
  d.lhs_contracting = {1};
  d.rhs_contracting = {0};
  Value* wide = b.DotGeneral(x, y, d, DType::kF32);
  EXPECT_EQ(wide->type(), TensorType(DType::kF32, Shape{2, 4}));
  Node* n = f->AddNode(OpKind::kDotGeneral, {x, y}, d, {TensorType(DType::kI32, Shape{2, 4})});
  b.Return({wide, n->result()});
  ExpectVerifyError(m, {"dot_general: result dtype i32 must be the operands' bf16 (or f32 for bf16 and f16 operands)"});
}

TEST(Verifier, MismatchedOperandTypes) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4}), "x");
  Value* y = b.Parameter(1, F32({5}), "y");
  Node* n = f->AddNode(OpKind::kMul, {x, y}, NoAttrs{}, {F32({4})});
  b.Return({n->result()});
  ExpectVerifyError(m, {"mul: operand types differ (f32[4] vs f32[5])", "%x", "%y"});
}

TEST(Verifier, OperandDefinedLater) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4}), "x");
  Value* neg = b.Unary(OpKind::kNeg, x);
  // Insert a node at the front that uses `neg`, defined after it.
  f->InsertNode(0, OpKind::kExp, {neg}, NoAttrs{}, {F32({4})});
  ExpectVerifyError(m, {"exp: operand 0 is not defined earlier in the function"});
}

TEST(Verifier, WrongOperandCountAndAttrs) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4}), "x");
  f->AddNode(OpKind::kAdd, {x}, NoAttrs{}, {F32({4})});
  ExpectVerifyError(m, {"add: takes 2 operands, got 1"});

  Module m2;
  Function* f2 = m2.AddFunction("main");
  Value* y = Builder(f2).Parameter(0, F32({4}), "y");
  f2->AddNode(OpKind::kReduce, {y}, NoAttrs{}, {F32({})});
  ExpectVerifyError(m2, {"reduce: holds the wrong attribute struct"});
}

TEST(Verifier, ParameterIndices) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  b.Parameter(0, F32({4}), "a");
  b.Parameter(2, F32({4}), "b");
  ExpectVerifyError(m, {"parameter indices must be 0..1", "found index 2 where 1 was expected"});
}

TEST(Verifier, Shardings) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4, 8}), "x");
  x->set_sharding(Sharding{{{"data"}, {"data"}}, {}});
  ExpectVerifyError(m, {"uses mesh axis 'data' twice"});
  x->set_sharding(Sharding{{{"data"}}, {}});
  ExpectVerifyError(m, {"1 dimension entries for a value of rank 2"});
  x->set_sharding(Sharding{{{"data"}, {}}, {"model"}});
  EXPECT_NO_THROW(Verify(m));
}

TEST(Verifier, ReturnOfForeignValue) {
  Module m;
  Builder a(m.AddFunction("main"));
  Builder other(m.AddFunction("other"));
  Value* x = other.Parameter(0, F32({4}));
  a.Return({x});
  ExpectVerifyError(m, {"func @main: returned value 0 is not defined in the function"});
}

TEST(Verifier, DuplicateFunctionAndReplicas) {
  Module m;
  m.AddFunction("main");
  m.AddFunction("main");
  ExpectVerifyError(m, {"function @main is defined twice"});
  Module m2;
  Function* f = m2.AddFunction("main");
  Value* x = Builder(f).Parameter(0, F32({4}));
  f->AddNode(OpKind::kAllReduce, {x}, AllReduceAttrs{ReduceKind::kSum, {{0, 1}, {2}}}, {F32({4})});
  m2.set_num_replicas(3);
  ExpectVerifyError(m2, {"replica groups must be non-empty and of equal size"});
}

TEST(Builder, ErrorNamesOpShapesAndCallSite) {
  Module m;
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({4, 8}));
  Value* w = b.Parameter(1, F32({7, 2}));
  b.set_loc({"model.cc", 42, 0});
  try {
    b.MatMul(x, w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model.cc:42: error: dot_general: lhs dim 1 (size 8) and rhs dim 0 (size 7) must "
                 "match\n  operand types: (f32[4,8], f32[7,2])");
  }
}

TEST(ShapeRules, EveryOpHasOne) {
  for (const OpInfo& info : AllOps()) EXPECT_NE(GetShapeRule(info.kind), nullptr) << info.name;
}

}  // namespace
}  // namespace axle::ir
