// End to end: a tiny GPT-2 trains on a fixed batch, and every training step after the first
// reuses the first step's executable (the learning rate and bias corrections are inputs).
#include "axle/metrics.h"
#include "axle/optim.h"
#include "nn_test_util.h"

namespace axle::nn {
namespace {

using testing::I64;

// Byte tokens of a repeated phrase: idx and the next-token targets, [B, T].
std::pair<Tensor, Tensor> Batch(int64_t B, int64_t T) {
  const std::string text =
      "the quick brown fox jumps over the lazy dog. the quick brown fox jumps again. ";
  std::vector<int64_t> idx, tgt;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(b * 7 + t);
      idx.push_back(static_cast<unsigned char>(text[i % text.size()]));
      tgt.push_back(static_cast<unsigned char>(text[(i + 1) % text.size()]));
    }
  }
  return {I64(idx, {B, T}), I64(tgt, {B, T})};
}

TEST(Training, TinyGPT2LearnsAndStepsHitTheCache) {
  const GPT2Config config = GPT2Config::Preset("tiny");
  GPT2 model(config, 0);
  std::vector<Tensor> decay, no_decay;
  for (const auto& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  EXPECT_EQ(decay.size(), 2u + 4u * config.n_layer);  // wte, wpe and 4 matrices per block
  optim::AdamW opt({{decay, std::nullopt}, {no_decay, 0.0}}, 3e-3, {0.9, 0.95}, 1e-8, 0.1);
  auto [idx, targets] = Batch(4, 32);
  sync();

  const int steps = 12;
  std::vector<double> losses;
  Metrics after_first;
  for (int s = 0; s < steps; ++s) {
    opt.set_lr(optim::lr_at(s, steps, 3e-3, 3, "cosine"));  // a new value every step
    opt.zero_grad();
    Tensor loss = model.forward(idx, targets);
    loss.backward();
    Tensor norm = optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sync();
    losses.push_back(loss.item());
    EXPECT_TRUE(std::isfinite(norm.item()));
    const Metrics m = metrics();
    if (s == 0) after_first = m;
    if (s == 1 || s == 2) {
      EXPECT_EQ(m.compiles, after_first.compiles) << "step " << s + 1 << " recompiled:\n"
                                                  << metrics_report();
      EXPECT_EQ(m.cache_hits, after_first.cache_hits + s) << "step " << s + 1;
    }
  }
  EXPECT_NEAR(losses[0], std::log(256.0), 0.3);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.7 * losses[0]) << "losses: " << ::testing::PrintToString(losses);
}

TEST(Training, SgdMomentumStepsHitTheCache) {
  Linear lin(4, 3, true, 9);
  optim::SGD opt(lin.parameters(), 0.1, 0.9, 0, 1e-4, /*nesterov=*/true);
  Tensor x = testing::F32({1, 2, 3, 4, -1, 0.5, 0, 2}, {2, 4});
  Tensor y = testing::F32({1, 0, -1, 0.5, 0.5, 0}, {2, 3});
  std::vector<double> losses;
  Metrics after_first;
  for (int s = 0; s < 4; ++s) {
    opt.zero_grad();
    Tensor loss = (lin(x) - y).square().mean();
    loss.backward();
    opt.step();
    sync();
    losses.push_back(loss.item());
    if (s == 0) after_first = metrics();
  }
  EXPECT_EQ(metrics().compiles, after_first.compiles) << metrics_report();
  EXPECT_EQ(metrics().cache_hits, after_first.cache_hits + 3);
  EXPECT_LT(losses.back(), losses[0]);
}

}  // namespace
}  // namespace axle::nn
