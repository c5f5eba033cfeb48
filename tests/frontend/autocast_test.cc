// axle::autocast (include/axle/autocast.h): which ops cast to what, overrides and f32 regions,
// f32 gradients for f32 parameters, bad input, and the recompilation report of a precision change.
#include "axle/autocast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/tensor.h"
#include "core/flags.h"

namespace axle {
namespace {

using ::testing::HasSubstr;

Tensor Rand(Dims shape, uint64_t seed, DType t = DType::kF32) { return randn(std::move(shape), seed, t); }

TEST(AutocastTest, ProductsInBf16ReductionsNormsAndLossesInF32) {
  const Tensor a = Rand({4, 8}, 1), b = Rand({8, 5}, 2);
  EXPECT_EQ(matmul(a, b).dtype(), DType::kF32);  // no scope
  EXPECT_FALSE(autocast_enabled());
  {
    autocast ac(kBFloat16);
    EXPECT_TRUE(autocast_enabled());
    EXPECT_EQ(autocast_dtype(), kBFloat16);
    const Tensor p = matmul(a, b);
    EXPECT_EQ(p.dtype(), DType::kBF16);
    EXPECT_EQ(einsum("ij,jk->ik", {a, b}).dtype(), DType::kBF16);
    EXPECT_EQ(softmax(p, -1).dtype(), DType::kF32);
    EXPECT_EQ(log_softmax(p, -1).dtype(), DType::kF32);
    EXPECT_EQ(p.sum().dtype(), DType::kF32);
    EXPECT_EQ(p.mean({1}).dtype(), DType::kF32);
    EXPECT_EQ(p.var({1}).dtype(), DType::kF32);
    EXPECT_EQ(layer_norm(p, {5}).dtype(), DType::kF32);
    EXPECT_EQ(rms_norm(p, {5}).dtype(), DType::kF32);
    EXPECT_EQ((p * 2.0).dtype(), DType::kBF16);  // not listed: the input's dtype
    EXPECT_EQ((p + a.sum({1}, true)).dtype(), DType::kF32);  // bf16 + f32 promotes
    const Tensor t = from_vector<int32_t>({0, 1, 2, 3}, {4}, DType::kI32);
    EXPECT_EQ(cross_entropy(p, t).dtype(), DType::kF32);
    const Tensor q = Rand({2, 6, 8}, 3);
    EXPECT_EQ(scaled_dot_product_attention(q, q, q, true).dtype(), DType::kBF16);
    // f64 is left alone, as in PyTorch.
    EXPECT_EQ(matmul(a.to(DType::kF64), b.to(DType::kF64)).dtype(), DType::kF64);
  }
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(matmul(a, b).dtype(), DType::kF32);
}

TEST(AutocastTest, LinearCastsInputWeightAndBias) {
  nn::Linear lin(8, 3, /*bias=*/true, 4);
  const Tensor x = Rand({5, 8}, 5);
  autocast ac(kBFloat16);
  EXPECT_EQ(lin(x).dtype(), DType::kBF16);
  EXPECT_EQ(lin.weight.dtype(), DType::kF32);  // the parameters stay f32
}

TEST(AutocastTest, OverridesAndF32Regions) {
  const Tensor a = Rand({4, 8}, 1), b = Rand({8, 5}, 2);
  autocast ac(kBFloat16);
  ac.set_policy("matmul", CastPolicy::kFloat32).set_policy("softmax", CastPolicy::kLowerPrecision);
  EXPECT_EQ(autocast_policy("matmul"), CastPolicy::kFloat32);
  EXPECT_EQ(matmul(a.to(DType::kBF16), b).dtype(), DType::kF32);
  EXPECT_EQ(softmax(a, -1).dtype(), DType::kBF16);
  {
    autocast inner(kFloat16);  // an inner scope inherits the outer overrides, with its own dtype
    EXPECT_EQ(softmax(a, -1).dtype(), DType::kF16);
    EXPECT_EQ(einsum("ij,jk->ik", {a, b}).dtype(), DType::kF16);
  }
  {
    autocast off(kFloat32, /*enabled=*/false);
    EXPECT_FALSE(autocast_enabled());
    EXPECT_EQ(autocast_policy("matmul"), CastPolicy::kNone);
    EXPECT_EQ(einsum("ij,jk->ik", {a, b}).dtype(), DType::kF32);
  }
  EXPECT_EQ(einsum("ij,jk->ik", {a, b}).dtype(), DType::kBF16);
  // A composite op casts by its own policy, then nothing inside it casts again (Note [Composite
  // ops under autocast]): layer_norm set to bf16 stays bf16 through its means.
  ac.set_policy("layer_norm", CastPolicy::kLowerPrecision);
  EXPECT_EQ(layer_norm(a, {8}).dtype(), DType::kBF16);
}

TEST(AutocastTest, BadInputIsAClearError) {
  try {
    autocast ac(DType::kI32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("kBFloat16"));
  }
  autocast ac(kBFloat16);
  try {
    ac.set_policy("conv2d", CastPolicy::kFloat32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'conv2d' is not an op autocast knows"));
    EXPECT_THAT(e.what(), HasSubstr("matmul"));
  }
  EXPECT_EQ(autocast_ops(CastPolicy::kLowerPrecision), (std::vector<std::string>{"matmul", "einsum", "linear", "attention"}));
}

// The casts are IR converts: an f32 parameter used under autocast gets an f32 gradient, close to
// the f32 one (bf16 products: a relative error of a few 2^-8).
TEST(AutocastTest, F32ParametersGetF32Gradients) {
  const Tensor x = Rand({16, 32}, 7);
  auto grad_of = [&](bool mixed) {
    nn::Linear lin(32, 8, true, 9);
    std::optional<autocast> ac;
    if (mixed) ac.emplace(kBFloat16);
    Tensor loss = softmax(lin(x), -1).square().sum();
    ac.reset();
    EXPECT_EQ(loss.dtype(), DType::kF32);
    loss.backward();
    EXPECT_EQ(lin.weight.grad().dtype(), DType::kF32);
    return lin.weight.grad().to_vector<float>();
  };
  const std::vector<float> full = grad_of(false), mixed = grad_of(true);
  ASSERT_EQ(full.size(), mixed.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    num += (full[i] - mixed[i]) * (full[i] - mixed[i]);
    den += full[i] * full[i];
  }
  EXPECT_GT(num, 0.0);  // the products did run in bf16
  EXPECT_LT(std::sqrt(num / den), 0.03);
}

// Note [Precision in recompilation reports]: the same step with and without autocast compiles
// twice; the second report says the precision changed.
TEST(AutocastTest, TheRecompilationReportNamesAPrecisionChange) {
  nn::Linear lin(16, 4, true, 11);
  const Tensor x = Rand({8, 16}, 12);
  auto step = [&](bool mixed) {
    std::optional<autocast> ac;
    if (mixed) ac.emplace(kBFloat16);
    Tensor y = lin(x).to(DType::kF32).sum();
    ac.reset();
    sync();
    return y.item();
  };
  step(false);
  flags::set_debug(true);
  ::testing::internal::CaptureStderr();
  step(true);
  const std::string err = ::testing::internal::GetCapturedStderr();
  flags::set_debug(false);
  EXPECT_THAT(err, HasSubstr("The precision changed: this graph was traced under autocast(bf16), that one in full "
                             "precision"));
}

}  // namespace
}  // namespace axle
