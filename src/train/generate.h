// Generating text with a KV cache: `axle generate`, and the samples at the end of `axle train`.
//
//   GenerateOptions g;                 // greedy (temperature 0), 50 tokens
//   GenerateResult r = GenerateTokens(model, {{1, 2, 3}}, g);
//
// Note [One decode graph]
// The prompt runs once through the model (the prefill, one compiled graph for its length), and
// then each new token alone (the decode step, T = 1) against the cache (CausalLM::forward_cached).
// The cache has a fixed size (prompt + new tokens) and the position is a 0-d tensor that enters
// the step as data: the new keys and values are written with dynamic_update_slice at it, and the
// mask, rotary angles (Llama) and position embedding (GPT-2) are computed from it in the step. So
// every decode step traces the same graph and one executable serves the whole generation,
// instead of one per token; and each token costs one position's products instead of a forward
// over the whole window (what `axle train`'s samples did before: over 12 minutes for 3 x 160
// tokens of GPT-2 124M at seq 1024). Attention still reads the whole cache each step, its
// unwritten tail masked: O(max_len) per token, small beside the projections.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "axle/nn.h"

namespace axle::train {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy (the most likely token; ties to the lowest id)
  int64_t top_k = 0;       // keep the k most likely tokens (0: all)
  double top_p = 1;        // then the smallest set whose probability reaches top_p (1: all)
};

// The next token from one row of logits, as Hugging Face's sampling does it: logits / temperature,
// top-k, then top-p (nucleus) filtering, then a draw from the softmax of what is left with a
// uniform double made of 53 bits of `rng` (portable, unlike std distributions).
int32_t SampleToken(std::span<const float> logits, const SamplingOptions& options, std::mt19937_64& rng);

struct GenerateOptions {
  int64_t max_new_tokens = 50;
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<int32_t> eos;  // a sequence stops after any of these tokens
};

// The end-of-sequence ids of a model's config.json (eos_token_id: an integer or a list), if any.
std::vector<int32_t> EosTokens(const nn::CausalLM& model);

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // the new tokens of each sequence
  // Executables the in-memory cache lacked (compiled, or loaded from the disk cache): for the
  // prompt, and for every later token together.
  int64_t prefill_compiles = 0;
  int64_t decode_compiles = 0;
  double prefill_s = 0, decode_s = 0;
  int64_t decoded = 0;                        // decode steps run
};

// Generates after each prompt (all of one length, at least 1 token), as one batch. New tokens
// stop at max_new_tokens, after an `eos` token (for each sequence), or when the model's context
// is full.
// Throws axle::Error for an empty or ragged prompt list or a token outside the vocabulary.
GenerateResult GenerateTokens(nn::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateOptions& options);

}  // namespace axle::train
