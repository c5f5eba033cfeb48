// axle export --checkpoint DIR [--step N] --out HF_DIR [--max-shard-size BYTES]
// A checkpoint of `axle train --checkpoint-dir` as a Hugging Face GPT-2 directory
// (src/train/export.h).
#include <iostream>

#include "tools/commands.h"
#include "train/export.h"

namespace axle::tools {

void AddExportCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto o = std::make_shared<train::ExportOptions>();
  auto step = std::make_shared<int64_t>(-1);
  CLI::App* sub = app.add_subcommand(
      "export", "Write a training checkpoint as a Hugging Face GPT-2 directory (config.json + safetensors)");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--checkpoint", o->checkpoint_dir, "The --checkpoint-dir of `axle train`")->required();
  sub->add_option("--step", *step, "The step to export (default: the newest committed one)")
      ->check(kNonNegative)
      ->default_str("the newest");
  sub->add_option("--out", o->out_dir, "The Hugging Face model directory to write")->required();
  sub->add_option("--max-shard-size", o->max_shard_bytes,
                  "Bytes per weights file; above it the weights are sharded with an index")
      ->check(kPositive);
  commands.emplace_back(sub, [o, step] {
    if (*step >= 0) o->step = *step;
    train::ExportHuggingFace(*o, std::cout);
  });
}

}  // namespace axle::tools
