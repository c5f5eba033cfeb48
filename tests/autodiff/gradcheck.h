// Finite-difference gradient checks on the reference interpreter, shared by the autodiff tests.
//
//   CheckGradients("exp", {F64({2, 3})}, [](Builder& b, const Values& p) {
//     return b.Unary(OpKind::kExp, p[0]);
//   });
//
// The body's result y (any float shape) is turned into the scalar loss sum(y * w), where w is an
// extra f64 parameter holding random weights (different on every replica), so the output
// cotangent is not uniform. GradModule differentiates the loss with respect to every float
// parameter of the body; each gradient element is compared with a central difference
// (f(x + eps) - f(x - eps)) / 2 eps of the loss summed over the replicas.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "autodiff/vjp.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace axle::autodiff::test {

using ir::Builder;
using ir::Literal;
using ir::OpKind;
using ir::TensorType;
using ir::Value;
using Values = std::vector<Value*>;
using BodyFn = std::function<Value*(Builder&, const Values&)>;

inline TensorType F64(std::vector<int64_t> dims) {
  return TensorType(DType::kF64, Shape(std::move(dims)));
}

// Uniform values in [lo, hi) from a fixed seed.
inline Literal RandomLiteral(const TensorType& t, uint64_t seed, double lo = -2.0,
                             double hi = 2.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Literal l(t);
  for (int64_t i = 0; i < l.NumElements(); ++i) l.SetDouble(i, u(rng));
  return l;
}

struct Range {
  double lo = -2.0;
  double hi = 2.0;
};

struct GradCheckOptions {
  double eps = 1e-6;
  double tol = 1e-6;  // |analytic - numeric| <= tol * max(1, |numeric|)
  int64_t num_replicas = 1;
  std::vector<Range> ranges = {};  // per parameter; default [-2, 2)
  uint64_t seed = 1;
};

// A module whose entry takes `params` plus the weights and returns the scalar loss sum(y * w).
inline std::unique_ptr<ir::Module> LossModule(const std::vector<TensorType>& params,
                                              const BodyFn& body, int64_t num_replicas,
                                              TensorType* y_type = nullptr) {
  auto m = std::make_unique<ir::Module>("gradcheck");
  m->set_num_replicas(num_replicas);
  Builder b(m->AddFunction("main"), ir::ShapeContext{num_replicas});
  Values ps;
  for (size_t i = 0; i < params.size(); ++i)
    ps.push_back(b.Parameter(static_cast<int64_t>(i), params[i]));
  Value* y = body(b, ps);
  if (y_type) *y_type = y->type();
  Value* w = b.Parameter(static_cast<int64_t>(params.size()), y->type(), "w");
  Value* prod = b.Mul(y, w);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < y->type().rank(); ++i) dims.push_back(i);
  Value* loss = dims.empty() ? prod : b.Reduce(prod, ir::ReduceKind::kSum, dims);
  b.Return({loss});
  return m;
}

inline double TotalLoss(const ir::Module& m, const std::vector<std::vector<Literal>>& args) {
  double total = 0;
  if (args.size() == 1) return ir::Evaluate(*m.entry(), args[0])[0].GetDouble(0);
  for (const auto& r : ir::EvaluateReplicated(*m.entry(), args)) total += r[0].GetDouble(0);
  return total;
}

// Checks GradModule's gradients of the loss against central differences. Returns the number of
// gradient elements checked.
inline int64_t CheckGradients(const std::string& what, const std::vector<TensorType>& params,
                              const BodyFn& body, GradCheckOptions opt = {}) {
  SCOPED_TRACE(what);
  TensorType y_type;
  std::unique_ptr<ir::Module> m = LossModule(params, body, opt.num_replicas, &y_type);
  ir::Verify(*m);
  std::vector<int> wrt;
  for (size_t i = 0; i < params.size(); ++i)
    if (IsFloat(params[i].dtype)) wrt.push_back(static_cast<int>(i));
  std::unique_ptr<ir::Module> g = GradModule(*m, 0, wrt);
  ir::Verify(*g);
  std::vector<std::vector<Literal>> args(static_cast<size_t>(opt.num_replicas));
  for (int64_t r = 0; r < opt.num_replicas; ++r) {
    for (size_t i = 0; i < params.size(); ++i) {
      Range rg = i < opt.ranges.size() ? opt.ranges[i] : Range{};
      args[r].push_back(RandomLiteral(params[i], opt.seed * 1000 + r * 100 + i, rg.lo, rg.hi));
    }
    args[r].push_back(RandomLiteral(y_type, opt.seed * 1000 + r * 100 + 99, 0.5, 1.5));
  }
  std::vector<std::vector<Literal>> grads;
  if (opt.num_replicas == 1)
    grads.push_back(ir::Evaluate(*g->entry(), args[0]));
  else
    grads = ir::EvaluateReplicated(*g->entry(), args);
  int64_t checked = 0;
  for (int64_t r = 0; r < opt.num_replicas; ++r) {
    for (size_t k = 0; k < wrt.size(); ++k) {
      const size_t p = static_cast<size_t>(wrt[k]);
      const Literal& an = grads[r][1 + k];
      EXPECT_EQ(an.type(), params[p]) << "gradient type of parameter " << p;
      for (int64_t i = 0; i < args[r][p].NumElements(); ++i) {
        const double x0 = args[r][p].GetDouble(i);
        args[r][p].SetDouble(i, x0 + opt.eps);
        const double fp = TotalLoss(*m, args);
        args[r][p].SetDouble(i, x0 - opt.eps);
        const double fm = TotalLoss(*m, args);
        args[r][p].SetDouble(i, x0);
        const double num = (fp - fm) / (2 * opt.eps);
        const double a = an.GetDouble(i);
        EXPECT_LE(std::abs(a - num), opt.tol * std::max(1.0, std::abs(num)))
            << "replica " << r << " parameter " << p << " element " << i << ": analytic " << a
            << ", numeric " << num << "\n"
            << ir::PrintModule(*g);
        ++checked;
        if (::testing::Test::HasFailure()) return checked;
      }
    }
  }
  return checked;
}

}  // namespace axle::autodiff::test
