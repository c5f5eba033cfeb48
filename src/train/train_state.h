// What `axle train` puts in a checkpoint and takes back from one (docs/checkpoint.md, "axle train
// --checkpoint-dir"): the model's parameters, AdamW's moments and step counts, the global
// generator, and the positions that follow from the step (the learning-rate schedule, the data
// loader), plus the run's flags and model config.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "axle/checkpoint.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "train/trainer.h"

namespace axle::train {

// The tensors of a training checkpoint: "model.<name>" for each parameter, "optim.exp_avg.<name>"
// and "optim.exp_avg_sq.<name>" for its AdamW moments, and "rng.counter" (the global generator,
// axle::rng_counter). The handles are the live tensors: restoring into them restores the run.
checkpoint::State TrainState(const nn::CausalLM& model, const optim::AdamW& opt);

// The flags of the run as a JSON object (every TrainOptions field by its flag name).
nlohmann::json FlagsJson(const TrainOptions& o);

// The state's `extra` after `step` steps: step, schedule and data positions, AdamW's per-parameter
// step counts, the generator's seed, the flags and the model config.
nlohmann::json TrainExtra(const TrainOptions& o, const nn::CausalLM& model, const optim::AdamW& opt,
                          int64_t step, const std::string& data_source, int64_t data_tokens);

// Checks a checkpoint's `extra` against this run before its tensors are restored: the model
// config must be the same, dropout aside (else an axle::Error naming `where`, the first field that
// differs, both values and what to do).
// Returns one note line per flag that changes the run's math and differs from the checkpoint's
// (empty when none).
std::string CheckResume(const nlohmann::json& extra, const TrainOptions& o, const nn::CausalLM& model,
                        const std::string& where);

// Applies the restored `extra` to what the tensors do not carry: AdamW's step counts (an error
// naming `where` when the parameter groups differ). Returns the step to continue from.
int64_t ApplyExtra(const nlohmann::json& extra, optim::AdamW& opt, const std::string& where);

}  // namespace axle::train
