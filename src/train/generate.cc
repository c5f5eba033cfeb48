// Generation with a KV cache (generate.h).
#include "train/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "axle/metrics.h"
#include "core/error.h"

namespace axle::train {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int32_t SampleToken(std::span<const float> logits, const SamplingOptions& o, std::mt19937_64& rng) {
  const auto n = static_cast<int32_t>(logits.size());
  if (o.temperature <= 0)  // greedy: the first of the largest
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates by decreasing logit (ties to the lower id), scaled by the temperature.
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  size_t keep = order.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), by_logit);
  order.resize(keep);
  std::vector<double> p(keep);
  const double top = logits[order[0]] / o.temperature;
  double z = 0;
  for (size_t i = 0; i < keep; ++i) z += p[i] = std::exp(logits[order[i]] / o.temperature - top);
  if (o.top_p < 1) {  // the smallest prefix whose probability reaches top_p (at least one token)
    double mass = 0;
    size_t cut = 0;
    while (cut < keep && mass < o.top_p * z) mass += p[cut++];
    keep = std::max<size_t>(cut, 1);
    z = 0;
    for (size_t i = 0; i < keep; ++i) z += p[i];
  }
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * z;
  for (size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0) return order[i];
  }
  return order[keep - 1];
}

std::vector<int32_t> EosTokens(const nn::CausalLM& model) {
  const nlohmann::json config = model.config_json();
  std::vector<int32_t> eos;
  if (auto it = config.find("eos_token_id"); it != config.end()) {
    if (it->is_number_integer()) eos.push_back(it->get<int32_t>());
    if (it->is_array())
      for (const auto& e : *it)
        if (e.is_number_integer()) eos.push_back(e.get<int32_t>());
  }
  return eos;
}

GenerateResult GenerateTokens(nn::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateOptions& o) {
  if (prompts.empty() || prompts[0].empty()) Fail("generate: the prompt is empty; give at least one token");
  const auto P = static_cast<int64_t>(prompts[0].size()), B = static_cast<int64_t>(prompts.size());
  std::vector<int32_t> flat;
  for (const auto& p : prompts) {
    if (static_cast<int64_t>(p.size()) != P) Fail("generate: the prompts of one batch must have one length");
    for (int32_t t : p) {
      if (t < 0 || t >= model.vocab_size())
        Fail("generate: prompt token {} is not in the model's vocabulary [0, {})", t, model.vocab_size());
      flat.push_back(t);
    }
  }
  if (P > model.max_positions())
    Fail("generate: the prompt's {} tokens exceed the model's context of {} positions", P, model.max_positions());
  const int64_t new_tokens = std::min(o.max_new_tokens, model.max_positions() - P);
  GenerateResult r;
  r.tokens.assign(static_cast<size_t>(B), {});
  if (new_tokens <= 0) return r;

  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  std::mt19937_64 rng(o.seed);
  const int64_t vocab = model.vocab_size();
  nn::KVCache cache = model.make_cache(B, P + new_tokens);
  std::vector<bool> done(static_cast<size_t>(B), false);
  Tensor idx = from_vector<int32_t>(flat, {B, P}, DType::kI32);
  // Executables a step needed that the in-memory cache did not have: compiled, or loaded from disk.
  auto built = [] { return metrics().compiles + metrics().disk_hits; };
  int64_t compiles = built();
  Clock::time_point t0 = Clock::now();
  for (int64_t k = 0; k < new_tokens; ++k) {
    // The last position's logits only go to the host.
    Tensor logits = model.forward_cached(idx, cache);
    logits = logits.select(1, logits.size(1) - 1).to(DType::kF32);  // [B, vocab]; a bf16 model's widened
    const std::vector<float> all = logits.to_vector<float>();
    if (k == 0) {
      r.prefill_s = Since(t0);
      r.prefill_compiles = built() - compiles;
      compiles = built();
      t0 = Clock::now();
    } else {
      ++r.decoded;
    }
    std::vector<int32_t> next(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const auto i = static_cast<size_t>(b);
      next[i] = SampleToken(std::span<const float>(all).subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab)),
                            o.sampling, rng);
      if (!done[i]) r.tokens[i].push_back(next[i]);
      if (std::find(o.eos.begin(), o.eos.end(), next[i]) != o.eos.end()) done[i] = true;
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (k + 1 < new_tokens) idx = from_vector<int32_t>(next, {B, 1}, DType::kI32);
  }
  r.decode_s = Since(t0);
  r.decode_compiles = built() - compiles;
  model.train(was_training);
  return r;
}

}  // namespace axle::train
