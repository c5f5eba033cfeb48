// The printed backward IR of small graphs, checked with FileCheck: what the rules emit, in order.
#include <gtest/gtest.h>

#include "autodiff/vjp.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "testing/filecheck.h"

namespace axle::autodiff {
namespace {

// Parses `text`, differentiates result `output` with respect to `wrt`, verifies and prints.
std::string Differentiate(std::string_view text, int output, std::vector<int> wrt) {
  std::unique_ptr<ir::Module> m = ir::ParseModule(text);
  ir::Verify(*m);
  std::unique_ptr<ir::Module> g = GradModule(*m, output, std::move(wrt));
  ir::Verify(*g);
  return ir::PrintModule(*g);
}

void ExpectChecks(const std::string& printed, std::string_view checks) {
  testing::FileCheckResult r = testing::FileCheck(printed, checks);
  EXPECT_TRUE(r.ok) << r.message << "\n" << printed;
}

TEST(BackwardTextTest, SumOfExp) {
  const std::string printed = Differentiate(R"(
module @m {
  func @main {
    %x = parameter() {index=0} : f64[4]
    %e = exp(%x) : f64[4]
    %y = reduce(%e) {kind=sum, dims=[0]} : f64[]
    return %y
  }
})",
                                            0, {0});
  ExpectChecks(printed, R"(
// CHECK-LABEL: func @main
// CHECK:      %e = exp(%x) : f64[4]
// CHECK-NEXT: %y = reduce(%e) {kind=sum, dims=[0]} : f64[]
// CHECK-NEXT: [[SEED:%[0-9]+]] = constant() {value=1} : f64[]
// CHECK-NEXT: [[G:%[0-9]+]] = broadcast_in_dim([[SEED]]) {dims=[]} : f64[4]
// CHECK-NEXT: [[DX:%[0-9]+]] = mul([[G]], %e) : f64[4]
// CHECK-NEXT: return %y, [[DX]]
)");
}

TEST(BackwardTextTest, MatMulTransposesAndSharedUse) {
  // y = sum(x @ w) + sum(x): x's cotangent is the dot's plus the broadcast seed, added once.
  const std::string printed = Differentiate(R"(
module @m {
  func @main {
    %x = parameter() {index=0} : f32[2,3]
    %w = parameter() {index=1} : f32[3,4]
    %d = dot_general(%x, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[2,4]
    %s = reduce(%d) {kind=sum, dims=[0, 1]} : f32[]
    %t = reduce(%x) {kind=sum, dims=[0, 1]} : f32[]
    %y = add(%s, %t) : f32[]
    return %y
  }
})",
                                            0, {0, 1});
  ExpectChecks(printed, R"(
// CHECK-LABEL: func @main
// CHECK:      [[SEED:%[0-9]+]] = constant() {value=1} : f32[]
// CHECK-NOT:  constant
// CHECK:      [[GT:%[0-9]+]] = broadcast_in_dim([[SEED]]) {dims=[]} : f32[2,3]
// CHECK:      [[GD:%[0-9]+]] = broadcast_in_dim([[SEED]]) {dims=[]} : f32[2,4]
// CHECK-NEXT: [[DXD:%[0-9]+]] = dot_general([[GD]], %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[1]} : f32[2,3]
// CHECK-NEXT: [[DW:%[0-9]+]] = dot_general([[GD]], %x) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[4,3]
// CHECK-NEXT: [[DWT:%[0-9]+]] = transpose([[DW]]) {perm=[1, 0]} : f32[3,4]
// CHECK-NEXT: [[DX:%[0-9]+]] = add([[GT]], [[DXD]]) : f32[2,3]
// CHECK-NEXT: return %y, [[DX]], [[DWT]]
)");
}

TEST(BackwardTextTest, IndicesGetNoGradient) {
  // gather's indices are integers: only the operand is differentiated; the indices are clamped
  // because gather clamps and scatter_add drops.
  const std::string printed = Differentiate(R"(
module @m {
  func @main {
    %x = parameter() {index=0} : f64[5]
    %i = parameter() {index=1} : i32[3]
    %g = gather(%x, %i) {axis=0, batch_dims=0} : f64[3]
    %y = reduce(%g) {kind=sum, dims=[0]} : f64[]
    return %y
  }
})",
                                            0, {0});
  ExpectChecks(printed, R"(
// CHECK:      [[LO:%[0-9]+]] = constant() {value=0} : i32[]
// CHECK-NEXT: [[HI:%[0-9]+]] = constant() {value=4} : i32[]
// CHECK-NEXT: [[IC:%[0-9]+]] = clamp([[LO]], %i, [[HI]]) : i32[3]
// CHECK:      [[DX:%[0-9]+]] = scatter_add({{%[0-9]+}}, [[IC]], {{%[0-9]+}}) {axis=0, batch_dims=0} : f64[5]
// CHECK-NEXT: return %y, [[DX]]
)");
}

}  // namespace
}  // namespace axle::autodiff
