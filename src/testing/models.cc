#include "testing/models.h"

#include "ir/builder.h"

namespace axle::testing {

std::unique_ptr<ir::Module> MlpLossModule(int64_t B, int64_t I, int64_t H, int64_t O) {
  using ir::OpKind;
  using ir::Value;
  auto f32 = [](Shape s) { return ir::TensorType(DType::kF32, std::move(s)); };
  auto m = std::make_unique<ir::Module>("mlp");
  ir::Builder b(m->AddFunction("main"));
  Value* x = b.Parameter(0, f32({B, I}), "x");
  Value* w1 = b.Parameter(1, f32({I, H}), "w1");
  Value* b1 = b.Parameter(2, f32({H}), "b1");
  Value* w2 = b.Parameter(3, f32({H, O}), "w2");
  Value* b2 = b.Parameter(4, f32({O}), "b2");
  Value* target = b.Parameter(5, f32({B, O}), "target");
  Value* h = b.Unary(OpKind::kTanh, b.Add(b.MatMul(x, w1), b.BroadcastInDim(b1, Shape{B, H}, {1})));
  Value* out = b.Add(b.MatMul(h, w2), b.BroadcastInDim(b2, Shape{B, O}, {1}));
  Value* d = b.Sub(out, target);
  Value* loss = b.Div(b.Reduce(b.Mul(d, d), ir::ReduceKind::kSum, {0, 1}),
                      b.Scalar(DType::kF32, static_cast<double>(B)));
  b.Return({loss});
  return m;
}

}  // namespace axle::testing
