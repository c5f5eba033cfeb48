// Fully sharded data parallel on top of SPMD (PyTorch/XLA's FSDPv2, SpmdFullyShardedDataParallel):
// every parameter is sharded on dim 0 over the mesh axis "fsdp"; the compiler's propagation and
// partitioner then produce the all-gathers of the forward and backward and the reduce-scatters
// of the gradients, and the optimizer state follows its parameter.
//
//   axle::spmd::Mesh mesh({8}, {"fsdp"});
//   axle::fsdp::shard(*model, mesh);                     // parameters
//   axle::fsdp::shard_optimizer(opt, mesh);              // AdamW's exp_avg / exp_avg_sq
//   axle::spmd::mark_sharding(batch, mesh, {"fsdp"});    // activations batch-sharded
#pragma once

#include <string>

#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/spmd.h"

namespace axle::fsdp {

// Marks each parameter of `module` with dim 0 over `axis` (a 0-d parameter stays replicated).
void shard(const nn::Module& module, const spmd::Mesh& mesh, const std::string& axis = "fsdp");

// Marks each AdamW state tensor with its parameter's current sharding (sharding_of).
void shard_optimizer(const optim::AdamW& opt, const spmd::Mesh& mesh);

}  // namespace axle::fsdp
