// `axle train --devices N --mesh fsdp=4,tp=2`: the mesh and the sharding plan
// (docs/spmd.md, "axle train on a mesh").
//
// Axes: dp (data parallel: the batch is split, parameters replicated), fsdp (PyTorch/XLA's FSDPv2:
// the batch is split and every parameter and its optimizer state is sharded on dim 0), tp
// (Megatron-style tensor parallel, as each module type's parallel_plan() declares it: GPT-2's c_attn
// and c_fc, Llama's q/k/v, gate and up projections column-parallel, the output and down
// projections row-parallel). They combine: with fsdp and tp, a column-parallel Linear's weight
// dim 0 is split over [tp, fsdp].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "axle/fsdp.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/spmd.h"
#include "spmd/shard_util.h"

namespace axle::train {

// The mesh of `mesh_text` ("dp=2,fsdp=2,tp=2"; empty = dp over all devices) for `devices`
// devices. Throws axle::Error naming the flag on an unknown or repeated axis, a size < 1, or a
// product that is not the device count. nullopt for one device and no --mesh.
std::optional<spmd::Mesh> ParseMesh(const std::string& mesh_text, int64_t devices);

// "2x4" -> {2, 4}, "8" -> {8}: a mesh shape of at most two axes (`flag` names it in errors).
std::vector<int64_t> ParseMeshShape(const std::string& text, const std::string& flag);

// The mesh of auto-sharding (`axle train --mesh auto`, `axle shard-plan`): axes x and y of
// `shape_text` ("2x4"; empty: one axis x over all devices), axes of one device dropped. Throws
// axle::Error naming --mesh-shape when its product is not `devices`.
spmd::Mesh AutoMesh(const std::string& shape_text, int64_t devices);

// The parameter layout of `mesh`'s axes: dim 0 over fsdp and each module's tensor-parallel plan
// over tp, each when the mesh has that axis (axle::fsdp::shard marks the parameters with it).
fsdp::Layout MeshLayout(const spmd::Mesh& mesh);

// The batch's spec: dim 0 over the mesh's dp and fsdp axes.
spmd::PartitionSpec BatchSpec(const spmd::Mesh& mesh);

// Bytes of one device's shard of each tensor together.
int64_t BytesPerDevice(const std::vector<Tensor>& tensors, const spmd::Mesh* mesh);

}  // namespace axle::train
