// GPT-2 (Hugging Face's GPT2Model / GPT2LMHeadModel layout), its config and its loader.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "axle/nn.h"
#include "checkpoint/model_dir.h"
#include "core/error.h"
#include "core/file.h"
#include "nn/loading.h"
#include "nn/util.h"

namespace axle::nn {

// ---- Config -----------------------------------------------------------------------------------

void GPT2Config::Validate() const {
  auto positive = [&](const char* what, int64_t v) {
    if (v <= 0) Fail("GPT2Config: {} must be positive, not {} ({})", what, v, ToString());
  };
  positive("vocab_size", vocab_size);
  positive("n_positions", n_positions);
  positive("n_embd", n_embd);
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  if (n_embd % n_head != 0) {
    Fail("GPT2Config: n_embd {} is not divisible by n_head {}; pick a head count that divides it",
         n_embd, n_head);
  }
  if (!(layer_norm_epsilon > 0)) Fail("GPT2Config: layer_norm_epsilon must be positive");
  if (!(dropout >= 0 && dropout < 1)) Fail("GPT2Config: dropout must be in [0, 1), not {}", dropout);
}

std::string GPT2Config::ToString() const {
  return fmt::format(
      "GPT2Config(vocab_size={}, n_positions={}, n_embd={}, n_layer={}, n_head={}, "
      "layer_norm_epsilon={}, dropout={})",
      vocab_size, n_positions, n_embd, n_layer, n_head, layer_norm_epsilon, dropout);
}

GPT2Config GPT2Config::Preset(const std::string& name) {
  GPT2Config c;
  if (name == "tiny") {
    c.vocab_size = 256, c.n_positions = 128, c.n_embd = 64, c.n_layer = 2, c.n_head = 4;
  } else if (name == "small") {
    c.vocab_size = 512, c.n_positions = 256, c.n_embd = 128, c.n_layer = 2, c.n_head = 4;
  } else if (name == "124m") {
    c.vocab_size = 50257, c.n_positions = 1024, c.n_embd = 768, c.n_layer = 12, c.n_head = 12;
  } else {
    Fail("unknown GPT-2 preset '{}'; the presets are \"tiny\", \"small\" and \"124m\"", name);
  }
  return c;
}

GPT2Config GPT2Config::FromJson(const nlohmann::json& json, std::string_view source) {
  if (!json.is_object()) Fail("{}: a GPT-2 config must be a JSON object", source);
  auto find = [&](const char* key) -> const nlohmann::json* {
    auto it = json.find(key);
    return it == json.end() || it->is_null() ? nullptr : &*it;
  };
  auto integer = [&](const char* key, const char* alias = nullptr) -> int64_t {
    const nlohmann::json* v = find(key);
    if (!v && alias) v = find(alias);
    if (!v) {
      Fail("{}: the GPT-2 config lacks \"{}\"{}", source, key,
           alias ? fmt::format(" (or \"{}\")", alias) : std::string());
    }
    if (!v->is_number_integer()) Fail("{}: \"{}\" must be an integer, not {}", source, key, v->dump());
    return v->get<int64_t>();
  };
  auto number = [&](const char* key, double fallback) -> double {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) Fail("{}: \"{}\" must be a number, not {}", source, key, v->dump());
    return v->get<double>();
  };
  if (const auto* mt = find("model_type"); mt && !(mt->is_string() && *mt == "gpt2")) {
    Fail("{}: model_type is {}, not \"gpt2\"; LoadGPT2 reads GPT-2 checkpoints only", source,
         mt->dump());
  }
  if (const auto* act = find("activation_function")) {
    if (!act->is_string() || (*act != "gelu_new" && *act != "gelu_pytorch_tanh")) {
      Fail("{}: activation_function {} is not supported; Axle's GPT-2 uses GELU with the tanh "
           "approximation (\"gelu_new\")",
           source, act->dump());
    }
  }
  GPT2Config c;
  c.vocab_size = integer("vocab_size");
  c.n_positions = integer("n_positions", "n_ctx");
  c.n_embd = integer("n_embd");
  c.n_layer = integer("n_layer");
  c.n_head = integer("n_head");
  c.layer_norm_epsilon = number("layer_norm_epsilon", 1e-5);
  c.dropout = number("resid_pdrop", 0.0);
  if (const auto* inner = find("n_inner")) {
    if (!inner->is_number_integer() || inner->get<int64_t>() != 4 * c.n_embd) {
      Fail("{}: n_inner {} is not supported; Axle's GPT-2 MLP is 4 * n_embd = {} wide", source,
           inner->dump(), 4 * c.n_embd);
    }
  }
  try {
    c.Validate();
  } catch (const Error& e) {
    Fail("{}: {}", source, e.message());
  }
  return c;
}

nlohmann::json GPT2Config::ToJson() const {
  return {{"model_type", "gpt2"},
          {"architectures", {"GPT2LMHeadModel"}},
          {"vocab_size", vocab_size},
          {"n_positions", n_positions},
          {"n_ctx", n_positions},
          {"n_embd", n_embd},
          {"n_layer", n_layer},
          {"n_head", n_head},
          {"layer_norm_epsilon", layer_norm_epsilon},
          {"activation_function", "gelu_new"},
          {"resid_pdrop", dropout},
          {"embd_pdrop", dropout},
          {"attn_pdrop", dropout}};
}

GPT2Config GPT2Config::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open GPT-2 config '{}'", path);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail("{}: invalid JSON: {}", path, e.what());
  }
  return FromJson(json, path);
}

// ---- Modules ----------------------------------------------------------------------------------

MLP::MLP(const GPT2Config& config, uint64_t seed) : Module("MLP") {
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  c_fc = register_module("c_fc", std::make_shared<Conv1D>(config.n_embd, 4 * config.n_embd, 0.02,
                                                          DeriveSeed(seed, "c_fc")));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(4 * config.n_embd, config.n_embd,
                                                              proj_std, DeriveSeed(seed, "c_proj")));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
}

Tensor MLP::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return (*dropout)((*c_proj)(gelu((*c_fc)(x), "tanh")));
}

CausalSelfAttention::CausalSelfAttention(const GPT2Config& config, uint64_t seed)
    : Module("CausalSelfAttention"), n_head(config.n_head), n_embd(config.n_embd) {
  config.Validate();
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  c_attn = register_module("c_attn", std::make_shared<Conv1D>(n_embd, 3 * n_embd, 0.02,
                                                              DeriveSeed(seed, "c_attn")));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(n_embd, n_embd, proj_std,
                                                              DeriveSeed(seed, "c_proj")));
  attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(config.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(config.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  if (x.dim() != 3 || x.size(2) != n_embd) {
    Fail("{} (CausalSelfAttention): input x must be [B, T, {}], got shape {}", scope_name(),
         n_embd, ShapeString(x.sizes()));
  }
  const int64_t B = x.size(0), T = x.size(1), D = n_embd / n_head;
  std::vector<Tensor> qkv = (*c_attn)(x).split(n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, D}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor y;
  if (is_training() && attn_dropout->p > 0) {
    // The explicit form, so that dropout can act on the attention probabilities (as HF's).
    Tensor att = q.matmul(k.mT()) * (1.0 / std::sqrt(static_cast<double>(D)));
    Tensor future = arange(T).unsqueeze(1) < arange(T).unsqueeze(0);  // [T, T]: key after query
    att = softmax(att.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    y = (*attn_dropout)(att).matmul(v);
  } else {
    y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true);
  }
  y = y.transpose(1, 2).reshape({B, T, n_embd});
  return (*resid_dropout)((*c_proj)(y));
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& blocked) const {
  ModuleScope scope(*this);
  const int64_t B = x.size(0), T = x.size(1), D = n_embd / n_head;
  std::vector<Tensor> qkv = (*c_attn)(x).split(n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, D}).transpose(1, 2); };
  Tensor att = heads(qkv[0]).matmul(heads(qkv[1]).mT()) * (1.0 / std::sqrt(static_cast<double>(D)));
  att = softmax(att.masked_fill(blocked, -std::numeric_limits<double>::infinity()), -1);
  Tensor y = (*attn_dropout)(att).matmul(heads(qkv[2])).transpose(1, 2).reshape({B, T, n_embd});
  return (*resid_dropout)((*c_proj)(y));
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache, const Tensor& pos,
                                           const Tensor& blocked) const {
  ModuleScope scope(*this);
  const int64_t B = x.size(0), T = x.size(1), D = n_embd / n_head;
  std::vector<Tensor> qkv = (*c_attn)(x).split(n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, D}).transpose(1, 2); };
  Tensor y = CachedAttention(heads(qkv[0]).unsqueeze(2), heads(qkv[1]), heads(qkv[2]), k_cache, v_cache, pos,
                             blocked);  // [B, H, 1, T, D]
  return (*c_proj)(y.squeeze(2).transpose(1, 2).reshape({B, T, n_embd}));
}

GPT2Block::GPT2Block(const GPT2Config& config, uint64_t seed) : Module("GPT2Block") {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_epsilon));
  attn = register_module("attn",
                         std::make_shared<CausalSelfAttention>(config, DeriveSeed(seed, "attn")));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_epsilon));
  mlp = register_module("mlp", std::make_shared<MLP>(config, DeriveSeed(seed, "mlp")));
}

Tensor GPT2Block::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  Tensor h = x + (*attn)((*ln_1)(x));
  return h + (*mlp)((*ln_2)(h));
}

Tensor GPT2Block::forward(const Tensor& x, const Tensor& blocked) const {
  ModuleScope scope(*this);
  Tensor h = x + attn->forward((*ln_1)(x), blocked);
  return h + (*mlp)((*ln_2)(h));
}

Tensor GPT2Block::forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache, const Tensor& pos,
                                 const Tensor& blocked) const {
  ModuleScope scope(*this);
  Tensor h = x + attn->forward_cached((*ln_1)(x), k_cache, v_cache, pos, blocked);
  return h + (*mlp)((*ln_2)(h));
}

GPT2::GPT2(const GPT2Config& config, uint64_t seed, bool init, bool materialize) : CausalLM("GPT2"), config_(config) {
  config_.Validate();
  wte = register_module("wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd,
                                                           DeriveSeed(seed, "wte"), 0.02));
  wpe = register_module("wpe", std::make_shared<Embedding>(config.n_positions, config.n_embd,
                                                           DeriveSeed(seed, "wpe"), 0.02));
  drop = register_module("drop", std::make_shared<Dropout>(config.dropout));
  h = register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks.push_back(h->push_back(
        std::make_shared<GPT2Block>(config, DeriveSeed(seed, fmt::format("h.{}", i)))));
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_epsilon));
  if (!init) {
    NoGradGuard no_grad;
    for (auto& p : parameters()) p.zero_();
  } else if (materialize) {
    sync();  // the parameters become device buffers (leaves of the first training step)
  }
}

Tensor GPT2::forward(const Tensor& idx) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype())) {
    Fail("GPT2: idx must be an integer tensor [B, T], got {}", idx.type_string());
  }
  const int64_t T = idx.size(1);
  if (T > config_.n_positions) {
    Fail("GPT2: sequence length {} (idx {}) exceeds n_positions {}; use shorter sequences",
         T, idx.type_string(), config_.n_positions);
  }
  Tensor x = (*drop)((*wte)(idx) + (*wpe)(arange(T)));
  for (const auto& block : blocks) x = Block([&](const Tensor& in) { return (*block)(in); }, x);
  x = (*ln_f)(x);
  NameScope head("lm_head");
  return x.matmul(wte->weight.t());  // tied head: logits = x @ wte^T
}

nlohmann::json GPT2::config_json() const { return config_.ToJson(); }

KVCache GPT2::make_cache(int64_t batch, int64_t max_len) const {
  if (batch < 1 || max_len < 1 || max_len > config_.n_positions)
    Fail("GPT2: a KV cache needs batch >= 1 and 1 <= max_len <= n_positions {}, not batch {}, max_len {}",
         config_.n_positions, batch, max_len);
  KVCache cache;
  cache.batch = batch;
  cache.max_len = max_len;
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    cache.keys.push_back(zeros({batch, config_.n_head, max_len, config_.head_dim()}));
    cache.values.push_back(zeros({batch, config_.n_head, max_len, config_.head_dim()}));
  }
  return cache;
}

Tensor GPT2::forward_packed(const Tensor& idx, const Tensor& positions, const Tensor& segments) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype()) || positions.sizes() != idx.sizes() ||
      segments.sizes() != idx.sizes() || !IsInteger(positions.dtype()) || !IsInteger(segments.dtype()))
    Fail("GPT2: forward_packed needs integer idx, positions and segments of one shape [B, T], got {}, {}, {}",
         idx.type_string(), positions.type_string(), segments.type_string());
  const int64_t T = idx.size(1);
  if (T > config_.n_positions) Fail("GPT2: sequence length {} exceeds n_positions {}", T, config_.n_positions);
  Tensor blocked;
  {
    NameScope mask("mask");
    Tensor query = arange(T).unsqueeze(1), key = arange(T).unsqueeze(0);
    blocked = ((key > query).unsqueeze(0) || (segments.unsqueeze(2) != segments.unsqueeze(1))).unsqueeze(1);
  }
  Tensor x = (*drop)((*wte)(idx) + (*wpe)(positions));
  for (const auto& block : blocks) x = Block([&](const Tensor& in) { return block->forward(in, blocked); }, x);
  x = (*ln_f)(x);
  NameScope head("lm_head");
  return x.matmul(wte->weight.t());
}

Tensor GPT2::forward_cached(const Tensor& idx, KVCache& cache) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype()))
    Fail("GPT2: idx must be an integer tensor [B, T], got {}", idx.type_string());
  const int64_t T = idx.size(1);
  CheckCache("GPT2", cache, idx.size(0), T, config_.n_layer);
  const Tensor pos = from_vector<int64_t>({cache.length}, {}, DType::kI64);
  const Tensor blocked = CacheMask(T, cache.max_len, pos);
  Tensor x = (*drop)((*wte)(idx) + (*wpe)(arange(T) + pos));
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward_cached(x, cache.keys[l], cache.values[l], pos, blocked);
  x = (*ln_f)(x);
  cache.length += T;
  NameScope head("lm_head");
  return x.matmul(wte->weight.t());
}

// ---- Loading ----------------------------------------------------------------------------------

namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

const ir::Literal* Find(const checkpoint::TensorMap& m, std::string_view name) {
  for (const auto& [n, lit] : m) {
    if (n == name) return &lit;
  }
  return nullptr;
}

GPT2Config InferConfig(const checkpoint::TensorMap& tensors, const std::string& path,
                       const LoadGPT2Options& options) {
  const ir::Literal* wte = Find(tensors, "wte.weight");
  const ir::Literal* wpe = Find(tensors, "wpe.weight");
  if (!wte || !wpe || wte->shape().rank() != 2 || wpe->shape().rank() != 2) {
    Fail("{}: no config.json, and the config cannot be inferred: a GPT-2 checkpoint needs "
         "2-D wte.weight and wpe.weight tensors{}",
         path, wte ? "" : " (wte.weight is missing)");
  }
  GPT2Config c;
  c.vocab_size = wte->shape().dim(0);
  c.n_embd = wte->shape().dim(1);
  c.n_positions = wpe->shape().dim(0);
  int64_t n_layer = 0;
  for (const auto& [name, lit] : tensors) {
    if (!StartsWith(name, "h.")) continue;
    const size_t dot = name.find('.', 2);
    const std::string num = name.substr(2, dot == std::string::npos ? dot : dot - 2);
    try {
      size_t used = 0;
      const int64_t i = std::stoll(num, &used);
      if (used == num.size() && i >= 0) n_layer = std::max(n_layer, i + 1);
    } catch (const std::exception&) {
    }
  }
  c.n_layer = n_layer;
  // Note [Saved files know their model]: the head count is not in any tensor's shape, and a
  // guess (n_embd / 64) once trained a different model in silence. Ask for it instead.
  if (!options.n_head)
    Fail("{}: a bare safetensors file without a config: the tensor shapes give vocab_size {}, n_positions {}, "
         "n_embd {} and n_layer {}, but not n_head. Pass the model directory (config.json beside "
         "model.safetensors), or put a config.json with \"n_head\" next to the weights and pass that directory "
         "(from C++: LoadGPT2Options::n_head)",
         path, c.vocab_size, c.n_positions, c.n_embd, c.n_layer);
  c.n_head = *options.n_head;
  try {
    c.Validate();
  } catch (const Error& e) {
    Fail("{}: the config inferred from the tensor shapes is invalid: {}", path, e.message());
  }
  return c;
}

}  // namespace

std::string SaveGPT2(const GPT2& model, const std::string& path) { return SaveCausalLM(model, path); }

std::shared_ptr<GPT2> LoadGPT2(const std::string& path, const LoadGPT2Options& options) {
  return LoadGPT2(checkpoint::LoadModelDir(path), path, options);
}

std::shared_ptr<GPT2> LoadGPT2(checkpoint::ModelDir dir, const std::string& path, const LoadGPT2Options& options) {
  checkpoint::TensorMap tensors;
  std::optional<ir::Literal> lm_head;
  for (auto& [raw_name, lit] : dir.tensors) {
    std::string name = raw_name;
    if (StartsWith(name, "transformer.")) name = name.substr(12);
    if (name == "lm_head.weight") {
      lm_head = std::move(lit);
      continue;
    }
    // Old checkpoints saved the causal mask buffers (non-persistent in today's transformers).
    if (StartsWith(name, "h.") && (EndsWith(name, ".attn.bias") || EndsWith(name, ".attn.masked_bias"))) {
      continue;
    }
    tensors.emplace_back(std::move(name), std::move(lit));
  }

  GPT2Config config;
  if (dir.config.empty()) {
    config = InferConfig(tensors, path, options);
  } else {
    config = GPT2Config::FromJson(dir.config, ConfigSource(path));
  }
  if (options.dropout) {
    config.dropout = *options.dropout;
    config.Validate();
  }
  auto model = std::make_shared<GPT2>(config, /*seed=*/0, /*init=*/false);
  if (lm_head) {
    const ir::Literal* wte = Find(tensors, "wte.weight");
    if (wte) CheckTiedHead(*lm_head, *wte, "wte.weight", path);
  }
  LoadCheckedWeights(*model, std::move(tensors), path, options.convert_dtype,
                     "LoadGPT2Options::convert_dtype = true");
  return model;
}

}  // namespace axle::nn
