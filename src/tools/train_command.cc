// axle train [--model auto|gpt2|llama] [--config SIZE] [--init DIR|FILE.safetensors]
//            [--data FILE] [--steps N] [--batch B] [--seq T] [--lr X] [--warmup N]
//            [--schedule constant|cosine] [--weight-decay X] [--grad-clip X] [--dropout X]
//            [--seed S] [--log-json FILE] [--checkpoint-dir DIR [--checkpoint-every N] [--keep N]
//            [--resume] [--stop-at N]] ...
// Trains a causal LM (src/train/trainer.h). With no flags: a tiny GPT on the embedded corpus.
#include <cstdlib>
#include <iostream>

#include "tools/commands.h"
#include "train/trainer.h"

namespace axle::tools {

void AddTrainCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto o = std::make_shared<train::TrainOptions>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train GPT-2 or a Llama-family model (default: a tiny GPT on a corpus embedded in the binary)");
  sub->option_defaults()->always_capture_default();  // --help shows each default
  sub->add_option("--model", o->model,
                  "Model family: auto (config.json's model_type with --init, else gpt2), gpt2 or llama")
      ->check(CLI::IsMember({"auto", "gpt2", "llama"}));
  auto* config = sub->add_option("--config", o->config,
                                 "Model size without --init: tiny, small or 124m (gpt2); tiny, small, bench or "
                                 "tinyllama-1.1b (llama)");
  sub->add_option("--init", o->init,
                  "Start from a Hugging Face model directory (GPT-2, Llama, Mistral, Qwen2) or .safetensors file");
  sub->add_option("--data", o->data,
                  "Token data: an llm.c .bin shard, instruction data (.jsonl of {prompt, response} or {messages}), "
                  "or a UTF-8 text file (byte tokens)");
  sub->add_flag("--pack", o->pack, "Instruction data: pack several examples into a row (attention kept within each)");
  sub->add_option("--tokenizer", o->tokenizer, "Instruction data: tokenizer.json or tokenizer.model (default: --init's)");
  sub->add_option("--chat-template", o->chat_template,
                  "Instruction data: auto (the directory's chat_template, else Axle's), or axle (Axle's fixed template)")
      ->check(CLI::IsMember({"auto", "axle"}));
  sub->add_option("--steps", o->steps, "Training steps")->check(kPositive);
  sub->add_option("--batch", o->batch, "Batch size B")->check(kPositive);
  sub->add_option("--seq", o->seq, "Sequence length T")->check(kPositive);
  sub->add_option("--lr", o->lr, "Peak learning rate")->check(kPositive);
  sub->add_option("--warmup", o->warmup, "Linear warmup steps")->check(kNonNegative);
  sub->add_option("--schedule", o->schedule, "LR schedule after warmup")
      ->check(CLI::IsMember({"constant", "cosine"}));
  sub->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (matrices only)")
      ->check(kNonNegative);
  sub->add_option("--grad-clip", o->grad_clip, "Global-norm gradient clipping (0 = off)")
      ->check(kNonNegative);
  sub->add_option("--dropout", o->dropout, "Dropout probability")->check(InRange(0.0, 0.99));
  sub->add_option("--precision", o->precision,
                  "fp32; bf16-mixed: products and attention in bf16 under autocast, softmax, norms, the loss and "
                  "AdamW in f32 on f32 weights; or bf16: bf16 weights, gradients and AdamW moments (updated in f32, "
                  "rounded once), under the same autocast (docs/precision.md)")
      ->check(CLI::IsMember({"fp32", "bf16-mixed", "bf16"}));
  sub->add_option("--remat", o->remat,
                  "Gradient checkpointing of the decoder blocks: none, full (recompute their activations in the "
                  "backward) or selective (keep the products' results, recompute the rest)")
      ->check(CLI::IsMember({"none", "full", "selective"}));
  sub->add_option("--memory-budget", o->memory_budget,
                  "Fit each compiled step's arena into this size (2GiB, 800MB, ...): the compiler's remat pass "
                  "recomputes activations, cheapest first");
  sub->add_option("--seed", o->seed, "Seed of the initialization, dropout and sampling");
  sub->add_option("--log-json", o->log_json, "Write one JSON object per step to FILE");
  sub->add_option("--log-every", o->log_every, "Print a line every N steps")
      ->check(kPositive);
  sub->add_option("--samples", o->samples, "Samples generated at the end")
      ->check(kNonNegative);
  sub->add_option("--sample-tokens", o->sample_tokens, "Tokens per sample")
      ->check(kNonNegative);
  sub->add_option("--save", o->save, "Save the trained weights to FILE.safetensors");
  sub->add_option("--backend", o->backend, "Executor (default: AXLE_BACKEND, else compiled)")
      ->check(CLI::IsMember({"cpu", "compiled", "interpreter"}));
  sub->add_flag("!--no-progress", o->progress, "No progress bar");
  sub->add_option("--devices", o->devices, "Virtual CPU devices of this process (default: AXLE_CPU_DEVICES, else 1); in a run of several processes, each has this many")
      ->check(kPositive);
  sub->add_option("--mesh", o->mesh,
                  "Device mesh over the axes dp, fsdp, tp, e.g. fsdp=4,tp=2 (default: dp over all devices), or auto: "
                  "the compiler chooses every layout");
  sub->add_option("--mesh-shape", o->mesh_shape, "With --mesh auto: the mesh's shape, e.g. 2x4 (default: one axis)");
  sub->add_option("--memory-bound", o->memory_bound,
                  "With --mesh auto: parameters, optimizer state and batch per device at most, e.g. 2GB");
  sub->add_option("--auto-time-limit", o->auto_time_limit_s, "With --mesh auto: seconds the ILP solver may take")
      ->check(kPositive);
  sub->add_option("--auto-timing-within", o->auto_timing_within,
                  "With --mesh auto: plans the model prices within this fraction of the cheapest are timed on the devices "
                  "and the fastest kept (0: the model decides)")
      ->check(kNonNegative);
  sub->add_option("--checkpoint-dir", o->checkpoint_dir,
                  "Save checkpoints (parameters, optimizer, data and RNG state) in DIR/step_NNNNNNNN");
  sub->add_option("--checkpoint-every", o->checkpoint_every,
                  "Save a checkpoint every N steps in the background (0: only at the end)")
      ->check(kNonNegative);
  sub->add_option("--keep", o->keep, "Keep the newest N checkpoints (0: all)")->check(kNonNegative);
  sub->add_flag("--resume", o->resume, "Continue from the newest committed checkpoint in --checkpoint-dir");
  sub->add_option("--stop-at", o->stop_at,
                  "Stop after global step N and save, as a preemption would (the schedule still spans --steps)")
      ->check(kNonNegative);
  commands.emplace_back(sub, [o, config] {
    o->config_given = config->count() > 0;
    const train::TrainResult r = train::Train(*o, std::cout);
    if (r.stopped_by_signal != 0) {
      std::cout << std::flush;
      std::exit(128 + r.stopped_by_signal);  // the shell's convention for "ended by signal N"
    }
  });
}

}  // namespace axle::tools
