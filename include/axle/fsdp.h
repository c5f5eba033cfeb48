// Fully sharded data parallel on top of SPMD (PyTorch/XLA's FSDPv2, SpmdFullyShardedDataParallel),
// and Megatron-style tensor parallelism beside it: every parameter is sharded on dim 0 over the
// mesh axis "fsdp"; with a tensor-parallel axis, the projections each module type's
// parallel_plan() names are split colwise or rowwise over it too. The compiler's propagation and
// partitioner then produce the all-gathers of the forward and backward, the reduce-scatters of
// the gradients and tensor parallelism's all-reduces; the optimizer state follows its parameter.
//
//   axle::spmd::Mesh mesh({4, 2}, {"fsdp", "tp"});
//   axle::fsdp::shard(*model, mesh, {.fsdp_axis = "fsdp", .tp_axis = "tp"});   // parameters
//   axle::optim::AdamW opt(model->parameters(), 1e-3);
//   axle::fsdp::shard_optimizer(opt, mesh);                                     // exp_avg / exp_avg_sq
//   axle::spmd::mark_sharding(batch, mesh, {"fsdp"});                           // the batch
//
// The layout depends on module types, never on parameter names: GPT-2's and Llama's attention and
// MLP declare their plans (axle/nn.h, Module::parallel_plan), and a new model gets tensor
// parallelism by declaring its own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/spmd.h"

namespace axle::fsdp {

// Which mesh axes shard the parameters; an empty name leaves that kind of sharding out.
struct Layout {
  std::string fsdp_axis = "fsdp";  // every parameter of rank >= 1: dim 0
  std::string tp_axis;             // the projections of each module's parallel_plan()
};

// The spec of every parameter of `module`, in named_parameters() order: the tensor-parallel dim
// (a colwise Linear's weight dim 0 and bias, a rowwise Linear's weight dim 1; Conv1D's [in, out]
// weight the other way round) over tp_axis, and dim 0 over fsdp_axis after it. Throws axle::Error
// for an axis the mesh lacks and for a plan that names a child that is missing or is not a
// Linear or Conv1D.
std::vector<std::pair<std::string, spmd::PartitionSpec>> parameter_specs(const nn::Module& module,
                                                                         const spmd::Mesh& mesh,
                                                                         const Layout& layout = {});

// Marks each parameter of `module` with its parameter_specs() spec: before the optimizer is made
// and before the model's first sync(), so that the init and AdamW's moments are computed as shards.
void shard(const nn::Module& module, const spmd::Mesh& mesh, const Layout& layout);
// FSDP alone: dim 0 of each parameter over `axis` (a 0-d parameter stays replicated).
void shard(const nn::Module& module, const spmd::Mesh& mesh, const std::string& axis = "fsdp");

// Marks each AdamW state tensor with its parameter's current sharding (sharding_of).
void shard_optimizer(const optim::AdamW& opt, const spmd::Mesh& mesh);

}  // namespace axle::fsdp
