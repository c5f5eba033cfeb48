// Composite ops, written with Tensor calls so that they decompose into IR primitives (the
// compiler fuses them back). Each follows PyTorch's definition; tests/frontend checks them
// against their definitions on the interpreter and by finite differences in f64.
#include <fmt/format.h>

#include <cmath>

#include "frontend/lazy.h"
#include "frontend/ops_internal.h"

namespace axle {
namespace detail {
ir::Value* NextRandomBits(const Dims& shape);  // autograd.cc
}

namespace {
void CheckFloat(const Tensor& x, std::string_view op) {
  if (!IsFloat(x.dtype())) Fail("{}: needs a floating tensor, got {}", op, x.type_string());
}

Dims TrailingDims(const Tensor& x, const Dims& normalized_shape, std::string_view op) {
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  bool ok = n >= 1 && n <= x.dim();
  for (int64_t i = 0; ok && i < n; ++i)
    ok = x.size(x.dim() - n + i) == normalized_shape[static_cast<size_t>(i)];
  if (!ok)
    Fail("{}: normalized_shape [{}] is not the trailing shape of the input {}", op,
         fmt::join(normalized_shape, ","), x.type_string());
  Dims dims;
  for (int64_t i = x.dim() - n; i < x.dim(); ++i) dims.push_back(i);
  return dims;
}

void CheckAffine(const Tensor& p, const Dims& normalized_shape, std::string_view op,
                 std::string_view what) {
  if (p.defined() && p.sizes() != normalized_shape)
    Fail("{}: {} is {} but normalized_shape is [{}]", op, what, p.type_string(),
         fmt::join(normalized_shape, ","));
}
}  // namespace

// Note [Composite ops under autocast]: a composite op casts its inputs as its own policy says
// (include/axle/autocast.h) and builds its inside with autocast off, so the sums and products it
// is made of follow the op's policy rather than their own (a softmax set to bf16 stays bf16
// through its sum).
Tensor softmax(const Tensor& x_in, int64_t dim) {
  const Tensor x = detail::Autocast(x_in, "softmax");
  detail::AutocastOff off;
  CheckFloat(x, "softmax");
  const int64_t d = detail::NormDim(dim, x.dim(), "softmax");
  // Subtracting the max keeps exp in range; the max carries no gradient (it cancels).
  Tensor e = (x - x.amax({d}, true).detach()).exp();
  return e / e.sum({d}, true);
}

Tensor log_softmax(const Tensor& x_in, int64_t dim) {
  const Tensor x = detail::Autocast(x_in, "log_softmax");
  detail::AutocastOff off;
  CheckFloat(x, "log_softmax");
  const int64_t d = detail::NormDim(dim, x.dim(), "log_softmax");
  Tensor shifted = x - x.amax({d}, true).detach();
  return shifted - shifted.exp().sum({d}, true).log();
}

Tensor layer_norm(const Tensor& x_in, const Dims& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const Tensor x = detail::Autocast(x_in, "layer_norm"), weight = detail::Autocast(weight_in, "layer_norm"),
               bias = detail::Autocast(bias_in, "layer_norm");
  detail::AutocastOff off;
  CheckFloat(x, "layer_norm");
  const Dims dims = TrailingDims(x, normalized_shape, "layer_norm");
  CheckAffine(weight, normalized_shape, "layer_norm", "weight");
  CheckAffine(bias, normalized_shape, "layer_norm", "bias");
  Tensor mean = x.mean(dims, true);
  Tensor centered = x - mean;
  Tensor var = (centered * centered).mean(dims, true);  // biased, as PyTorch's layer_norm
  Tensor y = centered * (var + eps).rsqrt();
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor rms_norm(const Tensor& x_in, const Dims& normalized_shape, const Tensor& weight_in, double eps) {
  const Tensor x = detail::Autocast(x_in, "rms_norm"), weight = detail::Autocast(weight_in, "rms_norm");
  detail::AutocastOff off;
  CheckFloat(x, "rms_norm");
  const Dims dims = TrailingDims(x, normalized_shape, "rms_norm");
  CheckAffine(weight, normalized_shape, "rms_norm", "weight");
  Tensor y = x * ((x * x).mean(dims, true) + eps).rsqrt();
  return weight.defined() ? y * weight : y;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  CheckFloat(x, "gelu");
  if (approximate == "none") return x * 0.5 * (1.0 + (x * M_SQRT1_2).erf());
  if (approximate == "tanh") {
    // 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi), written as h (1 + t) with
    // h = 0.5 x and t = tanh(x (k + 0.044715 k x^2)): the same function (rounded differently),
    // whose backward, as autodiff writes it, is 21 arithmetic ops an element against 25 (x^3 as
    // x * x * x gave three product-rule terms; GPT-2 small's two GELU backward kernels were its
    // costliest after the products).
    const double k = std::sqrt(2.0 / M_PI);
    const Tensor h = 0.5 * x;
    return h * (1.0 + (x * (k + (0.044715 * k) * (x * x))).tanh());
  }
  Fail("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
}

Tensor silu(const Tensor& x) {
  CheckFloat(x, "silu");
  return x * x.sigmoid();
}

Tensor relu(const Tensor& x) { return maximum(x, zeros_like(x)); }

Tensor dropout(const Tensor& x, double p, bool training) {
  CheckFloat(x, "dropout");
  if (p < 0 || p > 1) Fail("dropout: probability has to be between 0 and 1, but got {}", p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // keep where the top 24 random bits, as a fraction, are >= p.
  ir::Value* bits = detail::NextRandomBits(x.sizes());
  Tensor u = detail::MakePending(bits, false);
  Tensor keep = (u / 256.0).floor() >= std::ceil(p * 16777216.0);  // exact in f32
  return where(keep, x * (1.0 / (1.0 - p)), 0.0);
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (IsFloat(indices.dtype()) || indices.dtype() == DType::kBool)
    Fail("embedding: indices must be integers, got {}", indices.type_string());
  if (weight.dim() != 2)
    Fail("embedding: weight must be [num_embeddings, embedding_dim], got {}", weight.type_string());
  ir::Value* g = detail::B().Build1(ir::OpKind::kGather,
                                    {detail::ValueOf(weight), detail::ValueOf(indices)},
                                    ir::GatherAttrs{0, 0});
  return detail::MakePending(g, {&weight});
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, int64_t ignore_index,
                     const std::string& reduction) {
  const Tensor logits = detail::Autocast(logits_in, "cross_entropy");
  detail::AutocastOff off;
  CheckFloat(logits, "cross_entropy");
  if (IsFloat(targets.dtype()) || targets.dtype() == DType::kBool)
    Fail("cross_entropy: targets must be class indices (integers), got {}", targets.type_string());
  if (logits.dim() < 1 || targets.dim() != logits.dim() - 1)
    Fail("cross_entropy: logits {} need targets of their leading shape, got {}",
         logits.type_string(), targets.type_string());
  for (int64_t i = 0; i < targets.dim(); ++i)
    if (targets.size(i) != logits.size(i))
      Fail("cross_entropy: logits {} and targets {} differ in dim {}", logits.type_string(),
           targets.type_string(), i);
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    Fail("cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"{}\"", reduction);
  // -log_softmax(x)[t] = logsumexp(x - m) - (x[t] - m) with m the row max (as optax's
  // softmax_cross_entropy_with_integer_labels): the same value, bit for bit, as gathering from the
  // whole log_softmax, without writing that [..., classes] tensor (GPT-2's logits: 1 MB a step).
  // The target's logit by gather (its gradient is one scatter_add). An ignored target gathers
  // class 0 and is masked out below.
  Tensor t = targets.to(DType::kI64);
  Tensor valid_mask = t != static_cast<double>(ignore_index);
  Tensor safe = where(valid_mask, t, zeros_like(t));
  Tensor m = logits.amax({-1}, true).detach();
  Tensor lse = (logits - m).exp().sum({-1}, true).log();
  Tensor nll = (lse - (logits.gather(-1, safe.unsqueeze(-1)) - m)).squeeze(-1);
  Tensor valid = valid_mask.to(logits.dtype());
  nll = nll * valid;
  if (reduction == "none") return nll;
  if (reduction == "sum") return nll.sum();
  return nll.sum() / valid.sum();  // NaN when every target is ignored, as in PyTorch
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    bool is_causal) {
  // Under autocast: the two products in the lower precision, the softmax between them as its own
  // policy says (f32 by default: the scores are cast up, the probabilities back down).
  const Tensor q = detail::Autocast(q_in, "attention"), k = detail::Autocast(k_in, "attention"),
               v = detail::Autocast(v_in, "attention");
  const bool cast = autocast_enabled();
  const CastPolicy softmax_policy = cast ? autocast_policy("softmax") : CastPolicy::kNone;
  detail::AutocastOff off;
  CheckFloat(q, "scaled_dot_product_attention");
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim() || q.size(-1) != k.size(-1) ||
      k.size(-2) != v.size(-2))
    Fail("scaled_dot_product_attention: q {}, k {}, v {} must be [..., T, D] with matching D "
         "(q, k) and T (k, v)",
         q.type_string(), k.type_string(), v.type_string());
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor att = detail::MatMulNoCast(q, k.mT()) * scale;
  if (is_causal) {
    const int64_t tq = q.size(-2), tk = k.size(-2);
    Tensor mask = ones({tq, tk}, DType::kBool).tril().logical_not();  // true above the diagonal
    att = att.masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  if (softmax_policy == CastPolicy::kFloat32 && att.dtype() != DType::kF64) att = att.to(DType::kF32);
  Tensor p = softmax(att, -1);
  if (cast) p = p.to(v.dtype());
  return detail::MatMulNoCast(p, v);
}

}  // namespace axle
