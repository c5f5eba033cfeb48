// A GPT-2 training step on the CPU executor against the reference interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include <cmath>

#include "axle/metrics.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/tensor.h"
#include "core/flags.h"

namespace axle {
namespace {

constexpr double kAdamEps = 1e-8;  // AdamW's eps in OneStep (Note [Gradients that are zero in exact arithmetic])

struct StepResult {
  double loss, next_loss;
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
  optim::AdamW opt(params, 1e-3, {0.9, 0.999}, kAdamEps, 0.1);
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
  {
    NoGradGuard no_grad;
    r.next_loss = model.forward(from_vector<int32_t>(x, {2, 12}, DType::kI32),
                                from_vector<int32_t>(y, {2, 12}, DType::kI32))
                      .item();
  }
  set_backend("cpu");
  return r;
}

// max |a - b| / max |b| over a tensor (1e-5 is the acceptance bound), over the elements where
// `mask` is true (all when it is null).
double RelDiff(const ir::Literal& a, const ir::Literal& b, const std::vector<bool>* mask = nullptr) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    scale = std::max(scale, std::abs(b.GetDouble(i)));
    if (mask == nullptr || (*mask)[static_cast<size_t>(i)])
      diff = std::max(diff, std::abs(a.GetDouble(i) - b.GetDouble(i)));
  }
  return scale == 0 ? diff : diff / scale;
}

// Note [Gradients that are zero in exact arithmetic]
// AdamW's first update is lr * g / (|g| + eps): it keeps only the sign of g. Where g is zero in
// exact arithmetic, both backends compute rounding noise (~1e-9) and AdamW turns the noise into
// a full +-lr step of either sign. GPT-2 has such a direction: the key bias of c_attn adds the
// same q.b to every logit of a softmax row, which the softmax cancels, so its gradient is
// exactly zero. The updated parameters are therefore compared where |g| is above 1e-4 of the
// tensor's largest gradient; the loss after the update, which those directions cannot change,
// is compared everywhere.
// Near eps the same holds in part: d/dg of g / (|g| + eps) is eps / (|g| + eps)^2, so where |g| is
// within 100x of eps the update keeps a share of g's rounding. On a Zen 4 host with OpenBLAS's
// AVX-512 kernels (the sanitizer build, whose products all go to OpenBLAS) h.1.ln_2.bias[20] had
// g = -4.1784e-7 against the interpreter's -4.1765e-7 (a sum that nearly cancels: 2.5e-7 of the
// tensor's largest gradient apart, well inside the gradients' bound) and its update differed by
// 1.02e-5 of the tensor's scale. So the updated parameters are compared where |g| is also above
// 100 eps.
std::vector<bool> Significant(const ir::Literal& g) {
  double mx = 0;
  for (int64_t i = 0; i < g.NumElements(); ++i) mx = std::max(mx, std::abs(g.GetDouble(i)));
  std::vector<bool> m(static_cast<size_t>(g.NumElements()));
  for (int64_t i = 0; i < g.NumElements(); ++i)
    m[static_cast<size_t>(i)] = std::abs(g.GetDouble(i)) > std::max(1e-4 * mx, 100 * kAdamEps);
  return m;
}

TEST(GPT2Step, CpuExecutorMatchesTheInterpreter) {
  const StepResult cpu = OneStep("cpu");
  const StepResult ref = OneStep("interpreter");
  EXPECT_NEAR(cpu.loss, ref.loss, 1e-5 * std::abs(ref.loss));
  EXPECT_NEAR(ref.loss, std::log(64.0), 0.2);  // an untrained model is near uniform
  EXPECT_NEAR(cpu.next_loss, ref.next_loss, 1e-5 * std::abs(ref.next_loss));
  EXPECT_LT(ref.next_loss, ref.loss);
  ASSERT_EQ(cpu.params.size(), ref.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    EXPECT_LE(RelDiff(cpu.grads[i].second, ref.grads[i].second), 1e-5) << cpu.grads[i].first;
    const std::vector<bool> mask = Significant(ref.grads[i].second);
    EXPECT_LE(RelDiff(cpu.params[i].second, ref.params[i].second, &mask), 1e-5)
        << cpu.params[i].first;
  }
}

// AXLE_DEBUG=1: a changed batch size forces a recompile, explained in one paragraph that names
// the changed input, where it came from, and the module whose nodes differ.
TEST(GPT2Step, DebugExplainsABatchSizeRecompile) {
  nn::GPT2Config c;
  c.vocab_size = 32;
  c.n_positions = 8;
  c.n_embd = 16;
  c.n_layer = 1;
  c.n_head = 2;
  nn::GPT2 model(c, 5);
  optim::AdamW opt(model.parameters(), 1e-3);
  auto step = [&](int64_t batch) {
    std::vector<int32_t> x(static_cast<size_t>(batch * 8), 1);
    opt.zero_grad();
    Tensor loss = model.forward(from_vector<int32_t>(x, {batch, 8}, DType::kI32),
                                from_vector<int32_t>(x, {batch, 8}, DType::kI32));
    loss.backward();
    opt.step();
    sync();
    return loss.item();
  };
  step(2);
  step(2);
  flags::set_debug(true);
  ::testing::internal::CaptureStderr();
  step(3);
  const std::string err = ::testing::internal::GetCapturedStderr();
  flags::set_debug(false);
  std::cout << err;
  EXPECT_THAT(err, ::testing::HasSubstr("here but was i32[2,8] there"));
  EXPECT_THAT(err, ::testing::HasSubstr("trainer_test.cc"));
  EXPECT_THAT(err, ::testing::HasSubstr("(in GPT2"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);  // one paragraph
}

}  // namespace
}  // namespace axle
