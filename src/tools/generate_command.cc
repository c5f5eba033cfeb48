// axle generate --init DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N]
//               [--temperature T --top-k K --top-p P --seed S] [--print-ids]
// Text from a causal LM with a KV cache (src/train/generate.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "axle/metrics.h"
#include "axle/nn.h"
#include "core/error.h"
#include "text/tokenizer.h"
#include "tools/commands.h"
#include "train/generate.h"

namespace axle::tools {
namespace {

struct GenerateFlags {
  std::string init;
  std::string prompt;
  std::string prompt_ids;
  std::string tokenizer;
  train::GenerateOptions generate;
  bool print_ids = false;
  std::string backend;
};

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      Fail("--prompt-ids {}: '{}' is not a token id (comma-separated non-negative integers, e.g. 1,2,3)", text, item);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) Fail("--prompt-ids is empty: give at least one token id");
  return ids;
}

void Run(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_ids.empty())
    Fail("axle generate: pass exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  if (!f.backend.empty()) set_backend(f.backend);
  nn::LoadOptions load;
  load.convert_dtype = true;
  std::shared_ptr<nn::CausalLM> model = nn::LoadCausalLM(f.init, load);
  // The directory's tokenizer turns text into ids and back; a byte-level model (vocab <= 256)
  // without one reads bytes.
  std::unique_ptr<text::Tokenizer> tok;
  if (!f.tokenizer.empty()) {
    tok = text::LoadTokenizer(f.tokenizer);
  } else if (std::filesystem::is_directory(f.init) && text::FindTokenizerFile(f.init)) {
    tok = text::LoadTokenizer(f.init);
  }
  const bool bytes = !tok && model->vocab_size() <= 256;
  std::vector<int32_t> prompt;
  if (!f.prompt.empty()) {
    if (tok) {
      prompt = tok->Encode(f.prompt);
    } else if (bytes) {
      for (unsigned char c : f.prompt) prompt.push_back(c);
    } else {
      Fail("--prompt: {} has a vocabulary of {} tokens and no tokenizer.json or tokenizer.model; pass --tokenizer "
           "FILE, or the prompt's token ids with --prompt-ids (and read the output with --print-ids)",
           f.init, model->vocab_size());
    }
  } else {
    prompt = ParseIds(f.prompt_ids);
  }
  train::GenerateOptions g = f.generate;
  g.eos = train::EosTokens(*model);
  const train::GenerateResult r = train::GenerateTokens(*model, {prompt}, g);
  const std::vector<int32_t>& out = r.tokens[0];
  if (f.print_ids || (!bytes && !tok)) {
    std::cout << fmt::format("{}\n", fmt::join(out, ","));
  } else if (tok) {
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), out.begin(), out.end());
    std::cout << tok->Decode(all) << "\n";
  } else {
    std::string text(f.prompt);
    for (int32_t t : out) text += static_cast<char>(t);
    std::cout << text << "\n";
  }
  std::cerr << fmt::format(
      "prefill: {} tokens in {:.3f} s ({} executables built); decode: {} tokens in {:.3f} s, {:.1f} tokens/s ({} "
      "executables built)\n",
      prompt.size(), r.prefill_s, r.prefill_compiles, r.decoded, r.decode_s,
      r.decode_s > 0 ? static_cast<double>(r.decoded) / r.decode_s : 0.0, r.decode_compiles);
}

}  // namespace

void AddGenerateCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto f = std::make_shared<GenerateFlags>();
  f->generate.sampling = {.temperature = 1.0, .top_k = 50, .top_p = 1.0};  // transformers' sampling defaults
  CLI::App* sub = app.add_subcommand(
      "generate", "Generate from a Hugging Face model directory (GPT-2, Llama, Mistral, Qwen2) with a KV cache");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--init", f->init, "The model: a Hugging Face directory or .safetensors file")->required();
  sub->add_option("--prompt", f->prompt, "The prompt as text (the directory's tokenizer, or bytes)");
  sub->add_option("--tokenizer", f->tokenizer, "tokenizer.json or tokenizer.model (default: the --init directory's)");
  sub->add_option("--prompt-ids", f->prompt_ids, "The prompt as token ids, comma-separated: 1,2,3");
  sub->add_option("--max-new-tokens", f->generate.max_new_tokens, "Tokens to generate at most")->check(kPositive);
  sub->add_option("--temperature", f->generate.sampling.temperature, "Sampling temperature; 0 = greedy")
      ->check(kNonNegative);
  sub->add_option("--top-k", f->generate.sampling.top_k, "Sample among the k most likely tokens (0 = all)")
      ->check(kNonNegative);
  sub->add_option("--top-p", f->generate.sampling.top_p, "Nucleus sampling: the smallest set of probability p")
      ->check(InRange(0.0, 1.0));
  sub->add_option("--seed", f->generate.seed, "Seed of the sampling");
  sub->add_flag("--print-ids", f->print_ids, "Print the new tokens' ids instead of text");
  sub->add_option("--backend", f->backend, "compiled | cpu | interpreter (default: AXLE_BACKEND, compiled)");
  commands.emplace_back(sub, [f] { Run(*f); });
}

}  // namespace axle::tools
