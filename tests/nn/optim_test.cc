// Optimizers against PyTorch's documented algorithms (computed here in doubles), gradient
// clipping and learning-rate schedules.
#include <cmath>

#include "axle/optim.h"
#include "nn_test_util.h"

namespace axle::optim {
namespace {

using nn::testing::ErrorOf;
using nn::testing::ExpectNear;
using nn::testing::F32;
using nn::testing::Vec;

using Vals = std::vector<double>;

Tensor Param(const std::vector<float>& v) {
  Tensor p = F32(v, {static_cast<int64_t>(v.size())}).requires_grad_();
  sync();
  return p;
}

std::vector<float> ToF32(const Vals& v) { return std::vector<float>(v.begin(), v.end()); }

// torch.optim.SGD's step for one parameter (the documented algorithm).
struct SgdRef {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  Vals buf = {};
  bool has_buf = false;
  void step(Vals& p, const Vals& g) {
    if (buf.empty()) buf.assign(p.size(), 0);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = has_buf ? momentum * buf[i] + (1 - dampening) * d : d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
    has_buf = true;
  }
};

// torch.optim.AdamW's step for one parameter.
struct AdamWRef {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  Vals m = {}, v = {}, vmax = {};
  int t = 0;
  void step(Vals& p, const Vals& g) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0), vmax.assign(p.size(), 0);
    ++t;
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * weight_decay;
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      vmax[i] = std::max(vmax[i], v[i]);
      const double denom = std::sqrt(amsgrad ? vmax[i] : v[i]) / std::sqrt(bc2) + eps;
      p[i] -= lr / bc1 * m[i] / denom;
    }
  }
};

const std::vector<Vals> kGradsA = {{0.5, -1.0, 2.0}, {0.25, 0.5, -3.0}, {-1.0, 0.1, 0.0}, {2, 2, 2}};
const std::vector<Vals> kGradsB = {{1.5, -0.5}, {-0.75, 0.0}, {0.3, 0.3}, {1, -1}};

void RunSgd(double momentum, double dampening, double weight_decay, bool nesterov) {
  SCOPED_TRACE(testing::Message() << "momentum " << momentum << " dampening " << dampening
                                  << " wd " << weight_decay << " nesterov " << nesterov);
  Vals pa = {1.0, -2.0, 0.5}, pb = {0.3, 0.7};
  Tensor a = Param(ToF32(pa)), b = Param(ToF32(pb));
  SGD opt({a, b}, 0.1, momentum, dampening, weight_decay, nesterov);
  SgdRef ra{0.1, momentum, dampening, weight_decay, nesterov}, rb = ra;
  for (size_t s = 0; s < kGradsA.size(); ++s) {
    if (s == 2) {
      opt.set_lr(0.05);
      ra.lr = rb.lr = 0.05;
    }
    a.set_grad(F32(ToF32(kGradsA[s]), {3}));
    b.set_grad(F32(ToF32(kGradsB[s]), {2}));
    opt.step();
    sync();
    ra.step(pa, kGradsA[s]);
    rb.step(pb, kGradsB[s]);
    ExpectNear(Vec(a), pa, 1e-5, 1e-6, "a step " + std::to_string(s));
    ExpectNear(Vec(b), pb, 1e-5, 1e-6, "b step " + std::to_string(s));
  }
  EXPECT_EQ(opt.param_steps(0, 0), 4);
}

TEST(SGD, MatchesTorch) {
  RunSgd(0, 0, 0, false);
  RunSgd(0, 0, 0.01, false);
  RunSgd(0.9, 0, 0, false);
  RunSgd(0.9, 0.1, 0.01, false);
  RunSgd(0.9, 0, 0, true);
  RunSgd(0.8, 0, 0.05, true);
}

TEST(SGD, WithBackward) {
  // loss = 0.5 * sum(p^2): grad = p.
  Vals pv = {1.0, -2.0};
  Tensor p = Param({1.0f, -2.0f});
  SGD opt({p}, 0.5, 0.9, 0, 0, true);
  SgdRef ref{0.5, 0.9, 0, 0, true};
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    ((p * p).sum() * 0.5).backward();
    opt.step();
    sync();
    ref.step(pv, pv);
    ExpectNear(Vec(p), pv, 1e-5, 1e-6, "step " + std::to_string(s));
  }
  ExpectNear(Vec(opt.momentum_buffer(0, 0)), ref.buf, 1e-5, 1e-6, "buffer");
}

TEST(SGD, Errors) {
  Tensor p = Param({1.0f});
  EXPECT_NE(ErrorOf([&] { SGD({p}, 0.1, 0, 0, 0, true); }).find("Nesterov"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { SGD({p}, -1); }).find("learning rate"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { SGD({p, p}, 0.1); }).find("more than once"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { SGD(std::vector<Tensor>{}, 0.1); }).find("empty"), std::string::npos);
}

void RunAdamW(bool amsgrad) {
  SCOPED_TRACE(amsgrad ? "amsgrad" : "adamw");
  Vals pa = {1.0, -2.0, 0.5}, pb = {0.3, 0.7};
  Tensor a = Param(ToF32(pa)), b = Param(ToF32(pb));
  // Group 0 takes the default weight decay (0.1 here); group 1 none.
  AdamW opt({ParamGroup{{a}, std::nullopt}, ParamGroup{{b}, 0.0}}, 0.01, {0.9, 0.95}, 1e-8, 0.1,
            amsgrad);
  AdamWRef ra{0.01, 0.9, 0.95, 1e-8, 0.1, amsgrad}, rb{0.01, 0.9, 0.95, 1e-8, 0.0, amsgrad};
  for (size_t s = 0; s < kGradsA.size(); ++s) {
    if (s == 1) {
      opt.set_lr(0.02);
      ra.lr = rb.lr = 0.02;
    }
    a.set_grad(F32(ToF32(kGradsA[s]), {3}));
    b.set_grad(F32(ToF32(kGradsB[s]), {2}));
    opt.step();
    sync();
    ra.step(pa, kGradsA[s]);
    rb.step(pb, kGradsB[s]);
    ExpectNear(Vec(a), pa, 1e-5, 1e-6, "a step " + std::to_string(s));
    ExpectNear(Vec(b), pb, 1e-5, 1e-6, "b step " + std::to_string(s));
  }
  ExpectNear(Vec(opt.exp_avg(0, 0)), ra.m, 1e-5, 1e-7, "exp_avg");
  ExpectNear(Vec(opt.exp_avg_sq(1, 0)), rb.v, 1e-5, 1e-7, "exp_avg_sq");
}

TEST(AdamW, MatchesTorch) {
  RunAdamW(false);
  RunAdamW(true);
}

TEST(AdamW, DefaultsAndSkippedParams) {
  Vals pa = {1.0, -2.0, 0.5};
  Tensor a = Param(ToF32(pa)), b = Param({4.0f, 5.0f});
  AdamW opt(std::vector<Tensor>{a, b});  // lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 1e-2
  AdamWRef ref{1e-3, 0.9, 0.999, 1e-8, 1e-2, false};
  for (int s = 0; s < 2; ++s) {
    a.set_grad(F32(ToF32(kGradsA[s]), {3}));
    opt.step();  // b has no gradient: skipped
    sync();
    ref.step(pa, kGradsA[s]);
  }
  ExpectNear(Vec(a), pa, 1e-5, 1e-7, "a");
  EXPECT_EQ(Vec(b), (std::vector<float>{4, 5}));
  EXPECT_EQ(opt.param_steps(0, 0), 2);
  EXPECT_EQ(opt.param_steps(0, 1), 0);
  // b's first update uses step 1's bias correction even though a is at step 3.
  Vals pb = {4, 5};
  AdamWRef refb{1e-3, 0.9, 0.999, 1e-8, 1e-2, false};
  a.set_grad(F32(ToF32(kGradsA[2]), {3}));
  b.set_grad(F32(ToF32(kGradsB[0]), {2}));
  opt.step();
  sync();
  ref.step(pa, kGradsA[2]);
  refb.step(pb, kGradsB[0]);
  ExpectNear(Vec(a), pa, 1e-5, 1e-7, "a step 3");
  ExpectNear(Vec(b), pb, 1e-5, 1e-7, "b step 1");
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

// Note [AdamW on half parameters]: a bf16 parameter and its moments are updated in f32 and rounded
// once, so one step from the same values gives the f32 twin's results rounded to bf16, bit for bit.
TEST(AdamW, HalfParametersUpdateInF32AndRoundOnce) {
  const auto bf16 = [](const Tensor& t) { return Vec(t.to(DType::kBF16).to(DType::kF32)); };
  Tensor twin = Param({1.0f, -2.0f, 0.5f, 3.0e-3f});
  Tensor half = Param({1.0f, -2.0f, 0.5f, 3.0e-3f});
  twin.convert_(DType::kBF16).convert_(DType::kF32);  // the twin holds bf16 values in f32
  half.convert_(DType::kBF16);
  AdamW opt_twin(std::vector<Tensor>{twin}, 1e-2, {0.9, 0.999}, 1e-8, 0.1);
  AdamW opt_half(std::vector<Tensor>{half}, 1e-2, {0.9, 0.999}, 1e-8, 0.1);
  EXPECT_EQ(opt_half.exp_avg(0, 0).dtype(), DType::kBF16);
  const Tensor g = F32({0.25f, -1e-3f, 3.0f, 7.0e-5f}, {4}).to(DType::kBF16);
  twin.set_grad(g.to(DType::kF32));
  half.set_grad(g);
  opt_twin.step();
  opt_half.step();
  sync();
  EXPECT_EQ(half.dtype(), DType::kBF16);
  EXPECT_EQ(Vec(half.to(DType::kF32)), bf16(twin));
  EXPECT_EQ(Vec(opt_half.exp_avg(0, 0).to(DType::kF32)), bf16(opt_twin.exp_avg(0, 0)));
  EXPECT_EQ(Vec(opt_half.exp_avg_sq(0, 0).to(DType::kF32)), bf16(opt_twin.exp_avg_sq(0, 0)));
  EXPECT_NE(Vec(half.to(DType::kF32)), Vec(F32({1.0f, -2.0f, 0.5f, 3.0e-3f}, {4}).to(DType::kBF16).to(DType::kF32)));
}

TEST(ClipGradNorm, ScalesToMaxNorm) {
  Tensor a = Param({0, 0}), b = Param({0}), c = Param({1});
  auto set = [&] {
    a.set_grad(F32({3, 4}, {2}));
    b.set_grad(F32({12}, {1}));
    c.set_grad(Tensor());
  };
  set();
  Tensor norm = clip_grad_norm_({a, b, c}, 6.5);
  sync();
  EXPECT_NEAR(norm.item(), 13.0, 1e-5);
  const double k = 6.5 / (13.0 + 1e-6);
  ExpectNear(Vec(a.grad()), {3 * k, 4 * k}, 1e-6, 1e-7, "a");
  ExpectNear(Vec(b.grad()), {12 * k}, 1e-6, 1e-7, "b");
  EXPECT_FALSE(c.grad().defined());

  set();
  norm = clip_grad_norm_({a, b, c}, 100.0);
  EXPECT_NEAR(norm.item(), 13.0, 1e-5);
  EXPECT_EQ(Vec(a.grad()), (std::vector<float>{3, 4}));

  set();
  norm = clip_grad_norm_({a, b}, 6.0, INFINITY);
  EXPECT_NEAR(norm.item(), 12.0, 1e-6);
  ExpectNear(Vec(b.grad()), {12 * 6.0 / (12 + 1e-6)}, 1e-6, 1e-7, "b inf");

  set();
  norm = clip_grad_norm_({a, b}, 1.0, 1.0);
  EXPECT_NEAR(norm.item(), 19.0, 1e-5);
}

TEST(Schedule, WarmupConstantCosine) {
  EXPECT_DOUBLE_EQ(lr_at(0, 100, 1.0, 10, "constant"), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(4, 100, 1.0, 10, "constant"), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(9, 100, 1.0, 10, "constant"), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(10, 100, 1.0, 10, "constant"), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(99, 100, 1.0, 10, "constant"), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(0, 110, 2.0, 10, "cosine"), 0.2);
  EXPECT_DOUBLE_EQ(lr_at(10, 110, 2.0, 10, "cosine"), 2.0);
  EXPECT_NEAR(lr_at(60, 110, 2.0, 10, "cosine"), 0.2 + 0.5 * 1.8, 1e-12);
  EXPECT_NEAR(lr_at(35, 110, 2.0, 10, "cosine"),
              0.2 + 0.5 * 1.8 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(lr_at(110, 110, 2.0, 10, "cosine"), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(lr_at(0, 10, 3.0, 0, "cosine"), 3.0);
  EXPECT_NE(ErrorOf([] { lr_at(0, 10, 1.0, 0, "linear"); }).find("cosine"), std::string::npos);
}

}  // namespace
}  // namespace axle::optim
