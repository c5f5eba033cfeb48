// axle::optim: optimizers, gradient clipping and learning-rate schedules with PyTorch's semantics
// and defaults (torch.optim.SGD, torch.optim.AdamW, torch.nn.utils.clip_grad_norm_).
//
// The update is traced into the same lazy graph as the forward and backward: step() only records
// Tensor ops that rebind the parameters and the state in place, and the next axle::sync() runs
// forward, backward and update as one executable. To keep that graph the same every step (so it
// compiles once), everything that changes between steps — the learning rate, the bias
// corrections of the step count — enters as a device tensor uploaded each step
// (axle::from_literal) into the same tensor object every step (axle::set_data), never as a
// constant, and the optimizer state is created (and synced) in the constructor rather than on the
// first step. step() registers its host work (the step counts, the uploads) with
// axle::record_host_effect, so a CompiledFunction (axle/compile.h) that replays the step without
// tracing it still advances them.
//
//   axle::optim::AdamW opt({{decay_params, std::nullopt}, {no_decay_params, 0.0}}, /*lr=*/6e-4);
//   for (...) { opt.zero_grad(); loss = model(x, y); loss.backward(); opt.step(); axle::sync(); }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "axle/tensor.h"

namespace axle::optim {

// A group of parameters sharing hyperparameters. weight_decay: nullopt = the optimizer's.
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Records one update of every parameter that has a gradient (params whose grad is undefined
  // are skipped, and their step count does not advance).
  virtual void step() = 0;
  // Sets every parameter's gradient to undefined (set_to_none).
  void zero_grad();
  void set_lr(double lr);
  double lr() const { return lr_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // How many updates the parameter `group`/`index` has received.
  int64_t param_steps(size_t group, size_t index) const;
  // Sets that count (restoring a checkpoint: the next step() continues from it).
  void set_param_steps(size_t group, size_t index, int64_t steps);

 protected:
  Optimizer(std::vector<ParamGroup> groups, double lr, const char* name);
  // Uploads `values` into the f32 scalar tensors scalars_[0, n) (created on first use; the same
  // tensor objects every step, so a replayed step reads them again: graph inputs, not constants).
  void SetScalars(const std::vector<double>& values);
  // The host side of a step of the parameters `stepping` (group, index): advances their step
  // counts (AdvanceStep) and uploads lr and, per distinct step key, its StepScalars pair
  // (SetScalars: lr at 0, the pairs after it); per parameter, the slot of its pair.
  std::vector<size_t> HostStep(const std::vector<std::pair<size_t, size_t>>& stepping);
  // Advances parameter `group`/`index`'s step count; the key its step's scalars depend on.
  virtual int64_t AdvanceStep(size_t group, size_t index) = 0;
  // The two scalars a step with this key uploads.
  virtual std::pair<double, double> StepScalars(int64_t key) const = 0;
  // Collects the parameters that have a gradient into *stepping, runs HostStep for them and
  // registers it with record_host_effect (a replayed step runs it again); HostStep's slots.
  std::vector<size_t> BeginStep(std::vector<std::pair<size_t, size_t>>* stepping);

  std::vector<ParamGroup> groups_;
  std::vector<Tensor> scalars_;
  std::vector<std::vector<int64_t>> steps_;  // per group, per param
  double lr_;
  const char* name_;
};

// torch.optim.SGD: d = g + wd p; buf = momentum buf + (1 - dampening) d (buf = d on the first
// step); d = d + momentum buf (nesterov) or buf; p -= lr d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double dampening = 0,
      double weight_decay = 0, bool nesterov = false);
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0, double dampening = 0,
      double weight_decay = 0, bool nesterov = false);
  void step() override;
  // The momentum buffer of parameter `group`/`index` (undefined without momentum).
  Tensor momentum_buffer(size_t group, size_t index) const;

 private:
  // Key 1 for a parameter's first step, 0 after; the momentum coefficients for it.
  int64_t AdvanceStep(size_t group, size_t index) override;
  std::pair<double, double> StepScalars(int64_t first) const override;

  double momentum_, dampening_, weight_decay_;
  bool nesterov_;
  std::vector<std::vector<Tensor>> buf_;
};

// torch.optim.AdamW (decoupled weight decay): p *= 1 - lr wd; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// (amsgrad: the running max of v in place of v).
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3,
        std::pair<double, double> betas = {0.9, 0.999}, double eps = 1e-8,
        double weight_decay = 1e-2, bool amsgrad = false);
  AdamW(std::vector<Tensor> params, double lr = 1e-3,
        std::pair<double, double> betas = {0.9, 0.999}, double eps = 1e-8,
        double weight_decay = 1e-2, bool amsgrad = false);
  void step() override;
  Tensor exp_avg(size_t group, size_t index) const { return exp_avg_[group][index]; }
  Tensor exp_avg_sq(size_t group, size_t index) const { return exp_avg_sq_[group][index]; }

 private:
  // Key: the step count t; lr / (1 - beta1^t) and sqrt(1 - beta2^t) for it.
  int64_t AdvanceStep(size_t group, size_t index) override;
  std::pair<double, double> StepScalars(int64_t t) const override;

  double beta1_, beta2_, eps_, weight_decay_;
  bool amsgrad_;
  std::vector<std::vector<Tensor>> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

// Scales the gradients of `params` in place so that their global norm (the `norm_type` norm of
// all gradients together; 2 = L2, inf = max |g|) is at most max_norm: g *= min(1, max_norm /
// (norm + 1e-6)). Traced; returns the total norm (before clipping) as an f32 scalar tensor.
// Params without a gradient are ignored.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

// The learning rate at 0-based `step` of `steps`: linear warmup base_lr * (step + 1) / warmup for
// step < warmup, then "constant" (base_lr) or "cosine" (min_lr + 0.5 (base_lr - min_lr)
// (1 + cos(pi p)), p = (step - warmup) / max(1, steps - warmup), min_lr = 0.1 base_lr).
double lr_at(int64_t step, int64_t steps, double base_lr, int64_t warmup,
             const std::string& schedule);

}  // namespace axle::optim
