// axle::nn: modules with PyTorch's semantics (torch.nn.Module), GPT-2 and the Llama family.
//
//   auto model = std::make_shared<axle::nn::GPT2>(axle::nn::GPT2Config::Preset("tiny"), /*seed=*/0);
//   axle::Tensor loss = model->forward(idx, targets);   // mean cross-entropy
//   loss.backward();
//
// A Module owns named parameters (leaf tensors that require grad), buffers and child modules,
// all in registration order. Names are dotted paths from the root ("h.0.attn.c_attn.weight"),
// exactly as PyTorch's named_parameters() and state_dict() give them, so Hugging Face
// checkpoints load by name. Every forward() pushes an axle::NameScope with the module's path
// (e.g. "h.0.attn"), so recompilation reports name the module that built a graph region.
//
// Initialization is explicit and deterministic: every layer takes a seed, and composite modules
// derive their children's seeds from theirs with DeriveSeed(seed, "child name").
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "axle/remat.h"
#include "axle/tensor.h"

namespace axle::nn {

// Ordered (name, tensor) pairs: parameters, then persistent buffers, module by module.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// A deterministic 64-bit seed for the part `name` of something seeded with `seed`.
uint64_t DeriveSeed(uint64_t seed, std::string_view name);

// Megatron-style tensor parallelism of one projection (a Linear or Conv1D child of a module):
// colwise splits its outputs (the weight's output dim and the bias), rowwise its inputs (the
// weight's input dim; the partitioner sums the partial products). A module type declares its plan
// (Module::parallel_plan); axle::fsdp turns plans into shardings (include/axle/fsdp.h).
enum class ParallelStyle { kColwise, kRowwise };

class Module {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name ("Linear") and the dotted path from the root module ("" for the root).
  const std::string& type_name() const { return type_name_; }
  const std::string& path() const { return path_; }

  // Registers a parameter: a leaf tensor (the value is detached) that requires grad. Returns the
  // registered handle; in-place updates through any copy of it (load_state_dict, optimizers)
  // update the module's parameter. Throws for an empty, dotted or duplicate name.
  Tensor register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  // Registers a buffer (state that is not trained). Non-persistent buffers stay out of
  // state_dict().
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module_impl(name, module);
    return module;
  }

  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module ("") and every descendant, pre-order, with their dotted names.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  int64_t num_parameters() const;  // total elements

  // Parameters and persistent buffers in registration order (PyTorch's state_dict order).
  StateDict state_dict() const;
  // Copies `state` into this module's parameters and buffers with Tensor::copy_ (traced; a
  // later sync() runs it). With `strict`, a key the module lacks or a module tensor the state
  // lacks is an error listing every such name. A shape mismatch is always an error naming the
  // key and both shapes; a dtype mismatch is an error unless `convert_dtype`, when the value is
  // converted to the parameter's dtype. Nothing is copied when any check fails.
  void load_state_dict(const StateDict& state, bool strict = true, bool convert_dtype = false);

  // Converts every floating-point parameter and persistent buffer of this module and its
  // descendants to `dtype` in place (Tensor::convert_), as PyTorch's module.to(dtype); make the
  // optimizer after it, so that its state has the parameters' dtype. Non-persistent buffers are
  // tables a module derives from its config and keep their dtype (Llama's rotary frequencies in
  // bf16 would turn position 1000's angles by up to 2 radians).
  Module& to(DType dtype);

  // Training mode (dropout active) for this module and its descendants; eval() is train(false).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Sets every parameter's gradient to undefined (PyTorch 2's zero_grad(set_to_none=True)).
  void zero_grad();

  // The name forward() pushes as its NameScope: the path, or the type name for the root.
  std::string scope_name() const;

  // This module type's tensor-parallel plan: (child name, style) for the projections that split
  // over a tensor-parallel mesh axis, as PyTorch's parallelize_module plans name them (attention:
  // q/k/v colwise, the output projection rowwise; MLP: up colwise, down rowwise). Empty: nothing
  // of this module itself splits (its children may have plans of their own).
  virtual std::vector<std::pair<std::string, ParallelStyle>> parallel_plan() const { return {}; }

 private:
  void register_module_impl(const std::string& name, std::shared_ptr<Module> module);
  void set_path(const std::string& path);
  void check_new_name(const std::string& name, const char* what) const;

  struct Buffer {
    std::string name;
    Tensor value;
    bool persistent;
  };
  std::string type_name_;
  std::string path_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// An ordered list of modules named "0", "1", ... (torch.nn.ModuleList).
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(size()), std::move(module));
  }
  size_t size() const { return named_children().size(); }
};

// y = x @ weight^T + bias; weight [out, in] (PyTorch's layout). Init as PyTorch's
// (kaiming_uniform with a = sqrt(5)): weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)); with a
// positive `init_std`, as Hugging Face's transformers: weight ~ N(0, init_std^2), bias 0.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, uint64_t seed = 0,
         double init_std = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight, bias;  // bias undefined without one
  int64_t in_features, out_features;
};

// Hugging Face's Conv1D (GPT-2's projections): y = x @ weight + bias, weight [in, out].
// Init: weight ~ N(0, init_std^2), bias 0.
class Conv1D : public Module {
 public:
  Conv1D(int64_t in_features, int64_t out_features, double init_std = 0.02, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight, bias;
};

// weight[indices]; weight [num_embeddings, embedding_dim] ~ N(0, init_std^2) (PyTorch: std 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed = 0,
            double init_std = 1.0);
  Tensor forward(const Tensor& indices) const;
  Tensor operator()(const Tensor& indices) const { return forward(indices); }
  Tensor weight;
  int64_t num_embeddings, embedding_dim;
};

// Layer normalization over the last dim; weight 1, bias 0.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight, bias;
  int64_t dim;
  double eps;
};

// RMS normalization over the last dim; weight 1.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight;
  int64_t dim;
  double eps;
};

// Inverted dropout with probability p, active only in training mode (identity for p = 0).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  double p;
};

// ---- Causal language models ---------------------------------------------------------------------

// The keys and values of past positions, for incremental decoding: per layer [batch, kv_heads,
// max_len, head_dim], filled up to `length`. The tensors are device data that each
// forward_cached() replaces with its update.
struct KVCache {
  std::vector<Tensor> keys, values;
  int64_t batch = 0, max_len = 0;
  int64_t length = 0;  // positions filled: the next token's position
};

// A decoder-only language model (GPT2, Llama): what `axle train`, sampling, saving and export
// need of a model, whatever its architecture.
class CausalLM : public Module {
 public:
  using Module::Module;
  // idx [B, T] integer tokens -> logits [B, T, vocab_size()].
  virtual Tensor forward(const Tensor& idx) const = 0;
  // The mean cross-entropy of forward(idx) against targets [B, T]; targets equal to -100 (PyTorch's
  // ignore_index) are left out of the mean: the prompt tokens of instruction data, padding.
  Tensor forward(const Tensor& idx, const Tensor& targets) const;
  Tensor operator()(const Tensor& idx) const { return forward(idx); }

  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_positions() const = 0;  // the longest sequence forward() takes
  // The model family as config.json's model_type names it ("gpt2", "llama", "mistral", "qwen2").
  virtual std::string model_type() const = 0;
  // The Hugging Face config.json object that rebuilds this model (MakeCausalLM).
  virtual nlohmann::json config_json() const = 0;
  // A one-line description of the config, for logs and errors.
  virtual std::string config_string() const = 0;

  // An empty cache (zeros) for `batch` sequences of up to `max_len` <= max_positions() positions.
  virtual KVCache make_cache(int64_t batch, int64_t max_len) const = 0;
  // Logits [B, T, vocab] of idx [B, T], the tokens at positions cache.length .. + T - 1, which
  // attend to the cache's earlier positions and to each other causally; their keys and values are
  // written into the cache and cache.length advances by T. The position enters the step as data
  // (not a constant), so every decode step of a given T runs one compiled graph: a prompt
  // compiles once (its T) and then each new token reuses the T = 1 graph.
  virtual Tensor forward_cached(const Tensor& idx, KVCache& cache) const = 0;

  // Logits of packed rows, several documents to a row of idx [B, T]: `positions` [B, T] is each
  // token's position within its document, `segments` [B, T] its document's number. A token
  // attends only to earlier tokens of its own segment, at positions that restart with each
  // document: every document computes as it would in a row of its own (instruction data packed
  // with --pack).
  virtual Tensor forward_packed(const Tensor& idx, const Tensor& positions, const Tensor& segments) const = 0;
  // The mean cross-entropy of forward_packed against targets [B, T] (-100 left out).
  Tensor loss_packed(const Tensor& idx, const Tensor& targets, const Tensor& positions,
                     const Tensor& segments) const;

  // Gradient checkpointing of the decoder blocks (include/axle/remat.h; `axle train --remat`):
  // each block of forward() and forward_packed() is an axle::remat region of this policy, so its
  // activations are recomputed in the backward. kNone (the default) keeps them.
  void set_remat(RematPolicy policy) { remat_ = policy; }
  RematPolicy remat_policy() const { return remat_; }

 protected:
  // block(x) as a remat region of remat_policy() (just block(x) under kNone).
  Tensor Block(const std::function<Tensor(const Tensor&)>& block, const Tensor& x) const;

 private:
  void CheckTargets(const Tensor& idx, const Tensor& targets) const;
  Tensor Loss(const Tensor& logits, const Tensor& targets) const;
  RematPolicy remat_ = RematPolicy::kNone;
};

// ---- GPT-2 ------------------------------------------------------------------------------------

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  double layer_norm_epsilon = 1e-5;
  double dropout = 0;  // embeddings, attention probabilities and residuals (HF's *_pdrop)

  int64_t head_dim() const { return n_embd / n_head; }
  // Throws unless every size is positive and n_head divides n_embd.
  void Validate() const;
  std::string ToString() const;

  // "tiny" (256, 128, 64, 2, 4), "small" (512, 256, 128, 2, 4), "124m" (50257, 1024, 768, 12, 12).
  static GPT2Config Preset(const std::string& name);
  // A Hugging Face GPT2Config object (config.json). vocab_size, n_positions (or n_ctx), n_embd,
  // n_layer and n_head are required; layer_norm_epsilon and resid_pdrop are optional. `source`
  // names the file in errors.
  static GPT2Config FromJson(const nlohmann::json& json, std::string_view source);
  static GPT2Config FromFile(const std::string& config_json_path);
  // The Hugging Face config.json object of this config (model_type "gpt2", the sizes,
  // layer_norm_epsilon, and dropout as resid/embd/attn_pdrop); FromJson reads it back.
  nlohmann::json ToJson() const;
};

// GPT-2's MLP: c_proj(gelu_tanh(c_fc(x))), then dropout. c_fc [C, 4C], c_proj [4C, C].
class MLP : public Module {
 public:
  MLP(const GPT2Config& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::vector<std::pair<std::string, ParallelStyle>> parallel_plan() const override {
    return {{"c_fc", ParallelStyle::kColwise}, {"c_proj", ParallelStyle::kRowwise}};
  }
  std::shared_ptr<Conv1D> c_fc, c_proj;
  std::shared_ptr<Dropout> dropout;
};

// GPT-2's causal multi-head self-attention: q, k, v = split(c_attn(x), C, -1), heads of
// head_dim, softmax(q k^T / sqrt(head_dim)) with a causal mask, then c_proj and dropout.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPT2Config& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;  // x [B, T, C]
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // x [B, T, C] with an explicit mask: `blocked` broadcastable to [B, n_head, T, T], true where a
  // query must not see a key (CausalLM::forward_packed).
  Tensor forward(const Tensor& x, const Tensor& blocked) const;
  // x [B, T, C] at position `pos` (0-d i64) of a layer's cache [B, n_head, L, head_dim], `blocked`
  // [T, L] (CausalLM::forward_cached).
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache, const Tensor& pos,
                        const Tensor& blocked) const;
  std::vector<std::pair<std::string, ParallelStyle>> parallel_plan() const override {
    return {{"c_attn", ParallelStyle::kColwise}, {"c_proj", ParallelStyle::kRowwise}};
  }
  std::shared_ptr<Conv1D> c_attn, c_proj;
  std::shared_ptr<Dropout> attn_dropout, resid_dropout;
  int64_t n_head, n_embd;
};

// One transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPT2Block : public Module {
 public:
  GPT2Block(const GPT2Config& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor forward(const Tensor& x, const Tensor& blocked) const;
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache, const Tensor& pos,
                        const Tensor& blocked) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

// GPT-2 with its language-model head tied to wte. Parameter names and layouts are Hugging
// Face's GPT2Model (and so GPT2LMHeadModel's without the "transformer." prefix and the tied
// lm_head.weight). Init as GPT-2: N(0, 0.02^2) weights and embeddings, c_proj weights
// N(0, (0.02/sqrt(2 n_layer))^2), biases 0, layer-norm weights 1.
class GPT2 : public CausalLM {
 public:
  // With `init`, draws GPT-2's init from `seed` and, with `materialize`, sync()s, so the
  // parameters are device data (leaves of the first training step). `init` false leaves every
  // parameter a pending zero (for loading weights right after). `materialize` false leaves the
  // init pending too, so that shardings marked before the next sync() lay it out: each device
  // then keeps only its shard of the model (axle train over a mesh).
  explicit GPT2(const GPT2Config& config, uint64_t seed = 0, bool init = true, bool materialize = true);
  // idx [B, T] integer tokens (T <= n_positions) -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) const override;
  using CausalLM::forward;

  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_positions() const override { return config_.n_positions; }
  std::string model_type() const override { return "gpt2"; }
  nlohmann::json config_json() const override;
  std::string config_string() const override { return config_.ToString(); }
  KVCache make_cache(int64_t batch, int64_t max_len) const override;
  Tensor forward_cached(const Tensor& idx, KVCache& cache) const override;
  Tensor forward_packed(const Tensor& idx, const Tensor& positions, const Tensor& segments) const override;
  const GPT2Config& config() const { return config_; }
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList> h;
  std::vector<std::shared_ptr<GPT2Block>> blocks;  // h's children
  std::shared_ptr<LayerNorm> ln_f;

 private:
  GPT2Config config_;
};

struct LoadGPT2Options {
  // For a single .safetensors file (no config.json): the head count; default n_embd / 64.
  std::optional<int64_t> n_head;
  // Convert tensors of another dtype (e.g. F16 files) to the model's f32 instead of failing.
  bool convert_dtype = false;
  // Overrides the dropout probability (by default config.json's resid_pdrop, e.g. 0.1 for
  // Hugging Face's gpt2, as from_pretrained gives; 0 without a config.json).
  std::optional<double> dropout;
};

// Loads a Hugging Face GPT-2: a directory (config.json + model.safetensors, or shards with
// model.safetensors.index.json) or a single .safetensors file, whose config is then inferred from
// the shapes (vocab and n_embd from wte, n_positions from wpe, n_layer from the h.N count).
// Keys may carry GPT2LMHeadModel's "transformer." prefix; "lm_head.weight" must equal wte (the
// head is tied); old checkpoints' attn.bias / attn.masked_bias buffers are skipped. Errors name
// the path and every missing, unexpected or mistyped tensor. The weights are copied in with
// copy_ and sync()ed.
std::shared_ptr<GPT2> LoadGPT2(const std::string& path, const LoadGPT2Options& options = {});

// Writes `model`'s weights to `path` (a .safetensors file, Hugging Face's names) with its config,
// twice: in the file's __metadata__ ("config": the config.json text, beside {"format": "pt"}), so
// LoadGPT2(path) rebuilds the same model from the bare file, and as config.json in the file's
// directory (which, with the file named model.safetensors, is a Hugging Face model directory).
// Returns the config.json path.
std::string SaveGPT2(const GPT2& model, const std::string& path);

// ---- Llama, Mistral, Qwen2 --------------------------------------------------------------------

// Rotary embedding frequency scaling (config.json's rope_scaling; Hugging Face's rope_type).
struct RopeScaling {
  std::string type = "default";  // default (none) | linear | llama3
  double factor = 1;
  // llama3: frequencies with wavelengths above original_max_position_embeddings / low_freq_factor
  // are divided by `factor`, those below ... / high_freq_factor kept, the band between smoothed.
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

// The config of Hugging Face's LlamaForCausalLM and of the families that differ from it only in
// config: Mistral (a sliding attention window) and Qwen2 (biases on q/k/v). Field names are
// config.json's.
struct LlamaConfig {
  std::string model_type = "llama";  // llama | mistral | qwen2
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // < num_attention_heads: grouped-query attention
  int64_t head_dim = 128;            // config.json's head_dim, else hidden_size / heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // biases on q_proj, k_proj, v_proj (Qwen2: always)
  bool o_proj_bias = false;     // Llama's attention_bias puts one on o_proj too
  bool mlp_bias = false;
  bool tie_word_embeddings = false;
  int64_t sliding_window = 0;  // 0: off; else a query sees the last `sliding_window` keys (Mistral)
  double attention_dropout = 0;
  double initializer_range = 0.02;
  // The keys of config.json this struct does not model (bos_token_id, eos_token_id,
  // torch_dtype, ...) as a JSON object's text: written back by ToJson so a saved directory keeps
  // them.
  std::string extra_json = "{}";

  // Throws unless every size is positive, heads divide as GQA needs, and the scaling is usable.
  void Validate() const;
  std::string ToString() const;

  // Random-init shapes: "tiny" (byte vocab 256, d 64, 2 layers, GQA 4/2, context 256),
  // "small" (512, d 128, 4 layers, GQA 4/2, 512), "bench" (32000, d 2048, 16 layers, GQA 32/8,
  // 5632, 2048), "tinyllama-1.1b" (TinyLlama-1.1B's: 32000, d 2048, 22 layers, GQA 32/4, 5632).
  static LlamaConfig Preset(const std::string& name);
  // A Hugging Face config.json object whose model_type is llama, mistral or qwen2. Errors name
  // `source` and the field: a missing required size, a wrong JSON type, hidden_act other than
  // silu, an unsupported rope_scaling type, Qwen2's use_sliding_window.
  static LlamaConfig FromJson(const nlohmann::json& json, std::string_view source);
  nlohmann::json ToJson() const;
};

// HF's LlamaAttention: q/k/v/o projections (nn.Linear, [out, in]), rotary embeddings applied to
// q and k (rotate-half), k and v heads repeated for grouped-query attention, causal softmax
// attention with scale 1/sqrt(head_dim) (and Mistral's window).
class LlamaAttention : public Module {
 public:
  LlamaAttention(const LlamaConfig& config, uint64_t seed = 0);
  // x [B, T, C]; cos, sin [T, head_dim]; `blocked` bool [T, keys]: true where a query must not
  // see a key. With a cache (a layer's keys and values [B, kv_heads, L, head_dim]), the new keys
  // and values are written at position `pos` (0-d i64) and the queries attend to all L.
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& blocked,
                 Tensor* k_cache = nullptr, Tensor* v_cache = nullptr, const Tensor& pos = Tensor()) const;
  std::vector<std::pair<std::string, ParallelStyle>> parallel_plan() const override {
    return {{"q_proj", ParallelStyle::kColwise},
            {"k_proj", ParallelStyle::kColwise},
            {"v_proj", ParallelStyle::kColwise},
            {"o_proj", ParallelStyle::kRowwise}};
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  int64_t num_heads, num_kv_heads, head_dim;
  double attention_dropout;
};

// SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public Module {
 public:
  LlamaMLP(const LlamaConfig& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::vector<std::pair<std::string, ParallelStyle>> parallel_plan() const override {
    return {{"gate_proj", ParallelStyle::kColwise},
            {"up_proj", ParallelStyle::kColwise},
            {"down_proj", ParallelStyle::kRowwise}};
  }
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x)).
class LlamaDecoderLayer : public Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& blocked,
                 Tensor* k_cache = nullptr, Tensor* v_cache = nullptr, const Tensor& pos = Tensor()) const;
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
};

// HF's LlamaModel: embed_tokens, layers, norm.
class LlamaModel : public Module {
 public:
  LlamaModel(const LlamaConfig& config, uint64_t seed = 0);
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  std::vector<std::shared_ptr<LlamaDecoderLayer>> decoder_layers;  // layers' children
  std::shared_ptr<RMSNorm> norm;
};

// LlamaForCausalLM (and MistralForCausalLM, Qwen2ForCausalLM): "model" and, untied, "lm_head";
// parameter names are exactly Hugging Face's ("model.layers.0.self_attn.q_proj.weight"). Init as
// HF's: N(0, initializer_range^2) matrices and embeddings, zero biases, unit norms. `init` and
// `materialize` as GPT2's.
class Llama : public CausalLM {
 public:
  explicit Llama(const LlamaConfig& config, uint64_t seed = 0, bool init = true, bool materialize = true);
  Tensor forward(const Tensor& idx) const override;
  using CausalLM::forward;

  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_positions() const override { return config_.max_position_embeddings; }
  std::string model_type() const override { return config_.model_type; }
  nlohmann::json config_json() const override;
  std::string config_string() const override { return config_.ToString(); }
  KVCache make_cache(int64_t batch, int64_t max_len) const override;
  Tensor forward_cached(const Tensor& idx, KVCache& cache) const override;
  Tensor forward_packed(const Tensor& idx, const Tensor& positions, const Tensor& segments) const override;
  const LlamaConfig& config() const { return config_; }
  // The rotary inverse frequencies [head_dim / 2] (f32, computed as HF's rope init functions
  // compute them, scaling included).
  const Tensor& inv_freq() const { return inv_freq_; }

  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<Linear> lm_head;  // null when tied to model.embed_tokens

 private:
  // idx [B, T] at `positions` ([T], or [B, T] for packed rows), `blocked` broadcastable to
  // [B, kv, rep, T, keys]; with a cache, keys at cache positions [0, L) and the new ones written
  // at `pos`.
  Tensor Run(const Tensor& idx, const Tensor& positions, const Tensor& blocked, KVCache* cache,
             const Tensor& pos) const;

  LlamaConfig config_;
  Tensor inv_freq_;
};

// ---- Any causal LM from a Hugging Face directory ----------------------------------------------

struct LoadOptions {
  // Convert tensors of another floating dtype (bf16 / f16 checkpoints) to the model's f32.
  bool convert_dtype = false;
  // GPT-2 only: the dropout probability (default: config.json's resid_pdrop) and, for a bare
  // .safetensors file without a config, the head count.
  std::optional<double> dropout;
  std::optional<int64_t> n_head;
};

// The model config.json describes (model_type gpt2, llama, mistral or qwen2), uninitialized
// (init false) or drawn from `seed`. An unknown or missing model_type is an error naming
// `source` and the families Axle has.
std::shared_ptr<CausalLM> MakeCausalLM(const nlohmann::json& config, std::string_view source,
                                       uint64_t seed = 0, bool init = false, bool materialize = true);

// Loads a Hugging Face model directory (or a single .safetensors file) of any family Axle has,
// chosen by config.json's model_type (GPT-2 when there is no config). Weights go through
// CheckTensors (every missing, unexpected or mistyped tensor named) and are sync()ed. A tied
// head's lm_head.weight, when a file has one, must equal the embedding; old checkpoints'
// rotary_emb.inv_freq buffers are skipped.
std::shared_ptr<CausalLM> LoadCausalLM(const std::string& path, const LoadOptions& options = {});

// Writes `model` as a Hugging Face model directory's weights: `path` (a .safetensors file,
// Hugging Face's names, the config in its __metadata__) and config.json beside it, making the
// directory when it does not exist. Returns the config.json path.
std::string SaveCausalLM(const CausalLM& model, const std::string& path);

// ---- Serialization (safetensors) --------------------------------------------------------------

// Writes the tensors of `state` (read back with Tensor::to_literal) to a safetensors file, with
// metadata {"format": "pt"} as PyTorch-written files have.
void save_safetensors(const StateDict& state, const std::string& path);
// Reads a safetensors file into device tensors (axle::from_literal), in the file's order.
StateDict load_safetensors(const std::string& path);

}  // namespace axle::nn
