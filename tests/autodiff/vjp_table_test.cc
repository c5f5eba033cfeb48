// The VJP table covers every op of ops.def: a rule, or an explicit "zero gradient" / "not
// differentiable" marker with a reason.
#include <gtest/gtest.h>

#include "autodiff/vjp.h"
#include "core/error.h"
#include "ir/builder.h"

namespace axle::autodiff {
namespace {

TEST(VjpTableTest, EveryOpHasAnEntry) {
  int rules = 0, zero = 0, not_diff = 0;
  for (const ir::OpInfo& info : ir::AllOps()) {
    const VjpEntry* e = GetVjp(info.kind);
    ASSERT_NE(e, nullptr) << "op " << info.name
                          << " has no VJP entry (add one in src/autodiff/vjp_rules_*.cc)";
    switch (e->kind) {
      case VjpKind::kRule:
        EXPECT_NE(e->rule, nullptr) << info.name;
        ++rules;
        break;
      case VjpKind::kZeroGradient:
        EXPECT_FALSE(e->reason.empty()) << info.name;
        ++zero;
        break;
      case VjpKind::kNotDifferentiable:
        EXPECT_FALSE(e->reason.empty()) << info.name;
        ++not_diff;
        break;
    }
  }
  EXPECT_EQ(rules + zero + not_diff, ir::kNumOps);
}

// The ops whose gradient is a rule: a change of this list is a deliberate change of the table.
TEST(VjpTableTest, DifferentiableOps) {
  std::vector<std::string> names;
  for (const ir::OpInfo& info : ir::AllOps())
    if (GetVjp(info.kind)->kind == VjpKind::kRule) names.emplace_back(info.name);
  const std::vector<std::string> expected = {"neg",
                                             "abs",
                                             "exp",
                                             "log",
                                             "log1p",
                                             "tanh",
                                             "logistic",
                                             "sqrt",
                                             "rsqrt",
                                             "sin",
                                             "cos",
                                             "erf",
                                             "add",
                                             "sub",
                                             "mul",
                                             "div",
                                             "rem",
                                             "pow",
                                             "max",
                                             "min",
                                             "atan2",
                                             "select",
                                             "clamp",
                                             "convert",
                                             "broadcast_in_dim",
                                             "reshape",
                                             "transpose",
                                             "slice",
                                             "dynamic_slice",
                                             "dynamic_update_slice",
                                             "pad",
                                             "concatenate",
                                             "reverse",
                                             "gather",
                                             "scatter_add",
                                             "reduce",
                                             "cumsum",
                                             "sort",
                                             "dot_general",
                                             "all_reduce",
                                             "all_gather",
                                             "reduce_scatter",
                                             "all_to_all",
                                             "collective_permute",
                                             "optimization_barrier"};
  EXPECT_EQ(names, expected);
}

TEST(VjpTableTest, NotDifferentiableThroughCustomCallIsAnError) {
  ir::Module m;
  ir::Builder b(m.AddFunction("main"));
  ir::Value* x = b.Parameter(0, {DType::kF64, {3}}, "x");
  ir::Value* y = b.Build(ir::OpKind::kCustomCall, {x}, ir::CustomCallAttrs{"my.kernel", ""},
                         {ir::TensorType(DType::kF64, {3})})[0];
  ir::Value* s = b.Reduce(y, ir::ReduceKind::kSum, {0});
  std::vector<ir::Value*> outs = {s}, cots = {b.Scalar(DType::kF64, 1)}, wrt = {x};
  try {
    BuildVjp(b, outs, cots, wrt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot differentiate through custom_call"),
              std::string::npos)
        << e.what();
  }
}

TEST(VjpTableTest, GradientOfAnUnusedParameterIsZeros) {
  ir::Module m;
  ir::Builder b(m.AddFunction("main"));
  ir::Value* x = b.Parameter(0, {DType::kF64, {2}}, "x");
  ir::Value* z = b.Parameter(1, {DType::kF64, {2, 2}}, "z");
  ir::Value* i = b.Parameter(2, {DType::kI32, {2}}, "i");
  (void)i;
  b.Return({b.Reduce(b.Mul(x, x), ir::ReduceKind::kSum, {0})});
  (void)z;
  std::unique_ptr<ir::Module> g = GradModule(m, 0, {0, 1, 2});
  ASSERT_EQ(g->entry()->results().size(), 4u);
  EXPECT_EQ(g->entry()->results()[2]->type(), ir::TensorType(DType::kF64, {2, 2}));
  EXPECT_EQ(g->entry()->results()[3]->type(), ir::TensorType(DType::kI32, {2}));
}

TEST(VjpTableTest, GradModuleRejectsANonScalarOutput) {
  ir::Module m;
  ir::Builder b(m.AddFunction("main"));
  ir::Value* x = b.Parameter(0, {DType::kF64, {2}}, "x");
  b.Return({x});
  EXPECT_THROW(GradModule(m, 0, {0}), Error);
  EXPECT_THROW(GradModule(m, 1, {0}), Error);
}

}  // namespace
}  // namespace axle::autodiff
