// Finite-difference checks (f64) of composite graphs as the frontend decomposes them: softmax,
// log_softmax + cross-entropy via one-hot, layer norm, GELU (tanh), a 2-layer MLP.
#include <cmath>
#include <numbers>

#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::CompareDir;
using ir::ReduceKind;

Value* Const(Builder& b, Value* like, double v) {
  return b.BroadcastInDim(b.Scalar(like->dtype(), v), like->shape(), {});
}

// Reduces the last dim of x: [B, N] -> [B], then broadcasts back to [B, N].
Value* RowwiseBack(Builder& b, Value* row, const Shape& shape) {
  return b.BroadcastInDim(row, shape, {0});
}

// softmax(x) over the last dim of x: [B, N], with the max subtracted.
Value* Softmax(Builder& b, Value* x) {
  Value* m = RowwiseBack(b, b.Reduce(x, ReduceKind::kMax, {1}), x->shape());
  Value* e = b.Unary(OpKind::kExp, b.Sub(x, m));
  return b.Div(e, RowwiseBack(b, b.Reduce(e, ReduceKind::kSum, {1}), x->shape()));
}

// log_softmax(x) = x - max - log(sum(exp(x - max))).
Value* LogSoftmax(Builder& b, Value* x) {
  Value* shifted = b.Sub(x, RowwiseBack(b, b.Reduce(x, ReduceKind::kMax, {1}), x->shape()));
  Value* lse =
      b.Unary(OpKind::kLog, b.Reduce(b.Unary(OpKind::kExp, shifted), ReduceKind::kSum, {1}));
  return b.Sub(shifted, RowwiseBack(b, lse, x->shape()));
}

TEST(GradCompositeTest, Softmax) {
  CheckGradients("softmax", {F64({3, 5})},
                 [](Builder& b, const Values& p) { return Softmax(b, p[0]); });
}

TEST(GradCompositeTest, CrossEntropyViaOneHot) {
  // logits: [4, 5], labels: [4] (i32 constant) -> one_hot: [4, 5] -> loss: []
  CheckGradients("cross entropy", {F64({4, 5})}, [](Builder& b, const Values& p) {
    Value* labels = b.Constant(Literal::FromVector<int32_t>(DType::kI32, Shape{4}, {1, 0, 4, 2}));
    Value* classes = b.Iota(ir::TensorType(DType::kI32, Shape{4, 5}), 1);
    Value* hot = b.Compare(CompareDir::kEq, classes, b.BroadcastInDim(labels, Shape{4, 5}, {0}));
    Value* one_hot = b.Convert(hot, DType::kF64);
    Value* nll = b.Unary(OpKind::kNeg,
                         b.Reduce(b.Mul(LogSoftmax(b, p[0]), one_hot), ReduceKind::kSum, {0, 1}));
    return b.Div(nll, b.Scalar(DType::kF64, 4));
  });
  // The same with gather (take_along_axis) instead of the one-hot product.
  CheckGradients("cross entropy via gather", {F64({4, 5})}, [](Builder& b, const Values& p) {
    Value* labels =
        b.Constant(Literal::FromVector<int32_t>(DType::kI32, Shape{4, 1}, {1, 0, 4, 2}));
    Value* picked = b.Build1(OpKind::kGather, {LogSoftmax(b, p[0]), labels}, ir::GatherAttrs{1, 1});
    return b.Unary(OpKind::kNeg, b.Reduce(picked, ReduceKind::kSum, {0, 1}));
  });
}

TEST(GradCompositeTest, LayerNorm) {
  // x: [3, 6], gamma, beta: [6]; y = (x - mean) * rsqrt(var + eps) * gamma + beta
  CheckGradients("layer norm", {F64({3, 6}), F64({6}), F64({6})}, [](Builder& b, const Values& p) {
    Value* x = p[0];
    const Shape& s = x->shape();
    Value* n = Const(b, x, 6.0);
    Value* mean = b.Div(RowwiseBack(b, b.Reduce(x, ReduceKind::kSum, {1}), s), n);
    Value* c = b.Sub(x, mean);
    Value* var = b.Div(RowwiseBack(b, b.Reduce(b.Mul(c, c), ReduceKind::kSum, {1}), s), n);
    Value* inv = b.Unary(OpKind::kRsqrt, b.Add(var, Const(b, var, 1e-5)));
    Value* gamma = b.BroadcastInDim(p[1], s, {1});
    Value* beta = b.BroadcastInDim(p[2], s, {1});
    return b.Add(b.Mul(b.Mul(c, inv), gamma), beta);
  });
}

// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Value* GeluTanh(Builder& b, Value* x) {
  Value* x3 = b.Mul(x, b.Mul(x, x));
  Value* inner = b.Mul(Const(b, x, std::sqrt(2 / std::numbers::pi)),
                       b.Add(x, b.Mul(Const(b, x, 0.044715), x3)));
  Value* t = b.Unary(OpKind::kTanh, inner);
  return b.Mul(b.Mul(Const(b, x, 0.5), x), b.Add(Const(b, x, 1.0), t));
}

TEST(GradCompositeTest, GeluTanh) {
  CheckGradients("gelu", {F64({2, 7})},
                 [](Builder& b, const Values& p) { return GeluTanh(b, p[0]); },
                 {.ranges = {{-4, 4}}});
}

TEST(GradCompositeTest, TwoLayerMlp) {
  // x: [4, 3], w1: [3, 5], b1: [5], w2: [5, 2], b2: [2]; loss = mean cross entropy.
  CheckGradients(
      "mlp", {F64({4, 3}), F64({3, 5}), F64({5}), F64({5, 2}), F64({2})},
      [](Builder& b, const Values& p) {
        Value* h = b.Add(b.MatMul(p[0], p[1]), b.BroadcastInDim(p[2], Shape{4, 5}, {1}));
        h = GeluTanh(b, h);
        Value* logits = b.Add(b.MatMul(h, p[3]), b.BroadcastInDim(p[4], Shape{4, 2}, {1}));
        Value* labels =
            b.Constant(Literal::FromVector<int32_t>(DType::kI32, Shape{4, 1}, {1, 0, 0, 1}));
        Value* picked =
            b.Build1(OpKind::kGather, {LogSoftmax(b, logits), labels}, ir::GatherAttrs{1, 1});
        return b.Div(b.Unary(OpKind::kNeg, b.Reduce(picked, ReduceKind::kSum, {0, 1})),
                     b.Scalar(DType::kF64, 4));
      });
}

}  // namespace
}  // namespace axle::autodiff::test
