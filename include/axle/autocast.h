// Automatic mixed precision (PyTorch's torch.autocast, docs/precision.md).
//
//   {
//     axle::autocast ac(axle::kBFloat16);
//     Tensor loss = model.forward(idx, targets);   // products in bf16, softmax / norms / loss in f32
//   }
//   loss.backward();                               // gradients reach the f32 parameters as f32
//
// While an autocast scope is alive, each op listed below casts its floating inputs as its policy
// says before it is traced: kLowerPrecision ops (the products and attention) compute in the scope's
// dtype, kFloat32 ops (softmax, norms, losses, sums) in f32; every other op runs in the dtype its
// inputs have (an elementwise op after a bf16 product stays bf16; a bf16 result added to an f32
// residual promotes to f32). Parameters stay f32 (the "master weights"): a cast is an IR convert,
// so its gradient is converted back and the optimizer sees f32 gradients. Only f32 and the other
// half dtype are cast down; f64 tensors are left alone, as in PyTorch.
//
// The lists (autocast_ops) are PyTorch's CUDA lists restricted to Axle's ops:
//   lower precision: matmul, einsum, linear (nn::Linear, nn::Conv1D: input, weight and bias),
//                    attention (scaled_dot_product_attention's two products)
//   float32:         softmax, log_softmax, layer_norm, rms_norm, cross_entropy, sum, mean, var, prod
// set_policy overrides one op inside a scope (and the scopes within it):
//
//   axle::autocast ac(axle::kBFloat16);
//   ac.set_policy("softmax", axle::CastPolicy::kLowerPrecision);
//
// The scope is per thread, as PyTorch's. A step traced under autocast is another graph than the
// same step in f32: it compiles once more, and the recompilation report (AXLE_DEBUG=1) says the
// precision changed.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"

namespace axle {

inline constexpr DType kFloat32 = DType::kF32;
inline constexpr DType kBFloat16 = DType::kBF16;
inline constexpr DType kFloat16 = DType::kF16;

enum class CastPolicy {
  kLowerPrecision,  // floating inputs cast to the scope's dtype
  kFloat32,         // half inputs cast to f32
  kNone,            // inputs as they are
};

class autocast {
 public:
  // dtype: bf16 or f16 (anything else is an error naming them). enabled = false opens a scope in
  // which autocast is off (torch.autocast(enabled=False) inside an autocast region: an f32 region).
  explicit autocast(DType dtype = kBFloat16, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

  // Overrides op's policy while this scope is the innermost one or encloses it. op must be one
  // of autocast_ops(); anything else is an error naming them.
  autocast& set_policy(const std::string& op, CastPolicy policy);

 private:
  size_t depth_;
};

// Whether an enabled autocast scope is open on this thread, and its dtype (f32 when none).
bool autocast_enabled();
DType autocast_dtype();
// op's policy in the current scope (kNone when autocast is off).
CastPolicy autocast_policy(const std::string& op);
// The ops with a default policy of `policy` (kNone: every op autocast knows).
std::vector<std::string> autocast_ops(CastPolicy policy);

}  // namespace axle
