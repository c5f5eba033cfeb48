// Lazy tensors: values, broadcasting, laziness, the executable cache, donation and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "axle/metrics.h"
#include "axle/tensor.h"
#include "core/flags.h"
#include "runtime/thread_pool.h"

namespace axle {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor F32(std::vector<float> v, Dims shape) { return from_vector<float>(v, shape, DType::kF32); }

class TensorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { set_backend(GetParam()); }
  void TearDown() override { set_backend("cpu"); }
};

TEST_P(TensorTest, ArithmeticBroadcastsAndStaysLazyUntilRead) {
  const int64_t syncs = metrics().syncs;
  Tensor a = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = F32({10, 20, 30}, {3});
  Tensor c = (a + b) * 2.0 - 1.0;
  EXPECT_EQ(c.sizes(), (Dims{2, 3}));
  EXPECT_EQ(metrics().syncs, syncs);  // nothing ran yet
  EXPECT_THAT(c.to_vector<float>(), ElementsAre(21, 43, 65, 27, 49, 71));
  EXPECT_EQ(metrics().syncs, syncs + 1);
  EXPECT_THAT((a / b.unsqueeze(0)).sum({1}).to_vector<float>(),
              ElementsAre(::testing::FloatNear(0.3f, 1e-6f), ::testing::FloatNear(0.85f, 1e-6f)));
}

TEST_P(TensorTest, ReductionsMovementAndIndexing) {
  Tensor a = F32({1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_THAT(a.amax({1}).to_vector<float>(), ElementsAre(5, 6));
  EXPECT_THAT(a.mean({0}, true).sizes(), ElementsAre(1, 3));
  EXPECT_THAT(a.argmax(1).to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_THAT(a.t().to_vector<float>(), ElementsAre(1, 4, 5, 2, 3, 6));
  EXPECT_THAT(a.slice(1, 1).to_vector<float>(), ElementsAre(5, 3, 2, 6));
  EXPECT_THAT(a.slice(1, 0, std::nullopt, 2).to_vector<float>(), ElementsAre(1, 3, 4, 6));
  EXPECT_THAT(a.select(0, -1).to_vector<float>(), ElementsAre(4, 2, 6));
  EXPECT_THAT(cat({a, a}, 0).sizes(), ElementsAre(4, 3));
  EXPECT_THAT(stack({a, a}, 1).sizes(), ElementsAre(2, 2, 3));
  auto parts = a.split(2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_THAT(parts[1].to_vector<float>(), ElementsAre(3, 6));
  EXPECT_THAT(a.chunk(3, 1)[2].to_vector<float>(), ElementsAre(3, 6));
  Tensor idx = from_vector<int64_t>({2, 0}, {2}, DType::kI64);
  EXPECT_THAT(a.index_select(1, idx).to_vector<float>(), ElementsAre(3, 1, 6, 4));
  Tensor gi = from_vector<int64_t>({1, 1, 2, 0}, {2, 2}, DType::kI64);
  EXPECT_THAT(a.gather(1, gi).to_vector<float>(), ElementsAre(5, 5, 6, 4));
  EXPECT_THAT(ones({3, 3}).tril().to_vector<float>(), ElementsAre(1, 0, 0, 1, 1, 0, 1, 1, 1));
  EXPECT_THAT(ones({2, 2}).triu(1).to_vector<float>(), ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(a.masked_fill(a > 3.0, 0).to_vector<float>(), ElementsAre(1, 0, 3, 0, 2, 0));
  EXPECT_THAT(where(a > 3.0, a, -1.0).to_vector<float>(), ElementsAre(-1, 5, -1, 4, -1, 6));
  EXPECT_THAT(a.expand({2, 2, 3}).sum({0}).to_vector<float>(), ElementsAre(2, 10, 6, 8, 4, 12));
  EXPECT_THAT(arange(5).to_vector<int64_t>(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(arange(1, 2, 0.25, DType::kF32).to_vector<float>(), ElementsAre(1, 1.25, 1.5, 1.75));
  EXPECT_THAT(a.reshape({3, -1}).sizes(), ElementsAre(3, 2));
  EXPECT_THAT(a.flatten().sizes(), ElementsAre(6));
  EXPECT_DOUBLE_EQ(a.sum().item(), 21);
}

TEST_P(TensorTest, MatmulAndEinsum) {
  Tensor a = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = F32({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_THAT(a.matmul(b).to_vector<float>(), ElementsAre(4, 5, 10, 11));
  EXPECT_THAT(einsum("ij,jk->ik", {a, b}).to_vector<float>(), ElementsAre(4, 5, 10, 11));
  EXPECT_THAT(einsum("ij,jk->ki", {a, b}).to_vector<float>(), ElementsAre(4, 10, 5, 11));
  EXPECT_THAT(einsum("ij->j", {a}).to_vector<float>(), ElementsAre(5, 7, 9));
  Tensor batched = a.unsqueeze(0).expand({4, 2, 3});
  EXPECT_THAT(batched.matmul(b).sizes(), ElementsAre(4, 2, 2));
  EXPECT_THAT(batched.matmul(b.unsqueeze(0).expand({4, 3, 2})).select(0, 3).to_vector<float>(),
              ElementsAre(4, 5, 10, 11));
  Tensor v = F32({1, 1, 1}, {3});
  EXPECT_THAT(a.matmul(v).to_vector<float>(), ElementsAre(6, 15));
  EXPECT_THAT(einsum("bij,bjk->bik", {batched, b.unsqueeze(0).expand({4, 3, 2})}).sizes(),
              ElementsAre(4, 2, 2));
}

TEST_P(TensorTest, RandomIsDeterministicAndShaped) {
  std::vector<float> a = rand({1000}, 7).to_vector<float>();
  std::vector<float> b = rand({1000}, 7).to_vector<float>();
  EXPECT_EQ(a, b);
  double mean = 0;
  for (float x : a) {
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 1.0f);
    mean += x / 1000;
  }
  EXPECT_NEAR(mean, 0.5, 0.05);
  std::vector<float> n = randn({4000}, 3).to_vector<float>();
  double m = 0, v = 0;
  for (float x : n) m += x / 4000.0;
  for (float x : n) v += (x - m) * (x - m) / 4000.0;
  EXPECT_NEAR(m, 0, 0.06);
  EXPECT_NEAR(v, 1, 0.08);
  EXPECT_NE(rand({4}, 1).to_vector<float>(), rand({4}, 2).to_vector<float>());
}

TEST_P(TensorTest, SameStepHitsTheCache) {
  Tensor w = F32({1, 2, 3, 4}, {2, 2});
  auto step = [&](float s) {
    Tensor x = F32({s, s, s, s}, {2, 2});
    Tensor y = (x.matmul(w) + 1.0).tanh().sum();
    sync();
    return y.item();
  };
  step(1);
  const Metrics before = metrics();
  const double v2 = step(2);
  const Metrics after = metrics();
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_NEAR(v2, std::tanh(7) * 2 + std::tanh(13) * 2, 1e-5);
}

// Note [Competing threads] (runtime/thread_pool.h): the executor counts the host as competing
// while a step runs, except while the host blocks on a result; every count is undone, so once
// the steps are read the pool splits calls again (a leak would leave every later kernel inline).
TEST_P(TensorTest, StepsLeaveThePoolUncrowded) {
  Tensor w = F32({1, 2, 3, 4}, {2, 2});
  for (int i = 0; i < 20; ++i) {
    Tensor y = (F32({1, 1, 1, 1}, {2, 2}).matmul(w) * static_cast<double>(i)).sum();
    sync();
    if (i % 2) y.item();  // blocks (or not, when the step is done already)
  }
  wait();
  EXPECT_FALSE(runtime::ThreadPool::Global().Crowded());
}

// Note [Trace keys] (lazy.cc): the in-memory cache is looked up by an order-dependent key of the
// trace before any module is built. Steps that differ only in a constant, in which input feeds
// which operand, or in a shape must not share an executable; the same step traced in another order
// is a new key but the same canonical module, so it must not compile again.
TEST_P(TensorTest, TraceKeysNeverConflateDifferentSteps) {
  Tensor a = F32({1, 2, 3, 4}, {2, 2});
  Tensor b = F32({10, 20, 30, 40}, {2, 2});
  sync();
  auto run = [](const Tensor& y) {
    sync();
    return y.to_vector<float>();
  };
  EXPECT_THAT(run((a - b) * 2.0), ElementsAre(-18, -36, -54, -72));
  EXPECT_THAT(run((a - b) * 3.0), ElementsAre(-27, -54, -81, -108));  // another constant
  EXPECT_THAT(run((b - a) * 3.0), ElementsAre(27, 54, 81, 108));      // operands swapped
  Tensor c = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor d = F32({1, 1, 1, 1, 1, 1}, {2, 3});
  EXPECT_THAT(run((c - d) * 3.0), ElementsAre(0, 3, 6, 9, 12, 15));   // another shape
  // The same computation, its independent nodes traced in the other order (with the same first
  // use of each input, which numbers the parameters): a new trace key, the same module.
  Tensor e0, f0;
  {
    Tensor e = a * 2.0;
    Tensor f = a + 1.0;
    e0 = e + f;
  }
  EXPECT_THAT(run(e0), ElementsAre(4, 7, 10, 13));
  const Metrics before = metrics();
  {
    Tensor f = a + 1.0;
    Tensor e = a * 2.0;
    f0 = e + f;
  }
  EXPECT_THAT(run(f0), ElementsAre(4, 7, 10, 13));
  EXPECT_EQ(metrics().compiles + metrics().disk_hits, before.compiles + before.disk_hits);
  EXPECT_EQ(metrics().cache_hits, before.cache_hits + 1);
}

TEST_P(TensorTest, InPlaceUpdatesDonateTheOldBuffer) {
  Tensor p = F32({1, 2, 3}, {3});
  sync();
  const int64_t donated = metrics().donated;
  for (int i = 0; i < 3; ++i) {
    NoGradGuard g;
    p.mul_(2.0);
    sync();
  }
  EXPECT_THAT(p.to_vector<float>(), ElementsAre(8, 16, 24));
  EXPECT_EQ(metrics().donated, donated + 3);
  Tensor q = p;  // a second handle shares the storage and sees the update
  p.add_(F32({1, 1, 1}, {3}));
  EXPECT_THAT(q.to_vector<float>(), ElementsAre(9, 17, 25));
}

TEST_P(TensorTest, BackwardMatchesAnalyticGradients) {
  Tensor x = F32({0.5f, -1, 2}, {3}).requires_grad_();
  Tensor w = F32({1, 2, 3}, {3}).requires_grad_();
  Tensor y = (x * w).sum() + (x * x).sum();
  y.backward();
  EXPECT_THAT(x.grad().to_vector<float>(), ElementsAre(2, 0, 7));  // w + 2x
  EXPECT_THAT(w.grad().to_vector<float>(), ElementsAre(0.5f, -1, 2));
  // Gradients accumulate across backward() calls, as in PyTorch.
  Tensor z = (x * 3.0).sum();
  z.backward();
  EXPECT_THAT(x.grad().to_vector<float>(), ElementsAre(5, 3, 10));
  // detach() and NoGradGuard cut the gradient.
  x.set_grad(Tensor());
  Tensor u = (x.detach() * x).sum();
  u.backward();
  EXPECT_THAT(x.grad().to_vector<float>(), ElementsAre(0.5f, -1, 2));
}

TEST_P(TensorTest, ErrorsNameTheOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  try {
    (void)(a + b);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("f32[2,3]"));
    EXPECT_THAT(e.what(), HasSubstr("f32[4]"));
  }
  EXPECT_THROW(a.matmul(zeros({2, 2})), Error);
  EXPECT_THROW(a.reshape({4, 2}), Error);
  EXPECT_THROW(a.sum({2}), Error);
  EXPECT_THROW(a.item(), Error);
  EXPECT_THROW(Tensor().exp(), Error);
  EXPECT_THROW(set_backend("tpu"), Error);
  Tensor s = a.sum();
  EXPECT_THROW(s.backward(), Error);  // does not require grad
  Tensor x = ones({2}).requires_grad_();
  Tensor l = (x * 2.0).sum();
  sync();
  try {
    l.backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("before sync()"));
  }
}

TEST_P(TensorTest, DebugExplainsARecompile) {
  flags::set_debug(true);
  auto step = [](int64_t batch) {
    Tensor x = from_vector<float>(std::vector<float>(static_cast<size_t>(batch * 3), 1.0f),
                                  {batch, 3}, DType::kF32);
    Tensor y = (x * 2.0).sum({1});
    sync();
    y.to_vector<float>();
  };
  step(5);
  ::testing::internal::CaptureStderr();
  step(7);
  const std::string err = ::testing::internal::GetCapturedStderr();
  flags::set_debug(false);
  EXPECT_THAT(err, HasSubstr("Input 0 is f32[7,3] here but was f32[5,3] there"));
  EXPECT_THAT(err, HasSubstr("tensor_test.cc"));
}

INSTANTIATE_TEST_SUITE_P(Backends, TensorTest, ::testing::Values("interpreter", "cpu"));

}  // namespace
}  // namespace axle
