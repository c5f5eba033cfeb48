// Causal language models of any family: the loss, building one from config.json, loading and
// saving Hugging Face model directories.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "axle/nn.h"
#include "checkpoint/model_dir.h"
#include "core/error.h"
#include "core/file.h"
#include "nn/loading.h"
#include "nn/util.h"

namespace axle::nn {

namespace {

bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

const ir::Literal* Find(const checkpoint::TensorMap& m, std::string_view name) {
  for (const auto& [n, lit] : m)
    if (n == name) return &lit;
  return nullptr;
}

// The model_type of `config`, or an error naming `source`. No config (a bare safetensors file
// written before Axle stored configs) and a config without model_type but with GPT-2's own keys
// (n_embd, as Axle wrote them before it had a second family) are GPT-2's.
std::string ModelType(const nlohmann::json& config, std::string_view source) {
  if (config.empty()) return "gpt2";
  if (!config.is_object()) Fail("{}: a model config must be a JSON object", source);
  auto it = config.find("model_type");
  if ((it == config.end() || it->is_null()) && config.contains("n_embd")) return "gpt2";
  if (it == config.end() || it->is_null())
    Fail("{}: the config has no \"model_type\"; Axle reads gpt2, llama, mistral and qwen2 models", source);
  if (!it->is_string()) Fail("{}: \"model_type\" must be a string, not {}", source, it->dump());
  const std::string type = it->get<std::string>();
  if (type != "gpt2" && type != "llama" && type != "mistral" && type != "qwen2")
    Fail("{}: model_type \"{}\" is not a model Axle has; it has gpt2, llama, mistral and qwen2", source, type);
  return type;
}

}  // namespace

// The mean cross-entropy of logits [B, T, V] against targets [B, T] (-100 left out).
Tensor CausalLM::Block(const std::function<Tensor(const Tensor&)>& block, const Tensor& x) const {
  return remat_ == RematPolicy::kNone ? block(x) : axle::remat(block, x, remat_);
}

Tensor CausalLM::Loss(const Tensor& logits, const Tensor& targets) const {
  const int64_t BT = targets.size(0) * targets.size(1);
  NameScope loss_scope("loss");
  return cross_entropy(logits.reshape({BT, vocab_size()}), targets.reshape({BT}));
}

void CausalLM::CheckTargets(const Tensor& idx, const Tensor& targets) const {
  if (targets.sizes() != idx.sizes() || !IsInteger(targets.dtype()))
    Fail("{}: targets {} must be integers of idx's shape {}", type_name(), targets.type_string(), idx.type_string());
}

Tensor CausalLM::forward(const Tensor& idx, const Tensor& targets) const {
  CheckTargets(idx, targets);
  ModuleScope scope(*this);
  return Loss(forward(idx), targets);
}

Tensor CachedAttention(const Tensor& q, const Tensor& k_new, const Tensor& v_new, Tensor& k_cache,
                       Tensor& v_cache, const Tensor& pos, const Tensor& blocked) {
  const Tensor zero = scalar_tensor(0, DType::kI64);
  k_cache = dynamic_update_slice(k_cache, k_new, {zero, zero, pos, zero});
  v_cache = dynamic_update_slice(v_cache, v_new, {zero, zero, pos, zero});
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor att = q.matmul(k_cache.unsqueeze(2).mT()) * scale;  // [B, KV, rep, T, L]
  att = softmax(att.masked_fill(blocked, -std::numeric_limits<double>::infinity()), -1);
  return att.matmul(v_cache.unsqueeze(2));
}

Tensor CacheMask(int64_t T, int64_t L, const Tensor& pos, int64_t window) {
  NameScope scope("cache_mask");
  const Tensor query = (arange(T) + pos).unsqueeze(1), key = arange(L).unsqueeze(0);
  Tensor blocked = key > query;
  if (window > 0) blocked = blocked || (key <= query - window);
  return blocked;
}

void CheckCache(const std::string& model, const KVCache& cache, int64_t batch, int64_t T, int64_t layers) {
  if (static_cast<int64_t>(cache.keys.size()) != layers || cache.values.size() != cache.keys.size())
    Fail("{}: the KV cache has {} layers, the model {}; make it with this model's make_cache", model,
         cache.keys.size(), layers);
  if (batch != cache.batch)
    Fail("{}: idx has batch {} but the KV cache was made for {}", model, batch, cache.batch);
  if (cache.length + T > cache.max_len)
    Fail("{}: {} more positions after {} exceed the KV cache's {}; make a longer cache", model, T, cache.length,
         cache.max_len);
}

Tensor CausalLM::loss_packed(const Tensor& idx, const Tensor& targets, const Tensor& positions,
                             const Tensor& segments) const {
  CheckTargets(idx, targets);
  ModuleScope scope(*this);
  return Loss(forward_packed(idx, positions, segments), targets);
}

std::string ConfigSource(const std::string& path) {
  return std::filesystem::is_directory(path) ? (std::filesystem::path(path) / "config.json").string()
                                             : path + " (the config in its __metadata__)";
}

std::shared_ptr<CausalLM> MakeCausalLM(const nlohmann::json& config, std::string_view source, uint64_t seed,
                                       bool init, bool materialize) {
  const std::string type = ModelType(config, source);
  if (type == "gpt2") return std::make_shared<GPT2>(GPT2Config::FromJson(config, source), seed, init, materialize);
  return std::make_shared<Llama>(LlamaConfig::FromJson(config, source), seed, init, materialize);
}

void CheckTiedHead(const ir::Literal& head, const ir::Literal& embedding, const std::string& embedding_name,
                   const std::string& path) {
  if (!(head.type() == embedding.type() && head == embedding))
    Fail("{}: lm_head.weight ({}) differs from {} ({}), but the model ties its head to the token embedding "
         "(tie_word_embeddings); an untied head cannot be loaded into it",
         path, head.type().ToString(), embedding_name, embedding.type().ToString());
}

void LoadCheckedWeights(Module& model, checkpoint::TensorMap tensors, const std::string& path, bool convert_dtype,
                        const char* convert_hint) {
  std::vector<std::pair<std::string, ir::TensorType>> expected;
  for (const auto& [name, t] : model.state_dict()) {
    ir::TensorType type(t.dtype(), Shape(t.sizes()));
    if (convert_dtype)
      if (const ir::Literal* lit = Find(tensors, name); lit && IsFloat(lit->dtype())) type.dtype = lit->dtype();
    expected.emplace_back(name, type);
  }
  try {
    checkpoint::CheckTensors(tensors, expected, path);
  } catch (const Error& e) {
    bool dtype_only_mismatch = !convert_dtype && tensors.size() == expected.size();
    for (const auto& [name, type] : expected) {
      const ir::Literal* lit = Find(tensors, name);
      dtype_only_mismatch = dtype_only_mismatch && lit && lit->shape() == type.shape;
    }
    if (!dtype_only_mismatch) throw;
    Fail("{}\n(to convert floating-point weights to the model's dtype, pass {})", e.message(), convert_hint);
  }
  StateDict state;
  for (auto& [name, lit] : tensors) state.emplace_back(name, from_literal(std::move(lit)));
  model.load_state_dict(state, /*strict=*/true, convert_dtype);
  sync();
}

std::shared_ptr<Llama> LoadLlama(checkpoint::ModelDir dir, const std::string& path, bool convert_dtype) {
  const LlamaConfig config = LlamaConfig::FromJson(dir.config, ConfigSource(path));
  auto model = std::make_shared<Llama>(config, /*seed=*/0, /*init=*/false);
  checkpoint::TensorMap tensors;
  std::optional<ir::Literal> lm_head;
  for (auto& [name, lit] : dir.tensors) {
    // Checkpoints of older transformers saved the rotary inverse frequencies (recomputed here).
    if (EndsWith(name, ".rotary_emb.inv_freq")) continue;
    if (config.tie_word_embeddings && name == "lm_head.weight") {
      lm_head = std::move(lit);
      continue;
    }
    tensors.emplace_back(name, std::move(lit));
  }
  if (lm_head)
    if (const ir::Literal* embed = Find(tensors, "model.embed_tokens.weight"))
      CheckTiedHead(*lm_head, *embed, "model.embed_tokens.weight", path);
  LoadCheckedWeights(*model, std::move(tensors), path, convert_dtype, "LoadOptions::convert_dtype = true");
  return model;
}

std::shared_ptr<CausalLM> LoadCausalLM(const std::string& path, const LoadOptions& options) {
  checkpoint::ModelDir dir = checkpoint::LoadModelDir(path);
  const std::string type = ModelType(dir.config, ConfigSource(path));
  if (type == "gpt2") {
    LoadGPT2Options gpt2;
    gpt2.convert_dtype = options.convert_dtype;
    gpt2.dropout = options.dropout;
    gpt2.n_head = options.n_head;
    return LoadGPT2(std::move(dir), path, gpt2);
  }
  return LoadLlama(std::move(dir), path, options.convert_dtype);
}

std::string SaveCausalLM(const CausalLM& model, const std::string& path) {
  // As save_pretrained: the directory is made when it does not exist.
  if (const std::filesystem::path dir = std::filesystem::path(path).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) Fail("cannot create the directory '{}' for {}: {}", dir.string(), path, ec.message());
  }
  checkpoint::TensorMap tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t.to_literal());
  const nlohmann::json config = model.config_json();
  checkpoint::SaveSafetensors(path, tensors, {{"format", "pt"}, {checkpoint::kConfigMetadataKey, config.dump()}});
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string config_path =
      (dir.empty() ? std::filesystem::path("config.json") : dir / "config.json").string();
  WriteFileAtomically(config_path, config.dump(2) + "\n", "config.json");
  return config_path;
}

}  // namespace axle::nn
