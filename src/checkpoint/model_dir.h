// Hugging Face model directories: config.json plus safetensors weights, and checking loaded
// weights against what a model expects.
//
// A directory as `save_pretrained` writes it:
//   config.json                         the model's hyperparameters (optional here)
//   model.safetensors                   all weights, or, when sharded:
//   model.safetensors.index.json        {"metadata": {...}, "weight_map": {name: shard file}}
//   model-00001-of-00002.safetensors    ...
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"

namespace axle::checkpoint {

// The __metadata__ key under which Axle stores a model's config.json (as JSON text) in the
// safetensors files it writes, so that a bare file knows its model.
inline constexpr const char* kConfigMetadataKey = "config";

struct ModelDir {
  nlohmann::json config;  // config.json's object; an empty object when there is none
  TensorMap tensors;      // shards in file-name order, each in its data order
};

// Loads `dir_or_file`: a directory (config.json when present, and model.safetensors.index.json
// with its shards, else model.safetensors), or a single .safetensors file (the config from its
// __metadata__ "config" entry when Axle wrote it, else empty).
// Throws axle::Error naming the file for: no weights in the directory, a config.json or index
// that is not valid JSON of the right shape, a shard path that leaves the directory, a tensor the
// index lists that its shard lacks, a shard tensor the index does not list or assigns to another
// shard, a tensor in two shards, and every error of LoadSafetensors.
ModelDir LoadModelDir(const std::string& dir_or_file);

// Checks `tensors` against the `expected` (name, type) list. All problems — missing tensors,
// unexpected extra tensors, duplicate names, wrong dtype or shape — go into one axle::Error that
// names `source` (a file or directory), lists the first 20 problems one per line and then
// "... and N more". Returns normally when the names and types match exactly (in any order).
void CheckTensors(const TensorMap& tensors,
                  const std::vector<std::pair<std::string, ir::TensorType>>& expected,
                  std::string_view source);

}  // namespace axle::checkpoint
