// Finite-difference checks (f64, reference interpreter) of the reduction, scan, sort and
// dot_general VJP rules, plus reduce's zero and tie conventions.
#include <fmt/format.h>

#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::ReduceKind;

TEST(GradReduceTest, Reduce) {
  const std::vector<std::vector<int64_t>> dim_lists = {{},     {0},       {1},   {2},
                                                       {0, 2}, {0, 1, 2}, {2, 0}};
  for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kProd, ReduceKind::kMax, ReduceKind::kMin})
    for (const auto& dims : dim_lists)
      CheckGradients(fmt::format("reduce {} dims {}", ir::EnumName(k), dims.size()),
                     {F64({2, 3, 2})},
                     [&](Builder& b, const Values& p) { return b.Reduce(p[0], k, dims); },
                     {.ranges = {{0.5, 1.5}}});
  CheckGradients("reduce prod, mixed signs", {F64({3, 4})}, [](Builder& b, const Values& p) {
    return b.Reduce(p[0], ReduceKind::kProd, {1});
  });
}

std::vector<Literal> GradOfSum(const BodyFn& body, const Literal& x) {
  ir::Module m;
  Builder b(m.AddFunction("main"));
  Value* y = body(b, {b.Parameter(0, x.type())});
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < y->type().rank(); ++i) dims.push_back(i);
  b.Return({b.Reduce(y, ReduceKind::kSum, dims)});
  return ir::Evaluate(*GradModule(m, 0, {0})->entry(), {x});
}

Literal Mat(std::vector<int64_t> dims, std::vector<double> v) {
  return Literal::FromDoubles(DType::kF64, Shape(std::move(dims)), v);
}

TEST(GradReduceTest, ProdWithZeros) {
  // Rows: no zero, one zero, two zeros.
  auto prod = [](Builder& b, const Values& p) { return b.Reduce(p[0], ReduceKind::kProd, {1}); };
  auto g = GradOfSum(prod, Mat({3, 3}, {2, 3, 4, 2, 0, 5, 0, 3, 0}));
  EXPECT_EQ(g[1], Mat({3, 3}, {12, 8, 6, 0, 10, 0, 0, 0, 0}));
  // A single zero in a row is also a finite-difference-checkable point.
  CheckGradients("reduce prod at one zero", {F64({2, 3})}, [](Builder& b, const Values& p) {
    Value* mask = b.Constant(Mat({2, 3}, {1, 0, 1, 1, 1, 1}));
    return b.Reduce(b.Mul(p[0], mask), ReduceKind::kProd, {1});
  });
}

TEST(GradReduceTest, MaxTiesSplitEqually) {
  auto max = [](Builder& b, const Values& p) { return b.Reduce(p[0], ReduceKind::kMax, {1}); };
  auto g = GradOfSum(max, Mat({2, 4}, {1, 3, 3, 2, 5, 5, 5, 5}));
  EXPECT_EQ(g[1], Mat({2, 4}, {0, 0.5, 0.5, 0, 0.25, 0.25, 0.25, 0.25}));
}

TEST(GradReduceTest, Cumsum) {
  for (int64_t dim : {0, 1})
    for (bool reverse : {false, true})
      CheckGradients("cumsum", {F64({3, 4})}, [&](Builder& b, const Values& p) {
        return b.Build1(OpKind::kCumsum, {p[0]}, ir::CumsumAttrs{dim, reverse});
      });
}

TEST(GradReduceTest, Sort) {
  for (int64_t dim : {0, 1, 2})
    for (bool descending : {false, true}) {
      CheckGradients("sort keys", {F64({3, 4, 2})}, [&](Builder& b, const Values& p) {
        return b.Build(OpKind::kSort, {p[0]}, ir::SortAttrs{dim, descending})[0];
      });
      // Keys and a float payload; the payload's result is used, and both results combined.
      CheckGradients("sort payload", {F64({3, 4, 2}), F64({3, 4, 2})},
                     [&](Builder& b, const Values& p) {
                       std::vector<Value*> r =
                           b.Build(OpKind::kSort, {p[0], p[1]}, ir::SortAttrs{dim, descending});
                       return b.Add(b.Mul(r[0], r[1]), r[1]);
                     });
    }
  // An integer payload takes no gradient.
  CheckGradients("sort with integer payload", {F64({5})}, [](Builder& b, const Values& p) {
    Value* i = b.Iota(ir::TensorType(DType::kI32, Shape{5}), 0);
    std::vector<Value*> r = b.Build(OpKind::kSort, {p[0], i}, ir::SortAttrs{0, false});
    return b.Mul(r[0], b.Convert(r[1], DType::kF64));
  });
}

TEST(GradReduceTest, DotGeneral) {
  struct Case {
    std::vector<int64_t> lhs, rhs;
    ir::DotGeneralAttrs d;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {4, 2}, {{}, {}, {1}, {0}}},                      // matmul
      {{4, 3}, {4, 2}, {{}, {}, {0}, {0}}},                      // lhs transposed
      {{3, 4}, {2, 4}, {{}, {}, {1}, {1}}},                      // rhs transposed
      {{3}, {3}, {{}, {}, {0}, {0}}},                            // inner product
      {{3}, {2}, {{}, {}, {}, {}}},                              // outer product
      {{2, 3, 4}, {2, 4, 5}, {{0}, {0}, {2}, {1}}},              // batched matmul
      {{3, 2, 4}, {4, 5, 2}, {{1}, {2}, {2}, {0}}},              // batch dims not leading
      {{2, 3, 4, 5}, {5, 2, 4, 3}, {{0}, {1}, {3, 2}, {0, 2}}},  // two contracting dims, permuted
      {{2, 3, 4}, {3, 2, 4}, {{2, 0}, {2, 1}, {1}, {0}}},        // two batch dims, reordered
      {{2, 3}, {3, 2}, {{}, {}, {0, 1}, {1, 0}}},                // full contraction
  };
  for (const Case& c : cases)
    CheckGradients("dot_general", {F64(c.lhs), F64(c.rhs)},
                   [&](Builder& b, const Values& p) { return b.DotGeneral(p[0], p[1], c.d); });
}

}  // namespace
}  // namespace axle::autodiff::test
