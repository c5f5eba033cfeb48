// Optimizers, gradient clipping and learning-rate schedules (torch.optim's semantics), traced
// into the training step's graph. See include/axle/optim.h for why every per-step value is an
// uploaded device tensor.
#include "axle/optim.h"

#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "axle/compile.h"
#include "axle/spmd.h"
#include "core/error.h"

namespace axle::optim {
namespace {

std::vector<ParamGroup> OneGroup(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params), std::nullopt}};
}

void CheckNonNegative(const char* opt, const char* what, double v) {
  if (!(v >= 0)) Fail("{}: invalid {}: {} (must be >= 0)", opt, what, v);
}

}  // namespace

// ---- Optimizer --------------------------------------------------------------------------------

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, const char* name)
    : groups_(std::move(groups)), lr_(lr), name_(name) {
  CheckNonNegative(name_, "learning rate", lr);
  size_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    if (group.weight_decay) CheckNonNegative(name_, "weight_decay of a param group", *group.weight_decay);
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      if (!p.defined()) Fail("{}: parameter {} of param group {} is undefined", name_, i, g);
      if (!IsFloat(p.dtype())) {
        Fail("{}: parameter {} of param group {} is {}; only floating-point tensors can be "
             "optimized",
             name_, i, g, p.type_string());
      }
      for (size_t h = 0; h <= g; ++h) {
        const auto& other = groups_[h].params;
        for (size_t j = 0; j < (h == g ? i : other.size()); ++j) {
          if (other[j].impl() == p.impl()) {
            Fail("{}: a parameter ({}) appears more than once in the param groups (group {} "
                 "index {} and group {} index {}); list each parameter once",
                 name_, p.type_string(), h, j, g, i);
          }
        }
      }
    }
    total += group.params.size();
    steps_.emplace_back(group.params.size(), 0);
  }
  if (total == 0) Fail("{}: got an empty parameter list", name_);
}

void Optimizer::zero_grad() {
  for (auto& group : groups_) {
    for (auto& p : group.params) {
      if (p.grad().defined()) p.set_grad(Tensor());
    }
  }
}

void Optimizer::set_lr(double lr) {
  CheckNonNegative(name_, "learning rate", lr);
  lr_ = lr;
}

int64_t Optimizer::param_steps(size_t group, size_t index) const {
  return steps_.at(group).at(index);
}

void Optimizer::set_param_steps(size_t group, size_t index, int64_t steps) {
  if (steps < 0) Fail("{}: set_param_steps({}, {}, {}): a step count cannot be negative", name_, group, index, steps);
  steps_.at(group).at(index) = steps;
}

void Optimizer::SetScalars(const std::vector<double>& values) {
  for (size_t k = 0; k < values.size(); ++k) {
    Tensor v = from_vector<float>({static_cast<float>(values[k])}, {}, DType::kF32);
    if (k < scalars_.size()) {
      set_data(scalars_[k], v);
    } else {
      scalars_.push_back(v);
    }
  }
}

std::vector<size_t> Optimizer::HostStep(const std::vector<std::pair<size_t, size_t>>& stepping) {
  std::vector<double> values = {lr_};
  std::map<int64_t, size_t> slot;  // step key -> the index of its pair in values
  std::vector<size_t> slot_of;
  for (const auto& [g, i] : stepping) {
    const int64_t key = AdvanceStep(g, i);
    const auto [it, fresh] = slot.emplace(key, values.size());
    if (fresh) {
      const auto [a, b] = StepScalars(key);
      values.push_back(a);
      values.push_back(b);
    }
    slot_of.push_back(it->second);
  }
  SetScalars(values);
  return slot_of;
}

std::vector<size_t> Optimizer::BeginStep(std::vector<std::pair<size_t, size_t>>* stepping) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i)
      if (groups_[g].params[i].grad().defined()) stepping->emplace_back(g, i);
  std::vector<size_t> slot_of = HostStep(*stepping);
  record_host_effect([this, params = *stepping] { HostStep(params); });
  return slot_of;
}

// ---- SGD --------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double dampening,
         double weight_decay, bool nesterov)
    : SGD(OneGroup(std::move(params)), lr, momentum, dampening, weight_decay, nesterov) {}

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double dampening,
         double weight_decay, bool nesterov)
    : Optimizer(std::move(groups), lr, "SGD"),
      momentum_(momentum),
      dampening_(dampening),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  CheckNonNegative(name_, "momentum value", momentum);
  CheckNonNegative(name_, "weight_decay value", weight_decay);
  if (nesterov && (momentum <= 0 || dampening != 0)) {
    Fail("SGD: Nesterov momentum requires a momentum and zero dampening (got momentum {}, "
         "dampening {})",
         momentum, dampening);
  }
  NoGradGuard no_grad;
  for (auto& group : groups_) {
    buf_.emplace_back();
    for (auto& p : group.params) buf_.back().push_back(momentum_ != 0 ? zeros_like(p) : Tensor());
  }
  // The state exists before the first step, so steps 1 and 2 trace the same graph.
  if (momentum_ != 0) sync();
}

Tensor SGD::momentum_buffer(size_t group, size_t index) const { return buf_.at(group).at(index); }

int64_t SGD::AdvanceStep(size_t group, size_t index) { return steps_[group][index]++ == 0 ? 1 : 0; }

// The momentum update's coefficients: the first step of a parameter (key 1) takes buf = d (PyTorch
// clones d into the buffer), later ones buf = momentum buf + (1 - dampening) d. Uploaded, so the
// first and later steps trace the same graph.
std::pair<double, double> SGD::StepScalars(int64_t first) const {
  return first ? std::pair{0.0, 1.0} : std::pair{momentum_, 1.0 - dampening_};
}

void SGD::step() {
  NoGradGuard no_grad;
  std::vector<std::pair<size_t, size_t>> stepping;
  const std::vector<size_t> slot_of = BeginStep(&stepping);
  const Tensor lr = scalars_[0];
  for (size_t k = 0; k < stepping.size(); ++k) {
    const auto [g, i] = stepping[k];
    const double wd = groups_[g].weight_decay.value_or(weight_decay_);
    Tensor& p = groups_[g].params[i];
    Tensor grad = p.grad();
    Tensor d = wd != 0 ? grad + p * wd : grad;
    if (momentum_ != 0) {
      Tensor& buf = buf_[g][i];
      buf.copy_(buf * scalars_[slot_of[k]] + d * scalars_[slot_of[k] + 1]);
      d = nesterov_ ? d + buf * momentum_ : buf;
    }
    p.copy_(p - d * lr);
  }
}

// ---- AdamW ------------------------------------------------------------------------------------

AdamW::AdamW(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps,
             double weight_decay, bool amsgrad)
    : AdamW(OneGroup(std::move(params)), lr, betas, eps, weight_decay, amsgrad) {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas,
             double eps, double weight_decay, bool amsgrad)
    : Optimizer(std::move(groups), lr, "AdamW"),
      beta1_(betas.first),
      beta2_(betas.second),
      eps_(eps),
      weight_decay_(weight_decay),
      amsgrad_(amsgrad) {
  CheckNonNegative(name_, "epsilon value", eps);
  CheckNonNegative(name_, "weight_decay value", weight_decay);
  if (!(beta1_ >= 0 && beta1_ < 1)) Fail("AdamW: invalid beta parameter at index 0: {}", beta1_);
  if (!(beta2_ >= 0 && beta2_ < 1)) Fail("AdamW: invalid beta parameter at index 1: {}", beta2_);
  NoGradGuard no_grad;
  for (auto& group : groups_) {
    exp_avg_.emplace_back();
    exp_avg_sq_.emplace_back();
    max_exp_avg_sq_.emplace_back();
    for (auto& p : group.params) {
      // Each moment has its parameter's layout (a parameter marked before the optimizer is made:
      // the state is born sharded, never whole).
      exp_avg_.back().push_back(spmd::mark_sharding_like(zeros_like(p), p));
      exp_avg_sq_.back().push_back(spmd::mark_sharding_like(zeros_like(p), p));
      max_exp_avg_sq_.back().push_back(amsgrad_ ? spmd::mark_sharding_like(zeros_like(p), p) : Tensor());
    }
  }
  // The state exists before the first step, so steps 1 and 2 trace the same graph.
  sync();
}

int64_t AdamW::AdvanceStep(size_t group, size_t index) { return ++steps_[group][index]; }

// Per step count t: lr / (1 - beta1^t) and sqrt(1 - beta2^t), computed in double as PyTorch does.
std::pair<double, double> AdamW::StepScalars(int64_t t) const {
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(t));
  return {lr_ / bc1, std::sqrt(bc2)};
}

void AdamW::step() {
  NoGradGuard no_grad;
  std::vector<std::pair<size_t, size_t>> stepping;
  const std::vector<size_t> slot_of = BeginStep(&stepping);
  const Tensor lr = scalars_[0];
  std::map<double, Tensor> decay;  // weight decay -> 1 - lr * wd
  for (size_t k = 0; k < stepping.size(); ++k) {
    const auto [g, i] = stepping[k];
    const double wd = groups_[g].weight_decay.value_or(weight_decay_);
    // Note [AdamW on half parameters]: a bf16 or f16 parameter (--precision bf16) and its moments
    // are read as f32, updated in f32 and each rounded once when stored, as PyTorch's fused AdamW
    // does for half parameters; rounding every intermediate to the half instead loses the update
    // of a moment whose step is below half its ulp. For f32 the converts vanish.
    Tensor& p = groups_[g].params[i];
    Tensor& m = exp_avg_[g][i];
    Tensor& v = exp_avg_sq_[g][i];
    const auto f32 = [](const Tensor& t) { return t.dtype() == DType::kF32 ? t : t.to(DType::kF32); };
    Tensor grad = f32(p.grad());
    Tensor param = f32(p);
    const Tensor& step_size = scalars_[slot_of[k]];
    const Tensor& bc2_sqrt = scalars_[slot_of[k] + 1];
    if (wd != 0) {
      auto d = decay.find(wd);
      if (d == decay.end()) d = decay.emplace(wd, 1.0 - lr * wd).first;
      param = param * d->second;
    }
    const Tensor m1 = f32(m) * beta1_ + grad * (1.0 - beta1_);
    const Tensor v1 = f32(v) * beta2_ + grad * grad * (1.0 - beta2_);
    m.copy_(m1);
    v.copy_(v1);
    Tensor second = v1;
    if (amsgrad_) {
      Tensor& vmax = max_exp_avg_sq_[g][i];
      const Tensor vmax1 = maximum(f32(vmax), v1);
      vmax.copy_(vmax1);
      second = vmax1;
    }
    Tensor denom = second.sqrt() / bc2_sqrt + eps_;
    p.copy_(param - m1 / denom * step_size);
  }
}

// ---- Gradient clipping ------------------------------------------------------------------------

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  if (!(max_norm >= 0)) Fail("clip_grad_norm_: max_norm must be >= 0, not {}", max_norm);
  if (!(norm_type > 0)) Fail("clip_grad_norm_: norm_type must be positive, not {}", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> with_grad;
  for (const auto& p : params) {
    if (p.defined() && p.grad().defined()) with_grad.push_back(p);
  }
  if (with_grad.empty()) return zeros({});
  const bool inf = std::isinf(norm_type);
  Tensor total;
  for (const auto& p : with_grad) {
    Tensor g = p.grad().to(DType::kF32);
    Tensor part;
    if (inf) {
      part = g.abs().amax();
    } else if (norm_type == 2) {
      part = g.square().sum();
    } else if (norm_type == 1) {
      part = g.abs().sum();
    } else {
      part = g.abs().pow(norm_type).sum();
    }
    if (!total.defined()) {
      total = part;
    } else {
      total = inf ? maximum(total, part) : total + part;
    }
  }
  if (!inf && norm_type == 2) {
    total = total.sqrt();
  } else if (!inf && norm_type != 1) {
    total = total.pow(1.0 / norm_type);
  }
  Tensor coef = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (auto& p : with_grad) {
    Tensor g = p.grad();
    p.set_grad((g.to(DType::kF32) * coef).to(g.dtype()));
  }
  return total;
}

// ---- Schedules --------------------------------------------------------------------------------

double lr_at(int64_t step, int64_t steps, double base_lr, int64_t warmup,
             const std::string& schedule) {
  if (schedule != "constant" && schedule != "cosine") {
    Fail("unknown learning-rate schedule '{}'; use \"constant\" or \"cosine\"", schedule);
  }
  if (step < 0) Fail("lr_at: step must be >= 0, not {}", step);
  if (warmup < 0) Fail("lr_at: warmup must be >= 0, not {}", warmup);
  if (step < warmup) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (schedule == "constant") return base_lr;
  const double min_lr = 0.1 * base_lr;
  double progress = static_cast<double>(step - warmup) /
                    static_cast<double>(std::max<int64_t>(1, steps - warmup));
  progress = std::min(progress, 1.0);
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace axle::optim
