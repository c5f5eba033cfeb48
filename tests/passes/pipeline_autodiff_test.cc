// The default pipeline on a realistic graph: the forward and backward pass of a small MLP with a
// softmax-free squared loss, as autodiff::GradModule builds it (broadcast constants, mul by
// ones, duplicated subexpressions). The pipeline must shrink it and keep every result bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "autodiff/vjp.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "testing/random_module.h"

namespace axle {
namespace {

constexpr const char* kMlp = R"(module @mlp {
  func @main {
    %x = parameter() {index=0} : f32[4,8]
    %w1 = parameter() {index=1} : f32[8,16]
    %b1 = parameter() {index=2} : f32[16]
    %w2 = parameter() {index=3} : f32[16,3]
    %b2 = parameter() {index=4} : f32[3]
    %h = dot_general(%x, %w1) {lhs_contracting=[1], rhs_contracting=[0]} : f32[4,16]
    %b1x = broadcast_in_dim(%b1) {dims=[1]} : f32[4,16]
    %hb = add(%h, %b1x) : f32[4,16]
    %zero = constant() {value=0} : f32[]
    %zeros = broadcast_in_dim(%zero) {dims=[]} : f32[4,16]
    %relu = max(%hb, %zeros) : f32[4,16]
    %o = dot_general(%relu, %w2) {lhs_contracting=[1], rhs_contracting=[0]} : f32[4,3]
    %b2x = broadcast_in_dim(%b2) {dims=[1]} : f32[4,3]
    %y = add(%o, %b2x) : f32[4,3]
    %t = transpose(%y) {perm=[1, 0]} : f32[3,4]
    %tt = transpose(%t) {perm=[1, 0]} : f32[4,3]
    %sq = mul(%tt, %y) : f32[4,3]
    %l = reduce(%sq) {kind=sum, dims=[0, 1]} : f32[]
    return %l
  }
})";

TEST(PipelineAutodiff, MlpTrainingStepShrinksAndKeepsItsResults) {
  std::unique_ptr<ir::Module> fwd = ir::ParseModule(kMlp);
  std::unique_ptr<ir::Module> m = autodiff::GradModule(*fwd, 0, {1, 2, 3, 4});
  for (uint64_t seed = 0; seed < 5; ++seed) {
    std::unique_ptr<ir::Module> opt = m->Clone();
    passes::RunPasses(*opt, {"default"});
    const size_t before = m->entry()->nodes().size(), after = opt->entry()->nodes().size();
    EXPECT_LT(after, before) << ir::PrintModule(*opt);
    if (seed == 0) std::fprintf(stderr, "mlp training step: %zu nodes -> %zu\n", before, after);
    const std::vector<ir::Literal> args = testing::RandomArguments(*m->entry(), seed);
    const std::vector<ir::Literal> want = ir::Evaluate(*m->entry(), args);
    const std::vector<ir::Literal> got = ir::Evaluate(*opt->entry(), args);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      bool same = want[i].type() == got[i].type();
      for (int64_t k = 0; same && k < want[i].NumElements(); ++k)
        same = ir::ElementBits(want[i], k) == ir::ElementBits(got[i], k) ||
               (std::isnan(want[i].GetDouble(k)) && std::isnan(got[i].GetDouble(k)));
      EXPECT_TRUE(same) << "result " << i << ": " << want[i].ToString() << " vs "
                        << got[i].ToString() << "\n" << ir::PrintModule(*opt);
    }
  }
}

}  // namespace
}  // namespace axle
