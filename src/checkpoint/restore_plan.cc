// How a restore lays out what it reads (checkpoint/restore_plan.h): saved blocks and their
// chunks, the new blocks of this process's devices, and restoring in place.
#include "checkpoint/restore_plan.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "frontend/lazy.h"
#include "frontend/sharded_step.h"
#include "runtime/world.h"
#include "spmd/shard_util.h"

namespace axle::checkpoint {

using json = nlohmann::json;

Box WholeBox(const Shape& shape) {
  Box b;
  for (int64_t d : shape.dims()) b.emplace_back(0, d);
  return b;
}

// Note [Restoring in chunks]: restore_plan.h.

int64_t BlockRows(const Box& box) { return box.empty() ? 1 : box[0].second - box[0].first; }

int64_t ChunkRows(const Box& box, int64_t elem, int64_t chunk_bytes) {
  const int64_t rows = BlockRows(box);
  const int64_t row_bytes = rows > 0 ? BoxElements(box) / rows * elem : 0;
  if (row_bytes <= 0) return std::max<int64_t>(rows, 1);
  return std::clamp<int64_t>(chunk_bytes / row_bytes, 1, std::max<int64_t>(rows, 1));
}



ChunkOf Chunk(const SavedBlock& b, size_t c) {
  if (b.box.empty()) return {b.box, b.begin, b.end};
  const int64_t rows = BlockRows(b.box);
  const int64_t row_bytes = rows > 0 ? (b.end - b.begin) / rows : 0;
  const int64_t lo = static_cast<int64_t>(c) * b.chunk_rows, hi = std::min(rows, lo + b.chunk_rows);
  ChunkOf out{b.box, b.begin + lo * row_bytes, b.begin + hi * row_bytes};
  out.box[0] = {b.box[0].first + lo, b.box[0].first + hi};
  return out;
}

std::vector<SavedBlock> ParseBlocks(const json& entry, const std::string& name, const ir::TensorType& type,
                                    const std::string& meta_path) {
  std::vector<SavedBlock> out;
  const int64_t rank = type.shape.rank();
  const int64_t elem = DTypeSize(type.dtype);
  int64_t covered = 0;
  try {
    for (const json& s : entry.at("shards")) {
      SavedBlock b;
      const std::vector<int64_t> offset = s.at("offset").get<std::vector<int64_t>>();
      const std::vector<int64_t> shape = s.at("shape").get<std::vector<int64_t>>();
      if (static_cast<int64_t>(offset.size()) != rank || static_cast<int64_t>(shape.size()) != rank)
        Fail("rank");
      for (int64_t k = 0; k < rank; ++k) {
        if (offset[k] < 0 || shape[k] < 0 || offset[k] + shape[k] > type.shape.dim(k)) Fail("box");
        b.box.emplace_back(offset[k], offset[k] + shape[k]);
      }
      b.file = s.at("file").get<std::string>();
      if (b.file.empty() || b.file.find('/') != std::string::npos || b.file[0] == '.') Fail("file name");
      const auto range = s.at("byte_range").get<std::vector<int64_t>>();
      if (range.size() != 2 || range[0] < 0 || range[1] - range[0] != BoxElements(b.box) * elem) Fail("range");
      b.begin = range[0];
      b.end = range[1];
      const int64_t rows = BlockRows(b.box);
      if (s.contains("chunks")) {  // version 2
        b.chunk_rows = s["chunks"].at("rows").get<int64_t>();
        b.checksums = s["chunks"].at("xxh3_64").get<std::vector<std::string>>();
        if (b.chunk_rows < 1) Fail("chunk rows");
      } else {  // version 1: one checksum for the block
        b.chunk_rows = std::max<int64_t>(rows, 1);
        b.checksums = {s.at("xxh3_64").get<std::string>()};
      }
      const int64_t chunks = BoxElements(b.box) == 0 ? 0 : (rows + b.chunk_rows - 1) / b.chunk_rows;
      if (static_cast<int64_t>(b.checksums.size()) != chunks && BoxElements(b.box) != 0) Fail("chunk count");
      covered += BoxElements(b.box);
      out.push_back(std::move(b));
    }
  } catch (const Error&) {
    Fail("{}: tensor '{}': a shard entry is malformed (offset/shape outside {}, a byte range that does not hold its "
         "elements, chunk checksums that do not cover its rows, or a file name outside the step directory); the "
         "metadata is corrupted",
         meta_path, name, type.ToString());
  } catch (const json::exception& e) {
    Fail("{}: tensor '{}': a shard entry is malformed ({}); the metadata is corrupted", meta_path, name, e.what());
  }
  if (covered != type.NumElements())
    Fail("{}: tensor '{}': its shards hold {} of its {} elements; the metadata is corrupted", meta_path, name,
         covered, type.NumElements());
  return out;
}


Target TargetLayout(const Tensor& t) {
  const detail::TensorImpl& impl = *t.impl();
  Target out;
  if (impl.sharding && impl.mesh) {
    out.mesh = impl.mesh;
    out.sharding = spmd::NormalizeSharding(impl.sharding, t.dim(), *impl.mesh);
  } else if (impl.data && impl.data->sharding && impl.data->mesh) {
    out.mesh = impl.data->mesh;
    out.sharding = spmd::NormalizeSharding(impl.data->sharding, t.dim(), *impl.data->mesh);
  }
  if (out.mesh && out.mesh->size() == 1) out.mesh.reset();
  return out;
}


Assembly PlanAssembly(const Tensor& t) {
  Assembly a;
  a.target = TargetLayout(t);
  const ir::TensorType& type = t.impl()->type;
  if (!a.target.mesh) {
    a.boxes.push_back(WholeBox(type.shape));
    a.buffer_boxes.push_back(a.boxes.back());
    a.block_of_device.push_back(0);
    a.local = type.shape;
    return a;
  }
  const ir::Mesh& mesh = *a.target.mesh;
  std::vector<std::vector<std::string>> dims(static_cast<size_t>(t.dim()));
  for (size_t k = 0; k < dims.size() && k < a.target.sharding.dims.size(); ++k) dims[k] = a.target.sharding.dims[k];
  a.local = spmd::LocalShape(type.shape, a.target.sharding, mesh);
  std::map<Box, size_t> index;
  for (int64_t d = 0; d < mesh.size(); ++d) {
    if (!runtime::IsLocalDevice(d)) {
      a.block_of_device.push_back(Assembly::kNone);
      continue;
    }
    Box block = DeviceBlock(type.shape.dims(), dims, mesh, d);
    Box padded;
    for (size_t k = 0; k < block.size(); ++k) padded.emplace_back(block[k].first, block[k].first + a.local.dim(k));
    auto [it, fresh] = index.emplace(padded, a.boxes.size());
    if (fresh) {
      a.boxes.push_back(block);
      a.buffer_boxes.push_back(padded);
    }
    a.block_of_device.push_back(it->second);
  }
  return a;
}

void Allocate(Assembly& a, DType dtype) {
  for (size_t k = 0; k < a.boxes.size(); ++k)
    a.buffers.push_back(std::make_shared<ir::Literal>(ir::TensorType(dtype, a.local)));  // zero padding
}

// Note [Restoring in place]
// When a tensor already has the layout it restores into and nothing else refers to its buffers
// (AsyncBuffer::ExclusiveBuffers: no other tensor, no pending save, no step in flight), the
// restore writes the saved values straight into them: no new blocks beside the state, only the
// chunk buffer. So is a tensor annotated with a sharding but still held whole (one process
// only; below), which is how `axle train --resume` finds its state: built whole, annotated, not
// yet split by a step. Anything else (another layout, a buffer a save still references) gets
// new blocks, and the tensor is rebound to them. Replicas keep their own buffers: each is
// written.
bool PlanInPlace(const Tensor& t, Assembly& a) {
  detail::TensorImpl& impl = *t.impl();
  if (impl.data == nullptr || impl.data.use_count() != 1) return false;  // another tensor shares the value
  if (impl.value != nullptr && impl.epoch == detail::CurrentTrace().epoch) return false;  // pending
  bool whole = false;  // the value is held whole though the target is sharded
  {
    const std::shared_ptr<detail::ShardedData> sharded = impl.data->GetSharded();
    if (sharded != nullptr && !(a.target.mesh && sharded->mesh == *a.target.mesh &&
                                sharded->sharding == a.target.sharding))
      return false;
    // Annotated but held whole (mark_sharding on a materialized value: its next step splits
    // it): with one process, the whole buffer it has is the cheapest place for the saved value,
    // and the step splits it as it would have split the old one. With several, each process
    // reads only its shards' chunks into new shards instead.
    if (sharded == nullptr && a.target.mesh) {
      if (runtime::ProcessCount() > 1) return false;
      whole = true;
    }
  }
  std::vector<runtime::BufferPtr> buffers = impl.data->ExclusiveBuffers();
  if (whole && buffers.size() == 1) {
    if (static_cast<int64_t>(buffers[0]->bytes().size()) != impl.type.NumElements() * DTypeSize(impl.type.dtype))
      return false;
    Assembly in_place;
    in_place.boxes = {WholeBox(impl.type.shape)};
    in_place.buffer_boxes = in_place.boxes;
    in_place.buffers = std::move(buffers);
    in_place.block_of_device = {0};
    in_place.local = impl.type.shape;
    a = std::move(in_place);
    return true;
  }
  const int64_t bytes = a.local.NumElements() * DTypeSize(impl.type.dtype);
  if (whole || buffers.empty() || buffers.size() != a.block_of_device.size()) return false;
  Assembly in_place;
  in_place.target = a.target;
  in_place.local = a.local;
  for (size_t d = 0; d < buffers.size(); ++d) {
    const size_t k = a.block_of_device[d];
    if (k == Assembly::kNone) continue;
    if (buffers[d] == nullptr || static_cast<int64_t>(buffers[d]->bytes().size()) != bytes) return false;
    in_place.boxes.push_back(a.boxes[k]);
    in_place.buffer_boxes.push_back(a.buffer_boxes[k]);
    in_place.buffers.push_back(std::move(buffers[d]));
  }
  a = std::move(in_place);
  return true;
}

Tensor Finish(Assembly& a, const Tensor& t, const std::string& origin) {
  if (!a.target.mesh) return detail::MakeMaterialized(a.buffers[0], origin);
  auto data = std::make_shared<detail::ShardedData>();
  data->mesh = *a.target.mesh;
  data->sharding = a.target.sharding;
  data->global = t.impl()->type;
  for (size_t b : a.block_of_device) data->shards.push_back(b == Assembly::kNone ? nullptr : a.buffers[b]);
  return detail::MakeMaterializedSharded(std::move(data), origin);
}


}  // namespace axle::checkpoint
