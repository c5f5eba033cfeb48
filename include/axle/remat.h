// Gradient checkpointing: recompute a region's activations in the backward instead of keeping
// them (PyTorch's torch.utils.checkpoint.checkpoint, JAX's jax.checkpoint; docs/memory.md).
//
//   Tensor y = axle::remat([&](const std::vector<Tensor>& in) { return block(in[0]); }, x);
//
// The function runs once, traced as usual; its nodes form a region. backward() recomputes the
// region from its inputs (the saved activations) just before it differentiates it, behind an
// optimization barrier that keeps the compiler from merging the recomputation back into the
// forward, so the region's intermediates die after the forward. Gradients are bitwise those
// without remat. Policies: kFull recomputes every node; kSaveProducts (selective remat, the usual
// "save matmuls" policy) keeps the products' results and recomputes the elementwise work and the
// norms between them. A region inside a region is part of the outer one.
//
// (Not named `checkpoint`: axle::checkpoint is the namespace of saved training state,
// include/axle/checkpoint.h.)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "axle/tensor.h"

namespace axle {

enum class RematPolicy {
  kNone,          // no recomputation: fn just runs
  kFull,          // recompute the whole region
  kSaveProducts,  // keep dot_general results, recompute the rest ("selective")
};

// "none", "full", "selective" (the --remat flag's spellings); anything else is an error naming them.
RematPolicy ParseRematPolicy(const std::string& name);
std::string RematPolicyName(RematPolicy policy);

std::vector<Tensor> remat(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, RematPolicy policy = RematPolicy::kFull);
// One tensor in, one out.
Tensor remat(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
             RematPolicy policy = RematPolicy::kFull);

}  // namespace axle
