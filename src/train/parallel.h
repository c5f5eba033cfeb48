// `axle train --devices N --mesh fsdp=4,tp=2`: the mesh and the GPT-2 sharding plan
// (docs/spmd.md, "axle train on a mesh").
//
// Axes: dp (data parallel: the batch is split, parameters replicated), fsdp (PyTorch/XLA's FSDPv2:
// the batch is split and every parameter and its optimizer state is sharded on dim 0), tp
// (Megatron-style tensor parallel: c_attn and c_fc column-parallel, the c_proj layers
// row-parallel). They combine: with fsdp and tp, a row-parallel weight's dim 0 is split over
// [tp, fsdp].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/spmd.h"
#include "spmd/shard_util.h"

namespace axle::train {

// The mesh of `mesh_text` ("dp=2,fsdp=2,tp=2"; empty = dp over all devices) for `devices`
// devices. Throws axle::Error naming the flag on an unknown or repeated axis, a size < 1, or a
// product that is not the device count. nullopt for one device and no --mesh.
std::optional<spmd::Mesh> ParseMesh(const std::string& mesh_text, int64_t devices);

// The spec of GPT-2 parameter `name` (rank `rank`) on `mesh`.
spmd::PartitionSpec Gpt2ParameterSpec(const std::string& name, int64_t rank, const spmd::Mesh& mesh);

// Marks every parameter of `model`: before the optimizer is made and before the model's first
// sync(), so that the init and AdamW's moments (which follow their parameter's layout) are
// computed as shards and no process holds the model whole.
void ShardGpt2Parameters(const nn::Module& model, const spmd::Mesh& mesh);

// The batch's spec: dim 0 over the mesh's dp and fsdp axes.
spmd::PartitionSpec BatchSpec(const spmd::Mesh& mesh);

// Bytes of one device's shard of each tensor together.
int64_t BytesPerDevice(const std::vector<Tensor>& tensors, const spmd::Mesh* mesh);

}  // namespace axle::train
