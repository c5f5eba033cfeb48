// `axle export` (export.h).
#include "train/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "axle/checkpoint.h"
#include "axle/nn.h"
#include "checkpoint/model_dir.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"

namespace axle::train {

void ExportHuggingFace(const ExportOptions& o, std::ostream& out) {
  if (o.out_dir.empty()) Fail("axle export: --out HF_DIR is required");
  if (o.max_shard_bytes < 1) Fail("axle export: --max-shard-size {} must be positive", o.max_shard_bytes);
  checkpoint::ManagerOptions mo;
  mo.read_only = true;
  checkpoint::Manager m(o.checkpoint_dir, mo);
  int64_t step = 0;
  if (o.step) {
    step = *o.step;
    const std::vector<int64_t> steps = m.all_steps();
    if (std::find(steps.begin(), steps.end(), step) == steps.end())
      Fail("axle export: '{}' has no committed step {} (its steps: {})", o.checkpoint_dir, step,
           steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", ")));
  } else if (const std::optional<int64_t> latest = m.latest()) {
    step = *latest;
  } else {
    Fail("axle export: '{}' holds no committed checkpoint", o.checkpoint_dir);
  }
  const std::string where = m.StepDir(step);
  const nlohmann::json extra = m.read_extra(step);
  if (!extra.contains("model_config"))
    Fail("axle export: {} has no model config in its training state (it was not written by `axle train`)",
         where);
  const std::shared_ptr<nn::CausalLM> made =
      nn::MakeCausalLM(extra["model_config"], where + " (model_config)", /*seed=*/0, /*init=*/false);
  nn::CausalLM& model = *made;
  const nlohmann::json config = model.config_json();
  checkpoint::State state;
  for (const auto& [name, p] : model.named_parameters()) state.tensors.emplace_back("model." + name, p);
  m.restore(step, state);

  std::filesystem::create_directories(o.out_dir);
  int64_t total = 0;
  for (const auto& [name, t] : model.state_dict()) total += t.numel() * DTypeSize(t.dtype());
  if (total <= o.max_shard_bytes) {
    nn::SaveCausalLM(model, o.out_dir + "/model.safetensors");
    out << fmt::format("exported step {} of {} to {}: config.json, model.safetensors ({:.1f} MB)\n", step,
                       o.checkpoint_dir, o.out_dir, total / 1e6);
    return;
  }
  // Sharded as save_pretrained shards: greedy in state-dict order, each file at most
  // max_shard_bytes (a larger tensor alone in its file), and an index naming each tensor's file.
  std::vector<checkpoint::TensorMap> shards(1);
  int64_t in_shard = 0;
  for (const auto& [name, t] : model.state_dict()) {
    const int64_t bytes = t.numel() * DTypeSize(t.dtype());
    if (!shards.back().empty() && in_shard + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace_back(name, t.to_literal());
    in_shard += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file = fmt::format("model-{:05}-of-{:05}.safetensors", k + 1, shards.size());
    for (const auto& [name, lit] : shards[k]) weight_map[name] = file;
    checkpoint::SaveSafetensors(o.out_dir + "/" + file, shards[k],
                                {{"format", "pt"}, {checkpoint::kConfigMetadataKey, config.dump()}});
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  WriteFileAtomically(o.out_dir + "/model.safetensors.index.json", index.dump(2) + "\n", "index");
  WriteFileAtomically(o.out_dir + "/config.json", config.dump(2) + "\n", "config.json");
  out << fmt::format("exported step {} of {} to {}: config.json, {} shards with model.safetensors.index.json "
                     "({:.1f} MB)\n",
                     step, o.checkpoint_dir, o.out_dir, shards.size(), total / 1e6);
}

}  // namespace axle::train
