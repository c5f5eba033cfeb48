// Tracing a step without running it, for tools that plan rather than train (`axle shard-plan`,
// docs/spmd.md): the model's parameters and optimizer state become placeholders of their types,
// one step is traced over them, and its module is taken as sync() would cut it -- for a model of
// any size, with no weights in memory and nothing executed.
//
//   nn::GPT2 model(config, seed, /*init=*/false, /*materialize=*/false);
//   detail::MakePlaceholders(parameters);                // pending zeros -> typed placeholders
//   Tensor loss = model.forward(x, y); loss.backward(); opt.step();
//   detail::TracedStep step = detail::TakeTrace();
//   step.module  // parameters numbered by first use; step.inputs[i]: the tensor parameter i reads
#pragma once

#include <memory>
#include <vector>

#include "frontend/lazy.h"
#include "ir/module.h"

namespace axle::detail {

// Makes each tensor a materialized placeholder of its type: a trace reads it as a parameter like
// any device data, but it holds nothing; reading its value throws axle::Error saying so.
void MakePlaceholders(const std::vector<Tensor>& tensors);

struct TracedStep {
  std::unique_ptr<ir::Module> module;  // entry @main; mesh and shardings as traced
  std::vector<std::shared_ptr<TensorImpl>> inputs;   // the tensor behind parameter i (null if gone)
  std::vector<std::shared_ptr<TensorImpl>> results;  // a tensor that took result j
};

// The module sync() would cut from the current trace: every live pending tensor's value a result
// (in creation order), parameters renumbered by first use. Nothing runs: afterwards each of those
// tensors (the loss, updated parameters, optimizer state) is a placeholder, and a new trace
// begins. Throws axle::Error when nothing is pending.
TracedStep TakeTrace();

}  // namespace axle::detail
