// The basic layers: Linear, Conv1D, Embedding, LayerNorm, RMSNorm, Dropout.
#include <cmath>

#include "axle/nn.h"
#include "core/error.h"
#include "frontend/ops_internal.h"
#include "nn/util.h"

namespace axle::nn {
namespace {

void CheckPositive(const char* layer, const char* what, int64_t v) {
  if (v <= 0) Fail("{}: {} must be positive, not {}", layer, what, v);
}

// U(-bound, bound) of `shape`, seeded.
Tensor Uniform(const Dims& shape, double bound, uint64_t seed) {
  return rand(shape, seed) * (2 * bound) - bound;
}

// The last dim of `x` must be `dim`.
void CheckLastDim(const Module& m, const Tensor& x, int64_t dim, const char* what) {
  if (x.dim() < 1 || x.size(-1) != dim) {
    Fail("{} ({}): input {} must end in {} = {}; got shape {}", m.scope_name(), m.type_name(),
         "x", what, dim, ShapeString(x.sizes()));
  }
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, uint64_t seed, double init_std)
    : Module("Linear"), in_features(in), out_features(out) {
  CheckPositive("Linear", "in_features", in);
  CheckPositive("Linear", "out_features", out);
  NoGradGuard no_grad;
  if (init_std > 0) {
    weight = register_parameter("weight", randn({out, in}, DeriveSeed(seed, "weight")) * init_std);
    if (with_bias) bias = register_parameter("bias", zeros({out}));
    return;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", Uniform({out, in}, bound, DeriveSeed(seed, "weight")));
  if (with_bias) bias = register_parameter("bias", Uniform({out}, bound, DeriveSeed(seed, "bias")));
}

// Under autocast, "linear" (include/axle/autocast.h): input, weight and bias in the lower
// precision (PyTorch's addmm casts the bias too, so the layer's output stays bf16), the weight cast
// before it is transposed, so that the product reads the cast copy in place.
Tensor Linear::forward(const Tensor& x_in) const {
  ModuleScope scope(*this);
  CheckLastDim(*this, x_in, in_features, "in_features");
  const Tensor x = detail::Autocast(x_in, "linear"), w = detail::Autocast(weight, "linear"),
               b = detail::Autocast(bias, "linear");
  detail::AutocastOff off;
  Tensor y = x.matmul(w.t());
  return b.defined() ? y + b : y;
}

Conv1D::Conv1D(int64_t in, int64_t out, double init_std, uint64_t seed) : Module("Conv1D") {
  CheckPositive("Conv1D", "in_features", in);
  CheckPositive("Conv1D", "out_features", out);
  NoGradGuard no_grad;
  weight = register_parameter("weight", randn({in, out}, DeriveSeed(seed, "weight")) * init_std);
  bias = register_parameter("bias", zeros({out}));
}

Tensor Conv1D::forward(const Tensor& x_in) const {
  ModuleScope scope(*this);
  CheckLastDim(*this, x_in, weight.size(0), "in_features");
  const Tensor x = detail::Autocast(x_in, "linear"), w = detail::Autocast(weight, "linear"),
               b = detail::Autocast(bias, "linear");
  detail::AutocastOff off;
  return x.matmul(w) + b;
}

Embedding::Embedding(int64_t num, int64_t dim, uint64_t seed, double init_std)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
  CheckPositive("Embedding", "num_embeddings", num);
  CheckPositive("Embedding", "embedding_dim", dim);
  NoGradGuard no_grad;
  Tensor w = randn({num, dim}, DeriveSeed(seed, "weight"));
  weight = register_parameter("weight", init_std == 1.0 ? w : w * init_std);
}

Tensor Embedding::forward(const Tensor& indices) const {
  ModuleScope scope(*this);
  if (!IsInteger(indices.dtype())) {
    Fail("{} (Embedding): indices must be an integer tensor, not {}; convert with .to(kI64)",
         scope_name(), indices.type_string());
  }
  return embedding(indices, weight);
}

LayerNorm::LayerNorm(int64_t d, double e, bool affine, bool with_bias)
    : Module("LayerNorm"), dim(d), eps(e) {
  CheckPositive("LayerNorm", "dim", d);
  NoGradGuard no_grad;
  if (affine) {
    weight = register_parameter("weight", ones({d}));
    if (with_bias) bias = register_parameter("bias", zeros({d}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  CheckLastDim(*this, x, dim, "dim");
  return layer_norm(x, {dim}, weight, bias, eps);
}

RMSNorm::RMSNorm(int64_t d, double e) : Module("RMSNorm"), dim(d), eps(e) {
  CheckPositive("RMSNorm", "dim", d);
  NoGradGuard no_grad;
  weight = register_parameter("weight", ones({d}));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  CheckLastDim(*this, x, dim, "dim");
  return rms_norm(x, {dim}, weight, eps);
}

Dropout::Dropout(double prob) : Module("Dropout"), p(prob) {
  if (!(prob >= 0 && prob <= 1)) Fail("Dropout: p must be in [0, 1], not {}", prob);
}

Tensor Dropout::forward(const Tensor& x) const {
  if (p == 0 || !is_training()) return x;
  ModuleScope scope(*this);
  return dropout(x, p, true);
}

}  // namespace axle::nn
