// `axle train`'s checkpoint contents (train_state.h).
#include "train/train_state.h"

#include <fmt/format.h>

#include <map>

#include "axle/optim.h"
#include "axle/tensor.h"
#include "core/error.h"

namespace axle::train {

checkpoint::State TrainState(const nn::CausalLM& model, const optim::AdamW& opt) {
  checkpoint::State s;
  std::map<const void*, std::string> name_of;
  for (const auto& [name, p] : model.named_parameters()) {
    s.tensors.emplace_back("model." + name, p);
    name_of[p.impl().get()] = name;
  }
  const auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      auto it = name_of.find(groups[g].params[i].impl().get());
      AXLE_CHECK(it != name_of.end(), "an optimized parameter is not a model parameter");
      s.tensors.emplace_back("optim.exp_avg." + it->second, opt.exp_avg(g, i));
      s.tensors.emplace_back("optim.exp_avg_sq." + it->second, opt.exp_avg_sq(g, i));
    }
  s.tensors.emplace_back("rng.counter", rng_counter());
  return s;
}

nlohmann::json FlagsJson(const TrainOptions& o) {
  return {{"model", o.model},
          {"config", o.config},
          {"init", o.init},
          {"data", o.data},
          {"pack", o.pack},
          {"steps", o.steps},
          {"batch", o.batch},
          {"seq", o.seq},
          {"lr", o.lr},
          {"warmup", o.warmup},
          {"schedule", o.schedule},
          {"weight-decay", o.weight_decay},
          {"grad-clip", o.grad_clip},
          {"dropout", o.dropout},
          {"precision", o.precision},
          {"seed", o.seed},
          {"backend", o.backend},
          {"devices", o.devices},
          {"mesh", o.mesh},
          {"checkpoint-dir", o.checkpoint_dir},
          {"checkpoint-every", o.checkpoint_every},
          {"keep", o.keep}};
}

nlohmann::json TrainExtra(const TrainOptions& o, const nn::CausalLM& model, const optim::AdamW& opt,
                          int64_t step, const std::string& data_source, int64_t data_tokens) {
  nlohmann::json param_steps = nlohmann::json::array();
  const auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    nlohmann::json group = nlohmann::json::array();
    for (size_t i = 0; i < groups[g].params.size(); ++i) group.push_back(opt.param_steps(g, i));
    param_steps.push_back(std::move(group));
  }
  return {{"step", step},
          {"lr_schedule",
           {{"schedule", o.schedule}, {"base_lr", o.lr}, {"warmup", o.warmup}, {"steps", o.steps}, {"next_step", step},
            {"next_lr", optim::lr_at(step, o.steps, o.lr, o.warmup, o.schedule)}}},
          {"data",
           {{"source", data_source}, {"tokens", data_tokens}, {"batch", o.batch}, {"seq", o.seq},
            {"next_step", step}, {"tokens_consumed", step * o.batch * o.seq}}},
          {"optimizer", {{"type", "AdamW"}, {"param_steps", std::move(param_steps)}}},
          {"rng", {{"seed", rng_seed()}}},
          {"flags", FlagsJson(o)},
          {"model_config", model.config_json()}};
}

std::string CheckResume(const nlohmann::json& extra, const TrainOptions& o, const nn::CausalLM& model,
                        const std::string& where) {
  const nlohmann::json want = model.config_json();
  const nlohmann::json have = extra.value("model_config", nlohmann::json::object());
  // Every field that shapes the model must agree; dropout is a flag of the run (--dropout).
  for (const auto& [key, value] : want.items()) {
    if (key == "resid_pdrop" || key == "embd_pdrop" || key == "attn_pdrop" || key == "transformers_version") continue;
    const nlohmann::json there = have.value(key, nlohmann::json());
    if (there != value && !(there.is_number() && value.is_number() && there.get<double>() == value.get<double>()))
      Fail("--resume: the checkpoint {} holds a model with {} = {}, this run builds {} = {} (its model: {}); pass "
           "the --model, --config or --init the checkpoint was trained with (its flags: {})",
           where, key, there.dump(), key, value.dump(), model.config_string(),
           extra.value("flags", nlohmann::json::object()).dump());
  }
  std::string notes;
  const nlohmann::json flags = extra.value("flags", nlohmann::json::object());
  const nlohmann::json now = FlagsJson(o);
  // --precision bf16 keeps bf16 parameters and moments, the others f32 ones: a change between
  // them cannot restore (fp32 <-> bf16-mixed can, and is noted below).
  const std::string saved_precision = flags.value("precision", std::string("fp32"));
  if ((saved_precision == "bf16") != (o.precision == "bf16"))
    Fail("--resume: the checkpoint {} was saved by a --precision {} run ({} parameters and AdamW moments), this run "
         "has --precision {}: pass --precision {}",
         where, saved_precision, saved_precision == "bf16" ? "bf16" : "f32", o.precision,
         saved_precision == "bf16" ? "bf16" : "fp32 or bf16-mixed");
  for (const char* key : {"data", "steps", "batch", "seq", "lr", "warmup", "schedule", "weight-decay", "grad-clip",
                          "dropout", "precision", "seed", "mesh"}) {
    if (flags.contains(key) && flags[key] != now[key])
      notes += fmt::format("note: --{} is {} here but was {} when the checkpoint was saved\n", key, now[key].dump(),
                           flags[key].dump());
  }
  return notes;
}

int64_t ApplyExtra(const nlohmann::json& extra, optim::AdamW& opt, const std::string& where) {
  const auto& groups = opt.param_groups();
  try {
    const nlohmann::json& steps = extra.at("optimizer").at("param_steps");
    if (steps.size() != groups.size()) Fail("group count");
    for (size_t g = 0; g < groups.size(); ++g) {
      if (steps[g].size() != groups[g].params.size()) Fail("group size");
      for (size_t i = 0; i < groups[g].params.size(); ++i) opt.set_param_steps(g, i, steps[g][i].get<int64_t>());
    }
    return extra.at("step").get<int64_t>();
  } catch (const std::exception&) {
    Fail("--resume: the checkpoint {} has no usable training state (\"step\" and the optimizer's step counts per "
         "parameter group; it was not written by `axle train`, or for another optimizer layout)",
         where);
  }
}

}  // namespace axle::train
