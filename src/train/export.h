// `axle export`: a training checkpoint (axle::checkpoint::Manager, written by `axle train
// --checkpoint-dir`) as a Hugging Face GPT-2 model directory (docs/checkpoint.md, "axle export").
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace axle::train {

struct ExportOptions {
  std::string checkpoint_dir;
  std::optional<int64_t> step;            // nullopt: the newest committed step
  std::string out_dir;
  int64_t max_shard_bytes = int64_t{5} << 30;  // above it: model-0000k-of-0000n + an index
};

// Writes out_dir/config.json and the model's weights (Hugging Face's names: model.safetensors,
// or model-00001-of-0000N.safetensors files with model.safetensors.index.json when they exceed
// max_shard_bytes) from the checkpoint's "model.*" tensors and its model config. Reads the
// checkpoint without locking it (a running `axle train` may keep saving). Throws axle::Error
// naming the directory for: no committed step, a step that is not there, a checkpoint without a
// GPT-2 model config (not written by `axle train`), and every restore error. Prints what it
// wrote to `out`.
void ExportHuggingFace(const ExportOptions& options, std::ostream& out);

}  // namespace axle::train
