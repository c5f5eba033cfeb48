// The Llama family (Hugging Face's LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM): the
// config, the modules and rotary embeddings.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "axle/nn.h"
#include "core/error.h"
#include "nn/util.h"

namespace axle::nn {

// ---- Config -----------------------------------------------------------------------------------

namespace {

// Reads config.json fields, each error naming the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string_view source) : json_(json), source_(source) {}

  const nlohmann::json* find(const char* key) const {
    auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) Fail("{}: the {} config lacks \"{}\"; add it to config.json", source_, family(), key);
    return integer(key, *v);
  }
  int64_t integer(const char* key, int64_t fallback) const {
    const nlohmann::json* v = find(key);
    return v ? integer(key, *v) : fallback;
  }
  double number(const char* key, double fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) Fail("{}: \"{}\" must be a number, not {}", source_, key, v->dump());
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) Fail("{}: \"{}\" must be true or false, not {}", source_, key, v->dump());
    return v->get<bool>();
  }
  std::string family() const {
    const nlohmann::json* t = find("model_type");
    return t && t->is_string() ? t->get<std::string>() : "llama";
  }

 private:
  int64_t integer(const char* key, const nlohmann::json& v) const {
    if (!v.is_number_integer()) Fail("{}: \"{}\" must be an integer, not {}", source_, key, v.dump());
    return v.get<int64_t>();
  }
  const nlohmann::json& json_;
  std::string_view source_;
};

// The config.json keys LlamaConfig models (the rest go to `extra`).
constexpr const char* kModeledKeys[] = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
    "rope_theta", "rope_scaling", "attention_bias", "mlp_bias", "tie_word_embeddings", "sliding_window",
    "use_sliding_window", "attention_dropout", "initializer_range", "hidden_act", "architectures"};

const char* Architecture(const std::string& model_type) {
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

}  // namespace

void LlamaConfig::Validate() const {
  auto positive = [&](const char* what, int64_t v) {
    if (v <= 0) Fail("LlamaConfig: {} must be positive, not {} ({})", what, v, ToString());
  };
  if (model_type != "llama" && model_type != "mistral" && model_type != "qwen2")
    Fail("LlamaConfig: model_type \"{}\" is not one of llama, mistral, qwen2", model_type);
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("max_position_embeddings", max_position_embeddings);
  if (num_attention_heads % num_key_value_heads != 0)
    Fail("LlamaConfig: num_attention_heads {} is not a multiple of num_key_value_heads {}: grouped-query "
         "attention shares each key/value head among a whole number of query heads",
         num_attention_heads, num_key_value_heads);
  if (head_dim % 2 != 0) Fail("LlamaConfig: head_dim {} must be even (rotary embeddings rotate pairs)", head_dim);
  if (!(rms_norm_eps > 0)) Fail("LlamaConfig: rms_norm_eps must be positive, not {}", rms_norm_eps);
  if (!(rope_theta > 0)) Fail("LlamaConfig: rope_theta must be positive, not {}", rope_theta);
  if (sliding_window < 0) Fail("LlamaConfig: sliding_window must not be negative (0 = off), not {}", sliding_window);
  if (!(attention_dropout >= 0 && attention_dropout < 1))
    Fail("LlamaConfig: attention_dropout must be in [0, 1), not {}", attention_dropout);
  const RopeScaling& r = rope_scaling;
  if (r.type != "default" && r.type != "linear" && r.type != "llama3")
    Fail("LlamaConfig: rope_scaling type \"{}\" is not supported; Axle has default, linear and llama3", r.type);
  if (r.type != "default" && !(r.factor > 0))
    Fail("LlamaConfig: rope_scaling factor must be positive, not {}", r.factor);
  if (r.type == "llama3" && (!(r.high_freq_factor > r.low_freq_factor) || !(r.low_freq_factor > 0) ||
                             r.original_max_position_embeddings <= 0))
    Fail("LlamaConfig: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
         "original_max_position_embeddings (got {}, {}, {})",
         r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings);
}

std::string LlamaConfig::ToString() const {
  std::string rope = fmt::format("rope_theta={}", rope_theta);
  if (rope_scaling.type != "default") rope += fmt::format(", rope_scaling={} x{}", rope_scaling.type, rope_scaling.factor);
  return fmt::format(
      "{}(vocab_size={}, hidden_size={}, intermediate_size={}, num_hidden_layers={}, num_attention_heads={}, "
      "num_key_value_heads={}, head_dim={}, max_position_embeddings={}, {}{}{}{})",
      Architecture(model_type), vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
      num_key_value_heads, head_dim, max_position_embeddings, rope,
      tie_word_embeddings ? ", tied" : "", attention_bias ? ", qkv bias" : "",
      sliding_window > 0 ? fmt::format(", sliding_window={}", sliding_window) : "");
}

LlamaConfig LlamaConfig::Preset(const std::string& name) {
  LlamaConfig c;
  auto set = [&](int64_t vocab, int64_t d, int64_t inter, int64_t layers, int64_t heads, int64_t kv, int64_t ctx) {
    c.vocab_size = vocab, c.hidden_size = d, c.intermediate_size = inter, c.num_hidden_layers = layers;
    c.num_attention_heads = heads, c.num_key_value_heads = kv, c.head_dim = d / heads;
    c.max_position_embeddings = ctx;
  };
  if (name == "tiny") {
    set(256, 64, 176, 2, 4, 2, 256);
  } else if (name == "small") {
    set(512, 128, 352, 4, 4, 2, 512);
  } else if (name == "bench") {
    set(32000, 2048, 5632, 16, 32, 8, 2048);
  } else if (name == "tinyllama-1.1b") {
    set(32000, 2048, 5632, 22, 32, 4, 2048);
    c.rms_norm_eps = 1e-5;
  } else {
    Fail("unknown Llama preset '{}'; the presets are \"tiny\", \"small\", \"bench\" and \"tinyllama-1.1b\"", name);
  }
  return c;
}

LlamaConfig LlamaConfig::FromJson(const nlohmann::json& json, std::string_view source) {
  if (!json.is_object()) Fail("{}: a model config must be a JSON object", source);
  ConfigReader r(json, source);
  LlamaConfig c;
  const nlohmann::json* type = r.find("model_type");
  if (!type) Fail("{}: the config lacks \"model_type\" (llama, mistral or qwen2)", source);
  if (!type->is_string() || (*type != "llama" && *type != "mistral" && *type != "qwen2"))
    Fail("{}: model_type {} is not a Llama-family model (llama, mistral, qwen2)", source, type->dump());
  c.model_type = type->get<std::string>();
  if (const nlohmann::json* act = r.find("hidden_act"); act && *act != "silu")
    Fail("{}: hidden_act {} is not supported; the Llama family's MLP is SwiGLU (\"silu\")", source, act->dump());
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads <= 0)
    Fail("{}: num_attention_heads must be positive, not {}", source, c.num_attention_heads);
  c.head_dim = r.integer("head_dim", c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = r.integer("max_position_embeddings");
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_theta = r.number("rope_theta", 10000);
  c.initializer_range = r.number("initializer_range", 0.02);
  c.attention_dropout = r.number("attention_dropout", 0);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  if (c.model_type == "llama") {
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    c.mlp_bias = r.boolean("mlp_bias", false);
  } else if (c.model_type == "qwen2") {
    c.attention_bias = true;
    if (r.boolean("use_sliding_window", false))
      Fail("{}: use_sliding_window true is not supported for Qwen2 (its window applies to some layers only); "
           "set it to false",
           source);
  } else {  // mistral
    c.sliding_window = r.integer("sliding_window", 0);
  }
  if (const nlohmann::json* s = r.find("rope_scaling")) {
    if (!s->is_object()) Fail("{}: \"rope_scaling\" must be an object or null, not {}", source, s->dump());
    ConfigReader rs(*s, source);
    const nlohmann::json* t = rs.find("rope_type");
    if (!t) t = rs.find("type");
    if (!t || !t->is_string())
      Fail("{}: rope_scaling {} has no \"rope_type\" (or \"type\") string", source, s->dump());
    c.rope_scaling.type = t->get<std::string>();
    if (c.rope_scaling.type != "default" && c.rope_scaling.type != "linear" && c.rope_scaling.type != "llama3")
      Fail("{}: rope_scaling type \"{}\" is not supported; Axle has default, linear and llama3 (Hugging Face's "
           "dynamic, yarn and longrope are not implemented)",
           source, c.rope_scaling.type);
    if (c.rope_scaling.type != "default") {
      if (!rs.find("factor")) Fail("{}: rope_scaling lacks \"factor\"", source);
      c.rope_scaling.factor = rs.number("factor", 1);
    }
    if (c.rope_scaling.type == "llama3") {
      for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
        if (!rs.find(key)) Fail("{}: llama3 rope_scaling lacks \"{}\"", source, key);
      c.rope_scaling.low_freq_factor = rs.number("low_freq_factor", 1);
      c.rope_scaling.high_freq_factor = rs.number("high_freq_factor", 4);
      c.rope_scaling.original_max_position_embeddings = rs.integer("original_max_position_embeddings");
    }
  }
  nlohmann::json extra = nlohmann::json::object();
  for (const auto& [key, value] : json.items())
    if (std::find(std::begin(kModeledKeys), std::end(kModeledKeys), key) == std::end(kModeledKeys))
      extra[key] = value;
  c.extra_json = extra.dump();
  try {
    c.Validate();
  } catch (const Error& e) {
    Fail("{}: {}", source, e.message());
  }
  return c;
}

nlohmann::json LlamaConfig::ToJson() const {
  nlohmann::json j = nlohmann::json::parse(extra_json.empty() ? "{}" : extra_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) Fail("LlamaConfig: extra_json must be a JSON object's text, not '{}'", extra_json);
  j["model_type"] = model_type;
  j["architectures"] = {Architecture(model_type)};
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_dropout"] = attention_dropout;
  j["initializer_range"] = initializer_range;
  if (rope_scaling.type == "default") {
    j["rope_scaling"] = nullptr;
  } else {
    nlohmann::json s = {{"rope_type", rope_scaling.type}, {"factor", rope_scaling.factor}};
    if (rope_scaling.type == "llama3") {
      s["low_freq_factor"] = rope_scaling.low_freq_factor;
      s["high_freq_factor"] = rope_scaling.high_freq_factor;
      s["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    }
    j["rope_scaling"] = s;
  }
  if (model_type == "llama") {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = mlp_bias;
  } else if (model_type == "mistral") {
    j["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nlohmann::json();
  } else {
    j["use_sliding_window"] = false;
  }
  j["torch_dtype"] = "float32";
  return j;
}

// ---- Rotary embeddings ------------------------------------------------------------------------

namespace {

// The inverse frequencies of HF's rope init functions (_compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters, _compute_llama3_parameters), in float32 with their
// order of operations, so the angles round as theirs do.
std::vector<float> InverseFrequencies(const LlamaConfig& c) {
  const int64_t dim = c.head_dim;
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  const RopeScaling& r = c.rope_scaling;
  const auto factor = static_cast<float>(r.factor);
  if (r.type == "linear") {
    for (float& f : inv) f /= factor;
  } else if (r.type == "llama3") {
    const auto old_len = static_cast<float>(r.original_max_position_embeddings);
    const auto low = static_cast<float>(r.low_freq_factor), high = static_cast<float>(r.high_freq_factor);
    const float low_freq_wavelen = old_len / low, high_freq_wavelen = old_len / high;
    for (float& f : inv) {
      const float wavelen = 2 * static_cast<float>(M_PI) / f;
      const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
      const float smooth = (old_len / wavelen - low) / (high - low);
      const float smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv;
}

// HF's rotate_half: [-x2, x1] for x = [x1, x2] split in halves of the last dim.
Tensor RotateHalf(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// x [B, heads, T, D] with cos, sin [T, D].
Tensor ApplyRotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return x * cos + RotateHalf(x) * sin;
}

}  // namespace

// ---- Modules ----------------------------------------------------------------------------------

LlamaAttention::LlamaAttention(const LlamaConfig& c, uint64_t seed)
    : Module("LlamaAttention"),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads),
      head_dim(c.head_dim),
      attention_dropout(c.attention_dropout) {
  c.Validate();
  const double std = c.initializer_range;
  auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
    return register_module(name, std::make_shared<Linear>(in, out, bias, DeriveSeed(seed, name), std));
  };
  q_proj = linear("q_proj", c.hidden_size, num_heads * head_dim, c.attention_bias);
  k_proj = linear("k_proj", c.hidden_size, num_kv_heads * head_dim, c.attention_bias);
  v_proj = linear("v_proj", c.hidden_size, num_kv_heads * head_dim, c.attention_bias);
  o_proj = linear("o_proj", num_heads * head_dim, c.hidden_size, c.o_proj_bias);
}

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& blocked,
                               Tensor* k_cache, Tensor* v_cache, const Tensor& pos) const {
  ModuleScope scope(*this);
  if (x.dim() != 3 || x.size(2) != q_proj->in_features) {
    Fail("{} (LlamaAttention): input x must be [B, T, {}], got shape {}", scope_name(), q_proj->in_features,
         ShapeString(x.sizes()));
  }
  const int64_t B = x.size(0), T = x.size(1), H = num_heads, KV = num_kv_heads, D = head_dim, rep = H / KV;
  auto heads = [&](const Tensor& t, int64_t n) { return t.reshape({B, T, n, D}).transpose(1, 2); };
  Tensor q = ApplyRotary(heads((*q_proj)(x), H), cos, sin);  // [B, H, T, D]
  Tensor k = ApplyRotary(heads((*k_proj)(x), KV), cos, sin);  // [B, KV, T, D]
  Tensor v = heads((*v_proj)(x), KV);
  // Grouped-query attention: query head h reads key/value head h / rep (HF's repeat_kv), here as
  // a broadcast over a [B, KV, rep, ...] view of the queries instead of a copy of k and v.
  q = q.reshape({B, KV, rep, T, D});
  if (k_cache) {
    Tensor y = CachedAttention(q, k, v, *k_cache, *v_cache, pos, blocked);
    return (*o_proj)(y.reshape({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D}));
  }
  k = k.unsqueeze(2);
  v = v.unsqueeze(2);
  Tensor att = q.matmul(k.mT()) * (1.0 / std::sqrt(static_cast<double>(D)));  // [B, KV, rep, T, T]
  att = softmax(att.masked_fill(blocked, -std::numeric_limits<double>::infinity()), -1);
  if (is_training() && attention_dropout > 0) att = dropout(att, attention_dropout, true);
  Tensor y = att.matmul(v).reshape({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D});
  return (*o_proj)(y);
}

LlamaMLP::LlamaMLP(const LlamaConfig& c, uint64_t seed) : Module("LlamaMLP") {
  const double std = c.initializer_range;
  auto linear = [&](const char* name, int64_t in, int64_t out) {
    return register_module(name, std::make_shared<Linear>(in, out, c.mlp_bias, DeriveSeed(seed, name), std));
  };
  gate_proj = linear("gate_proj", c.hidden_size, c.intermediate_size);
  up_proj = linear("up_proj", c.hidden_size, c.intermediate_size);
  down_proj = linear("down_proj", c.intermediate_size, c.hidden_size);
}

Tensor LlamaMLP::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return (*down_proj)(silu((*gate_proj)(x)) * (*up_proj)(x));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, uint64_t seed) : Module("LlamaDecoderLayer") {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, DeriveSeed(seed, "self_attn")));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(c, DeriveSeed(seed, "mlp")));
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& blocked,
                                  Tensor* k_cache, Tensor* v_cache, const Tensor& pos) const {
  ModuleScope scope(*this);
  Tensor h = x + self_attn->forward((*input_layernorm)(x), cos, sin, blocked, k_cache, v_cache, pos);
  return h + (*mlp)((*post_attention_layernorm)(h));
}

LlamaModel::LlamaModel(const LlamaConfig& c, uint64_t seed) : Module("LlamaModel") {
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, DeriveSeed(seed, "embed_tokens"),
                                                  c.initializer_range));
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    decoder_layers.push_back(layers->push_back(
        std::make_shared<LlamaDecoderLayer>(c, DeriveSeed(seed, fmt::format("layers.{}", i)))));
  norm = register_module("norm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

Llama::Llama(const LlamaConfig& config, uint64_t seed, bool init, bool materialize)
    : CausalLM(Architecture(config.model_type)), config_(config) {
  config_.Validate();
  model = register_module("model", std::make_shared<LlamaModel>(config_, DeriveSeed(seed, "model")));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", std::make_shared<Linear>(config_.hidden_size, config_.vocab_size, false,
                                                                  DeriveSeed(seed, "lm_head"),
                                                                  config_.initializer_range));
  const std::vector<float> inv = InverseFrequencies(config_);
  inv_freq_ = register_buffer("inv_freq", from_vector<float>(inv, {static_cast<int64_t>(inv.size())}, DType::kF32),
                              /*persistent=*/false);
  if (!init) {
    NoGradGuard no_grad;
    for (auto& p : parameters()) p.zero_();
  } else if (materialize) {
    sync();
  }
}

nlohmann::json Llama::config_json() const { return config_.ToJson(); }

Tensor Llama::forward(const Tensor& idx) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype()))
    Fail("{}: idx must be an integer tensor [B, T], got {}", type_name(), idx.type_string());
  const int64_t T = idx.size(1);
  if (T > config_.max_position_embeddings)
    Fail("{}: sequence length {} (idx {}) exceeds max_position_embeddings {}; use shorter sequences", type_name(),
         T, idx.type_string(), config_.max_position_embeddings);
  // A query never sees a later key, nor (Mistral) one `sliding_window` or more positions back.
  Tensor blocked;
  {
    NameScope mask("mask");
    Tensor query = arange(T).unsqueeze(1), key = arange(T).unsqueeze(0);
    blocked = key > query;
    if (config_.sliding_window > 0 && T > config_.sliding_window)
      blocked = blocked || (key <= query - config_.sliding_window);
  }
  return Run(idx, arange(T), blocked, nullptr, Tensor());
}

Tensor Llama::forward_packed(const Tensor& idx, const Tensor& positions, const Tensor& segments) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype()) || positions.sizes() != idx.sizes() ||
      segments.sizes() != idx.sizes() || !IsInteger(positions.dtype()) || !IsInteger(segments.dtype()))
    Fail("{}: forward_packed needs integer idx, positions and segments of one shape [B, T], got {}, {}, {}",
         type_name(), idx.type_string(), positions.type_string(), segments.type_string());
  const int64_t T = idx.size(1);
  if (T > config_.max_position_embeddings)
    Fail("{}: sequence length {} exceeds max_position_embeddings {}", type_name(), T, config_.max_position_embeddings);
  Tensor blocked;
  {
    NameScope mask("mask");
    Tensor query = arange(T).unsqueeze(1), key = arange(T).unsqueeze(0);
    blocked = (key > query).unsqueeze(0) || (segments.unsqueeze(2) != segments.unsqueeze(1));  // [B, T, T]
    if (config_.sliding_window > 0 && T > config_.sliding_window)
      blocked = blocked || (positions.unsqueeze(2) - positions.unsqueeze(1) >= config_.sliding_window);
    blocked = blocked.unsqueeze(1).unsqueeze(1);  // [B, 1, 1, T, T]: over kv heads and their query groups
  }
  return Run(idx, positions, blocked, nullptr, Tensor());
}

KVCache Llama::make_cache(int64_t batch, int64_t max_len) const {
  if (batch < 1 || max_len < 1 || max_len > config_.max_position_embeddings)
    Fail("{}: a KV cache needs batch >= 1 and 1 <= max_len <= max_position_embeddings {}, not batch {}, max_len {}",
         type_name(), config_.max_position_embeddings, batch, max_len);
  KVCache cache;
  cache.batch = batch;
  cache.max_len = max_len;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    cache.keys.push_back(zeros({batch, config_.num_key_value_heads, max_len, config_.head_dim}));
    cache.values.push_back(zeros({batch, config_.num_key_value_heads, max_len, config_.head_dim}));
  }
  return cache;
}

Tensor Llama::forward_cached(const Tensor& idx, KVCache& cache) const {
  ModuleScope scope(*this);
  if (idx.dim() != 2 || !IsInteger(idx.dtype()))
    Fail("{}: idx must be an integer tensor [B, T], got {}", type_name(), idx.type_string());
  const int64_t T = idx.size(1);
  CheckCache(type_name(), cache, idx.size(0), T, config_.num_hidden_layers);
  const Tensor pos = from_vector<int64_t>({cache.length}, {}, DType::kI64);
  Tensor logits = Run(idx, arange(T) + pos, CacheMask(T, cache.max_len, pos, config_.sliding_window), &cache, pos);
  cache.length += T;
  return logits;
}

Tensor Llama::Run(const Tensor& idx, const Tensor& positions, const Tensor& blocked, KVCache* cache,
                  const Tensor& pos) const {
  // Rotary angles as HF's LlamaRotaryEmbedding computes them: float32 positions times inv_freq,
  // concatenated with themselves ([T, head_dim], or [B, 1, T, head_dim] for per-row positions).
  Tensor cos, sin;
  {
    NameScope rotary("rotary_emb");
    Tensor freqs = positions.to(DType::kF32).unsqueeze(-1) * inv_freq_;
    Tensor emb = cat({freqs, freqs}, -1);
    cos = emb.cos();
    sin = emb.sin();
    if (cos.dim() == 3) cos = cos.unsqueeze(1), sin = sin.unsqueeze(1);
  }
  Tensor x = (*model->embed_tokens)(idx);
  {
    ModuleScope inner(*model);
    for (size_t l = 0; l < model->decoder_layers.size(); ++l) {
      const auto& layer = model->decoder_layers[l];
      x = cache ? layer->forward(x, cos, sin, blocked, &cache->keys[l], &cache->values[l], pos)
                : Block([&](const Tensor& in) { return layer->forward(in, cos, sin, blocked); }, x);
    }
    x = (*model->norm)(x);
  }
  if (lm_head) return (*lm_head)(x);
  NameScope head("lm_head");
  return x.matmul(model->embed_tokens->weight.t());  // tied head
}

}  // namespace axle::nn
