// A GPT-2 training step on the CPU executor against the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "axle/metrics.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/tensor.h"

namespace axle {
namespace {

struct StepResult {
  double loss;
  std::vector<std::pair<std::string, ir::Literal>> grads, params;
};

// One step (forward, loss, backward, clipping, AdamW) of a small GPT-2 on `backend`.
StepResult OneStep(const std::string& backend) {
  set_backend(backend);
  nn::GPT2Config c;
  c.vocab_size = 64;
  c.n_positions = 16;
  c.n_embd = 32;
  c.n_layer = 2;
  c.n_head = 4;
  nn::GPT2 model(c, /*seed=*/3);
  std::vector<Tensor> params;
  for (auto& [n, p] : model.named_parameters()) params.push_back(p);
  optim::AdamW opt(params, 1e-3, {0.9, 0.999}, 1e-8, 0.1);
  sync();
  std::vector<int32_t> x(2 * 12), y(2 * 12);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>((i * 7 + 3) % 64);
    y[i] = static_cast<int32_t>((i * 5 + 1) % 64);
  }
  Tensor loss = model.forward(from_vector<int32_t>(x, {2, 12}, DType::kI32),
                              from_vector<int32_t>(y, {2, 12}, DType::kI32));
  loss.backward();
  optim::clip_grad_norm_(params, 1.0);
  StepResult r;
  std::vector<Tensor> grads;
  for (auto& [n, p] : model.named_parameters()) grads.push_back(p.grad());
  opt.step();
  sync();
  r.loss = loss.item();
  size_t i = 0;
  for (auto& [n, p] : model.named_parameters()) {
    r.grads.emplace_back(n, grads[i++].to_literal());
    r.params.emplace_back(n, p.to_literal());
  }
  set_backend("cpu");
  return r;
}

// max |a - b| / max |b| over a tensor: 1e-5 is the acceptance bound.
double RelDiff(const ir::Literal& a, const ir::Literal& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    diff = std::max(diff, std::abs(a.GetDouble(i) - b.GetDouble(i)));
    scale = std::max(scale, std::abs(b.GetDouble(i)));
  }
  return scale == 0 ? diff : diff / scale;
}

TEST(GPT2Step, CpuExecutorMatchesTheInterpreter) {
  const StepResult cpu = OneStep("cpu");
  const StepResult ref = OneStep("interpreter");
  EXPECT_NEAR(cpu.loss, ref.loss, 1e-5 * std::abs(ref.loss));
  EXPECT_NEAR(ref.loss, std::log(64.0), 0.2);  // an untrained model is near uniform
  ASSERT_EQ(cpu.params.size(), ref.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    EXPECT_LE(RelDiff(cpu.grads[i].second, ref.grads[i].second), 1e-5) << cpu.grads[i].first;
    EXPECT_LE(RelDiff(cpu.params[i].second, ref.params[i].second), 1e-5) << cpu.params[i].first;
  }
}

}  // namespace
}  // namespace axle
