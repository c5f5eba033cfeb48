// axle::nn: modules with PyTorch's semantics (torch.nn.Module) and the GPT-2 model.
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

#include "axle/tensor.h"

namespace axle::nn {

// Ordered (name, tensor) pairs: parameters, then persistent buffers, module by module.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// A deterministic 64-bit seed for the part `name` of something seeded with `seed`.
uint64_t DeriveSeed(uint64_t seed, std::string_view name);

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

  // Training mode (dropout active) for this module and its descendants; eval() is train(false).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Sets every parameter's gradient to undefined (PyTorch 2's zero_grad(set_to_none=True)).
  void zero_grad();

  // The name forward() pushes as its NameScope: the path, or the type name for the root.
  std::string scope_name() const;

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
// (kaiming_uniform with a = sqrt(5)): weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, uint64_t seed = 0);
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
  std::shared_ptr<Conv1D> c_attn, c_proj;
  std::shared_ptr<Dropout> attn_dropout, resid_dropout;
  int64_t n_head, n_embd;
};

// One transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPT2Block : public Module {
 public:
  GPT2Block(const GPT2Config& config, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

// GPT-2 with its language-model head tied to wte. Parameter names and layouts are Hugging
// Face's GPT2Model (and so GPT2LMHeadModel's without the "transformer." prefix and the tied
// lm_head.weight). Init as GPT-2: N(0, 0.02^2) weights and embeddings, c_proj weights
// N(0, (0.02/sqrt(2 n_layer))^2), biases 0, layer-norm weights 1.
class GPT2 : public Module {
 public:
  // With `init`, draws GPT-2's init from `seed` and, with `materialize`, sync()s, so the
  // parameters are device data (leaves of the first training step). `init` false leaves every
  // parameter a pending zero (for loading weights right after). `materialize` false leaves the
  // init pending too, so that shardings marked before the next sync() lay it out: each device
  // then keeps only its shard of the model (axle train over a mesh).
  explicit GPT2(const GPT2Config& config, uint64_t seed = 0, bool init = true, bool materialize = true);
  // idx [B, T] integer tokens (T <= n_positions) -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) const;
  // The mean cross-entropy of forward(idx) against targets [B, T].
  Tensor forward(const Tensor& idx, const Tensor& targets) const;
  Tensor operator()(const Tensor& idx) const { return forward(idx); }

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

// ---- Serialization (safetensors) --------------------------------------------------------------

// Writes the tensors of `state` (read back with Tensor::to_literal) to a safetensors file, with
// metadata {"format": "pt"} as PyTorch-written files have.
void save_safetensors(const StateDict& state, const std::string& path);
// Reads a safetensors file into device tensors (axle::from_literal), in the file's order.
StateDict load_safetensors(const std::string& path);

}  // namespace axle::nn
