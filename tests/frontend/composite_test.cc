// Composite ops: each matches its definition computed on the host in double, and every
// differentiable op (composite or not) passes a finite-difference gradient check in f64 on the
// reference interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "axle/tensor.h"

namespace axle {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<double> Vals(const Tensor& t) { return t.to(DType::kF64).to_vector<double>(); }

ir::Literal RandomF64(Dims shape, uint64_t seed, double scale = 1.0) {
  set_backend("interpreter");
  return (randn(shape, seed, DType::kF64) * scale).to_literal();
}

// d/dx of sum(f(x) * r) by reverse mode vs central differences, for every element of every input.
void CheckGradient(const std::string& name, const Fn& f, const std::vector<ir::Literal>& inputs,
                   double tol = 1e-6) {
  SCOPED_TRACE(name);
  set_backend("interpreter");
  std::vector<Tensor> leaves;
  for (const auto& in : inputs) leaves.push_back(from_literal(in).requires_grad_());
  Tensor out = f(leaves);
  Tensor r = randn(out.sizes(), 99, DType::kF64);
  (out * r).sum().backward();
  std::vector<std::vector<double>> analytic;
  for (const Tensor& l : leaves) analytic.push_back(Vals(l.grad()));
  sync();
  const ir::Literal r_lit = r.to_literal();
  auto loss_at = [&](const std::vector<ir::Literal>& xs) {
    NoGradGuard no_grad;
    std::vector<Tensor> ts;
    for (const auto& x : xs) ts.push_back(from_literal(x));
    return (f(ts) * from_literal(r_lit)).sum().item();
  };
  const double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int64_t j = 0; j < inputs[i].NumElements(); ++j) {
      std::vector<ir::Literal> plus = inputs, minus = inputs;
      plus[i].SetDouble(j, inputs[i].GetDouble(j) + h);
      minus[i].SetDouble(j, inputs[i].GetDouble(j) - h);
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * h);
      const double a = analytic[i][static_cast<size_t>(j)];
      EXPECT_NEAR(a, numeric, tol * std::max(1.0, std::abs(numeric)))
          << "input " << i << " element " << j;
    }
  }
  set_backend("cpu");
}

TEST(CompositeGradient, EveryDifferentiableOpMatchesFiniteDifferences) {
  const auto x34 = RandomF64({3, 4}, 1), w4 = RandomF64({4}, 2), b4 = RandomF64({4}, 3);
  CheckGradient("softmax", [](auto& a) { return softmax(a[0], 1); }, {x34});
  CheckGradient("log_softmax", [](auto& a) { return log_softmax(a[0], 0); }, {x34});
  CheckGradient("layer_norm", [](auto& a) { return layer_norm(a[0], {4}, a[1], a[2], 1e-5); },
                {x34, w4, b4});
  CheckGradient("rms_norm", [](auto& a) { return rms_norm(a[0], {4}, a[1], 1e-6); }, {x34, w4});
  CheckGradient("gelu", [](auto& a) { return gelu(a[0]); }, {x34});
  CheckGradient("gelu_tanh", [](auto& a) { return gelu(a[0], "tanh"); }, {x34});
  CheckGradient("silu", [](auto& a) { return silu(a[0]); }, {x34});
  CheckGradient("cross_entropy", [](auto& a) {
    Tensor t = from_vector<int64_t>({1, -100, 3}, {3}, DType::kI64);
    return cross_entropy(a[0], t);
  }, {x34});
  const auto q = RandomF64({2, 3, 4}, 4), k = RandomF64({2, 3, 4}, 5), v = RandomF64({2, 3, 4}, 6);
  CheckGradient("sdpa_causal", [](auto& a) {
    return scaled_dot_product_attention(a[0], a[1], a[2], true);
  }, {q, k, v});
  const auto table = RandomF64({5, 3}, 7);
  CheckGradient("embedding", [](auto& a) {
    Tensor idx = from_vector<int32_t>({4, 0, 4, 2}, {2, 2}, DType::kI32);
    return embedding(idx, a[0]);
  }, {table});
  const auto m43 = RandomF64({4, 3}, 8);
  CheckGradient("matmul", [](auto& a) { return a[0].matmul(a[1]); }, {x34, m43});
  CheckGradient("einsum", [](auto& a) { return einsum("ij,jk->ki", {a[0], a[1]}); }, {x34, m43});
  CheckGradient("movement", [](auto& a) {
    Tensor t = a[0].t().reshape({2, 6}).slice(1, 1, 5).unsqueeze(0).expand({2, 2, 4});
    auto parts = t.chunk(2, 2);
    return cat({parts[1], parts[0] * 2.0}, 1).permute({2, 0, 1});
  }, {x34});
  CheckGradient("reductions", [](auto& a) {
    return cat({a[0].var({1}, true), a[0].amax({1}, true), a[0].mean({0}, true).t().slice(0, 0, 3)}, 1);
  }, {x34});
  CheckGradient("masking", [](auto& a) {
    return where(a[0] > 0.0, a[0].tanh(), a[0].exp()).tril().masked_fill(a[1].unsqueeze(0) > 0.5, 3);
  }, {x34, w4});
  CheckGradient("gather", [](auto& a) {
    Tensor idx = from_vector<int64_t>({3, 0, 1, 1, 2, 2}, {3, 2}, DType::kI64);
    return a[0].gather(1, idx).pow(3.0);
  }, {x34});
}

// The checker itself fails on a wrong gradient: detach() hides half of d(x*x)/dx.
TEST(CompositeGradient, TheCheckerCatchesAWrongGradient) {
  const auto x = RandomF64({1}, 12);
  EXPECT_NONFATAL_FAILURE(
      CheckGradient("wrong", [](auto& a) { return a[0].detach() * a[0]; }, {x}), "numeric");
}

TEST(CompositeDefinition, SoftmaxLayerNormGeluCrossEntropyMatchTheirFormulas) {
  set_backend("interpreter");
  const ir::Literal lit = RandomF64({3, 4}, 11, 2.0);
  Tensor x = from_literal(lit);
  auto at = [&](int64_t i, int64_t j) { return lit.GetDouble(i * 4 + j); };
  std::vector<double> sm = Vals(softmax(x, 1)), ln = Vals(layer_norm(x, {4}, Tensor(), Tensor(), 1e-5));
  std::vector<double> ge = Vals(gelu(x)), gt = Vals(gelu(x, "tanh"));
  for (int64_t i = 0; i < 3; ++i) {
    double mx = -1e300, z = 0, mean = 0, var = 0;
    for (int64_t j = 0; j < 4; ++j) mx = std::max(mx, at(i, j));
    for (int64_t j = 0; j < 4; ++j) z += std::exp(at(i, j) - mx);
    for (int64_t j = 0; j < 4; ++j) mean += at(i, j) / 4;
    for (int64_t j = 0; j < 4; ++j) var += (at(i, j) - mean) * (at(i, j) - mean) / 4;
    for (int64_t j = 0; j < 4; ++j) {
      const size_t f = static_cast<size_t>(i * 4 + j);
      const double v = at(i, j);
      EXPECT_NEAR(sm[f], std::exp(v - mx) / z, 1e-12);
      EXPECT_NEAR(ln[f], (v - mean) / std::sqrt(var + 1e-5), 1e-12);
      EXPECT_NEAR(ge[f], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-12);
      EXPECT_NEAR(gt[f], 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))),
                  1e-12);
    }
  }
  // log_softmax, rms_norm, silu.
  std::vector<double> ls = Vals(log_softmax(x, 0)), rn = Vals(rms_norm(x, {4}, Tensor(), 1e-6));
  std::vector<double> si = Vals(silu(x));
  for (int64_t j = 0; j < 4; ++j) {
    double mx = -1e300, z = 0;
    for (int64_t i = 0; i < 3; ++i) mx = std::max(mx, at(i, j));
    for (int64_t i = 0; i < 3; ++i) z += std::exp(at(i, j) - mx);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(ls[static_cast<size_t>(i * 4 + j)], at(i, j) - mx - std::log(z), 1e-12);
  }
  for (int64_t i = 0; i < 3; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < 4; ++j) ms += at(i, j) * at(i, j) / 4;
    for (int64_t j = 0; j < 4; ++j) {
      const size_t f = static_cast<size_t>(i * 4 + j);
      EXPECT_NEAR(rn[f], at(i, j) / std::sqrt(ms + 1e-6), 1e-12);
      EXPECT_NEAR(si[f], at(i, j) / (1 + std::exp(-at(i, j))), 1e-12);
    }
  }
  // Causal attention of one head: row t attends to keys 0..t.
  const ir::Literal qkv = RandomF64({3, 3, 2}, 13);  // q, k, v stacked: [3][T=3][D=2]
  Tensor all = from_literal(qkv);
  std::vector<double> att = Vals(scaled_dot_product_attention(all.select(0, 0), all.select(0, 1),
                                                              all.select(0, 2), true));
  auto e = [&](int64_t w, int64_t t, int64_t d) { return qkv.GetDouble((w * 3 + t) * 2 + d); };
  for (int64_t t = 0; t < 3; ++t) {
    std::vector<double> s(static_cast<size_t>(t + 1));
    double mx = -1e300, z = 0;
    for (int64_t u = 0; u <= t; ++u) {
      s[static_cast<size_t>(u)] = (e(0, t, 0) * e(1, u, 0) + e(0, t, 1) * e(1, u, 1)) / std::sqrt(2.0);
      mx = std::max(mx, s[static_cast<size_t>(u)]);
    }
    for (double& v : s) z += (v = std::exp(v - mx));
    for (int64_t d = 0; d < 2; ++d) {
      double o = 0;
      for (int64_t u = 0; u <= t; ++u) o += s[static_cast<size_t>(u)] / z * e(2, u, d);
      EXPECT_NEAR(att[static_cast<size_t>(t * 2 + d)], o, 1e-12);
    }
  }
  // Embedding: rows of the table.
  Tensor idx = from_vector<int32_t>({2, 0, 2}, {3}, DType::kI32);
  std::vector<double> em = Vals(embedding(idx, x));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(em[static_cast<size_t>(r * 4 + j)], at(r == 1 ? 0 : 2, j));
  // Cross-entropy with an ignored target: the mean over the other rows.
  Tensor t = from_vector<int64_t>({2, 7, 0}, {3}, DType::kI64);
  double expect = 0;
  for (int64_t i : {0, 2}) {
    const int64_t target = i == 0 ? 2 : 0;
    double mx = -1e300, z = 0;
    for (int64_t j = 0; j < 4; ++j) mx = std::max(mx, at(i, j));
    for (int64_t j = 0; j < 4; ++j) z += std::exp(at(i, j) - mx);
    expect += -(at(i, target) - mx - std::log(z)) / 2;
  }
  EXPECT_NEAR(cross_entropy(x, t, 7).item(), expect, 1e-12);
  set_backend("cpu");
}

TEST(CompositeDefinition, DropoutKeepsExpectationAndIsIdentityInEval) {
  manual_seed(5);
  Tensor x = ones({20000});
  std::vector<float> y = dropout(x, 0.25).to_vector<float>();
  int64_t zeros = 0;
  for (float v : y) {
    if (v == 0) ++zeros;
    else EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
  }
  EXPECT_NEAR(zeros / 20000.0, 0.25, 0.02);
  // The next call draws a different mask; eval mode is the identity.
  EXPECT_NE(dropout(x, 0.25).to_vector<float>(), y);
  EXPECT_EQ(dropout(x, 0.25, false).to_vector<float>(), std::vector<float>(20000, 1.0f));
  manual_seed(5);
  EXPECT_EQ(dropout(x, 0.25).to_vector<float>(), y);
}

TEST(CompositeErrors, BadArgumentsAreClearErrors) {
  Tensor x = zeros({2, 3});
  EXPECT_THROW(layer_norm(x, {4}), Error);
  EXPECT_THROW(cross_entropy(x, zeros({2})), Error);  // float targets
  EXPECT_THROW(cross_entropy(x, zeros({3}, DType::kI64)), Error);
  EXPECT_THROW(gelu(x, "fast"), Error);
  EXPECT_THROW(dropout(x, 1.5), Error);
  EXPECT_THROW(embedding(x, zeros({4, 2})), Error);
  EXPECT_THROW(einsum("ij,jk", {x, x}), Error);
  EXPECT_THROW(softmax(zeros({2}, DType::kI32), 0), Error);
}

}  // namespace
}  // namespace axle
