// The training job behind `axle train`: a causal LM (GPT-2, the Llama family) on token data, AdamW,
// one compiled step.
//
//   axle::train::TrainOptions o;            // defaults: tiny GPT on the embedded corpus
//   axle::train::TrainResult r = axle::train::Train(o, std::cout);
//
// Batches follow llm.c's order (data.h). The loss logged for step i is the forward loss on batch
// i before that step's update. Every step is traced (forward, backward, clipping, AdamW) and run
// as one executable; after the first step it comes from the executable cache.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace axle::train {

struct TrainOptions {
  std::string model = "auto";     // auto (config.json's family with `init`, else gpt2) | gpt2 | llama
  std::string config = "tiny";   // gpt2: tiny | small | 124m; llama: tiny | small | bench | tinyllama-1.1b
  bool config_given = false;     // --config was passed explicitly
  std::string init;              // HF directory or .safetensors file; empty = random init
  std::string data;              // .bin llm.c shard, .jsonl instruction data, or a text file; empty = embedded corpus
  // Instruction data (instruct.h): packed rows instead of one example a row, the tokenizer (default:
  // the --init directory's), the chat template (auto: the directory's tokenizer_config.json
  // chat_template, else Axle's fixed one; axle: Axle's regardless).
  bool pack = false;
  std::string tokenizer;
  std::string chat_template = "auto";
  int64_t steps = 500;
  int64_t batch = 16;
  int64_t seq = 64;
  double lr = 3e-3;
  int64_t warmup = 30;
  std::string schedule = "cosine";  // constant | cosine
  double weight_decay = 0.1;
  double grad_clip = 1.0;           // 0 = no clipping
  double dropout = 0.0;
  // fp32; bf16-mixed: the forward under axle::autocast(kBFloat16) (products and attention in
  // bf16, softmax, norms and the loss in f32), f32 parameters, gradients and AdamW; or bf16: the
  // same autocast over bf16 parameters, gradients and AdamW moments (Module::to(DType::kBF16); the
  // update computed in f32 and rounded once, Note [AdamW on half parameters]). docs/precision.md.
  std::string precision = "fp32";
  // Gradient checkpointing of the decoder blocks (docs/memory.md): none, full (recompute each
  // block's activations in the backward) or selective (keep the products' results).
  std::string remat = "none";
  // The compiled step's arena fitted into this size by the remat pass ("2GiB"; empty: no budget;
  // docs/memory.md, "A memory budget"). With --remat none (the pass chooses what to recompute)
  // and the compiled backend.
  std::string memory_budget;
  uint64_t seed = 1337;
  std::string log_json;             // one JSON object per step
  int64_t log_every = 10;           // a text line every N steps (and the first and last)
  int64_t samples = 3;              // generated samples printed at the end (0 = none)
  int64_t sample_tokens = 160;     // new tokens per sample (fewer when the context fills up)
  std::string save;                 // write the trained weights to this .safetensors file
  std::string backend;  // compiled | cpu | interpreter; empty: the default (AXLE_BACKEND, compiled)
  bool progress = true;             // a progress bar when stderr is a terminal
  // SPMD (docs/spmd.md, "axle train on a mesh"): virtual CPU devices (0 = AXLE_CPU_DEVICES) and
  // the mesh, "fsdp=4,tp=2" over the axes dp, fsdp, tp (empty: every device on dp).
  int64_t devices = 0;
  std::string mesh;
  // --mesh auto: the compiler chooses every layout (spmd::auto_shard) on a mesh of this shape
  // ("2x4"; empty: one axis over all devices), its arguments per device under `memory_bound`.
  std::string mesh_shape;
  std::string memory_bound;
  double auto_time_limit_s = 30;  // the ILP solver's, per compiled step
  // Plans priced within this fraction of the cheapest are timed on the devices, the fastest
  // kept (spmd::AutoShardingOptions::time_candidates_within; 0: the model decides).
  double auto_timing_within = 0.10;
  // Checkpoints (docs/checkpoint.md, "Training checkpoints"): the directory, a save every N steps
  // (0: only the final one), how many to keep (0: all), and whether to continue from the newest
  // committed step. `stop_at` (0: --steps) ends the run after that global step, as a preemption
  // would: the schedule still spans --steps, so a resumed run continues the same curve.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int64_t keep = 0;
  bool resume = false;
  int64_t stop_at = 0;
};

struct StepLog {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double step_s = 0;
  double compile_s = 0;  // compile seconds spent in this step (0 on a cache hit)
};

struct TrainResult {
  std::vector<StepLog> steps;
  // Seconds from the start of Train until the first step was launched: building the model,
  // initializing it and compiling (or loading from the caches) the first step's executable.
  // The warm-cache figure of docs/cache.md.
  double startup_s = 0;
  std::vector<std::string> samples;
  int64_t first_step = 0;       // the global step the run started at (after --resume)
  int stopped_by_signal = 0;    // SIGINT or SIGTERM when one ended the run (after its save)
  int64_t last_checkpoint = -1; // the step of the run's last committed checkpoint, or -1
  std::vector<double> save_block_s;  // per background save: seconds save_async blocked the loop
  double final_save_s = 0;           // the final (synchronous) save: copy, write and commit
};

// The step of a run that continues from (or is saved to) a checkpoint directory is global:
// --steps counts from step 0, so a resumed run stops where the uninterrupted one would, and its
// log rows carry their global step numbers.
//
// Validates the options (throws axle::Error naming the flag), loads the model and the data
// (clear errors for a missing file, a config/weights mismatch, a token id >= vocab_size), trains,
// and prints the log (and samples) to `out`.
TrainResult Train(const TrainOptions& options, std::ostream& out);

}  // namespace axle::train
