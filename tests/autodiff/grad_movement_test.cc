// Finite-difference checks (f64, reference interpreter) of the data-movement VJP rules.
#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

Value* I32(Builder& b, std::vector<int64_t> dims, std::vector<int32_t> v) {
  return b.Constant(Literal::FromVector<int32_t>(DType::kI32, Shape(std::move(dims)), v));
}
Value* I32Scalar(Builder& b, int32_t v) { return I32(b, {}, {v}); }

TEST(GradMovementTest, BroadcastInDim) {
  struct Case {
    std::vector<int64_t> in, out, dims;
  };
  const std::vector<Case> cases = {
      {{}, {2, 3}, {}},         {{3}, {2, 3}, {1}},       {{2}, {2, 3}, {0}},
      {{1, 3}, {4, 3}, {0, 1}}, {{2, 1}, {2, 5}, {0, 1}}, {{3, 1}, {2, 3, 4}, {1, 2}},
      {{1, 1}, {1, 1}, {0, 1}}, {{1}, {3, 1}, {1}},       {{2, 3}, {2, 4, 3}, {0, 2}},
  };
  for (const Case& c : cases)
    CheckGradients("broadcast_in_dim", {F64(c.in)}, [&](Builder& b, const Values& p) {
      return b.BroadcastInDim(p[0], Shape(c.out), c.dims);
    });
}

TEST(GradMovementTest, ReshapeTransposeReverse) {
  CheckGradients("reshape", {F64({2, 6})}, [](Builder& b, const Values& p) {
    return b.Reshape(p[0], Shape{3, 1, 4});
  });
  CheckGradients("reshape scalar", {F64({1, 1})},
                 [](Builder& b, const Values& p) { return b.Reshape(p[0], Shape{}); });
  for (const auto& perm :
       std::vector<std::vector<int64_t>>{{1, 0, 2}, {2, 0, 1}, {1, 2, 0}, {0, 1, 2}})
    CheckGradients("transpose", {F64({2, 3, 4})},
                   [&](Builder& b, const Values& p) { return b.Transpose(p[0], perm); });
  for (const auto& dims : std::vector<std::vector<int64_t>>{{0}, {1}, {0, 1}, {}})
    CheckGradients("reverse", {F64({3, 4})}, [&](Builder& b, const Values& p) {
      return b.Build1(OpKind::kReverse, {p[0]}, ir::ReverseAttrs{dims});
    });
}

TEST(GradMovementTest, Slice) {
  const std::vector<ir::SliceAttrs> cases = {
      {{0, 0}, {4, 5}, {1, 1}}, {{1, 2}, {3, 5}, {1, 1}}, {{0, 1}, {4, 5}, {2, 3}},
      {{1, 0}, {4, 4}, {3, 2}}, {{2, 2}, {2, 5}, {1, 1}},  // empty
      {{3, 4}, {4, 5}, {5, 7}},
  };
  for (const auto& s : cases)
    CheckGradients("slice", {F64({4, 5})}, [&](Builder& b, const Values& p) {
      return b.Build1(OpKind::kSlice, {p[0]}, s);
    });
}

TEST(GradMovementTest, Pad) {
  const std::vector<ir::PadAttrs> cases = {
      {{1, 0}, {2, 1}, {0, 0}},     {{0, 2}, {0, 0}, {1, 2}},   {{-1, 1}, {2, -2}, {0, 0}},
      {{-2, 0}, {-1, 1}, {2, 1}},   {{3, -4}, {-5, 2}, {1, 1}}, {{0, 0}, {0, 0}, {0, 0}},
      {{-3, -2}, {-1, -3}, {1, 2}},
  };
  for (const auto& p : cases)
    CheckGradients("pad", {F64({3, 4}), F64({})}, [&](Builder& b, const Values& v) {
      return b.Build1(OpKind::kPad, {v[0], v[1]}, p);
    });
  CheckGradients("pad empty operand", {F64({0, 2}), F64({})}, [](Builder& b, const Values& v) {
    return b.Build1(OpKind::kPad, {v[0], v[1]}, ir::PadAttrs{{1, 0}, {1, 1}, {2, 0}});
  });
}

TEST(GradMovementTest, Concatenate) {
  CheckGradients(
      "concatenate dim 0", {F64({2, 3}), F64({1, 3}), F64({4, 3})},
      [](Builder& b, const Values& p) {
        return b.Build1(OpKind::kConcatenate, {p[0], p[1], p[2]}, ir::ConcatenateAttrs{0});
      });
  CheckGradients(
      "concatenate dim 1, repeated operand", {F64({2, 3}), F64({2, 1})},
      [](Builder& b, const Values& p) {
        return b.Build1(OpKind::kConcatenate, {p[0], p[1], p[0]}, ir::ConcatenateAttrs{1});
      });
}

TEST(GradMovementTest, DynamicSliceAndUpdate) {
  // Starts in range, clamped from above and from below.
  for (auto [s0, s1] : std::vector<std::pair<int32_t, int32_t>>{{1, 2}, {5, 9}, {-3, 0}}) {
    CheckGradients("dynamic_slice", {F64({4, 5})}, [&](Builder& b, const Values& p) {
      return b.Build1(OpKind::kDynamicSlice, {p[0], I32Scalar(b, s0), I32Scalar(b, s1)},
                      ir::DynamicSliceAttrs{{2, 3}});
    });
    CheckGradients("dynamic_update_slice", {F64({4, 5}), F64({2, 3})},
                   [&](Builder& b, const Values& p) {
                     return b.Build1(OpKind::kDynamicUpdateSlice,
                                     {p[0], p[1], I32Scalar(b, s0), I32Scalar(b, s1)});
                   });
  }
}

TEST(GradMovementTest, Gather) {
  // take along axis 0 with repeats and out-of-range (clamped) indices.
  CheckGradients("gather axis 0", {F64({4, 3})}, [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kGather, {p[0], I32(b, {5}, {0, 2, 2, 7, -1})}, ir::GatherAttrs{0, 0});
  });
  CheckGradients("gather axis 1, 2-d indices", {F64({2, 4, 3})}, [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kGather, {p[0], I32(b, {2, 2}, {3, 0, 1, 3})}, ir::GatherAttrs{1, 0});
  });
  CheckGradients("gather batch_dims 1", {F64({3, 4})}, [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kGather, {p[0], I32(b, {3, 2}, {0, 3, 1, 1, 2, 9})},
                    ir::GatherAttrs{1, 1});
  });
  // One index per row along the last dim: the gradient is a one-hot select (out-of-range
  // indices clamped, as gather reads them).
  CheckGradients("gather one index a row", {F64({2, 3, 4})}, [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kGather, {p[0], I32(b, {2, 3, 1}, {3, 0, 9, -2, 1, 1})}, ir::GatherAttrs{2, 2});
  });
}

TEST(GradMovementTest, ScatterAdd) {
  // Duplicates accumulate; out-of-range updates are dropped (zero gradient).
  CheckGradients("scatter_add axis 0", {F64({4, 3}), F64({5, 3})}, [](Builder& b, const Values& p) {
    return b.Build1(OpKind::kScatterAdd, {p[0], I32(b, {5}, {0, 2, 2, 7, -1}), p[1]},
                    ir::GatherAttrs{0, 0});
  });
  CheckGradients(
      "scatter_add batch_dims 1", {F64({3, 4}), F64({3, 2})}, [](Builder& b, const Values& p) {
        return b.Build1(OpKind::kScatterAdd, {p[0], I32(b, {3, 2}, {0, 3, 1, 1, 2, 9}), p[1]},
                        ir::GatherAttrs{1, 1});
      });
  CheckGradients("scatter_add axis 1, 2-d indices", {F64({2, 4, 3}), F64({2, 2, 2, 3})},
                 [](Builder& b, const Values& p) {
                   return b.Build1(OpKind::kScatterAdd, {p[0], I32(b, {2, 2}, {3, 0, 4, 3}), p[1]},
                                   ir::GatherAttrs{1, 0});
                 });
}

}  // namespace
}  // namespace axle::autodiff::test
