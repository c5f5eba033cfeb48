// checkpoint::Manager's restore (docs/checkpoint.md, "Training checkpoints"): reading a committed
// step's metadata and its blocks back onto any layout. Saving is in manager.cc.
#include "axle/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "axle/compile.h"
#include "checkpoint/manager_internal.h"
#include "checkpoint/restore_plan.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_io.h"
#include "core/error.h"
#include "frontend/lazy.h"
#include "frontend/sharded_step.h"
#include "runtime/world.h"
#include "spmd/shard_util.h"

namespace axle::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace internal;

namespace internal {

// The metadata file of a committed step, parsed and checked for the fields restore reads.
json ReadMetadata(const std::string& step_dir) {
  const std::string path = step_dir + "/" + kMetadataFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("checkpoint '{}' has no {} (it is not a committed Axle checkpoint step)", step_dir, kMetadataFile);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // The metadata's own checksum: a flipped digit in a valid JSON file (a step count, a shape)
  // would otherwise load in silence.
  const std::string commit_path = step_dir + "/" + kCommitFile;
  std::ifstream commit_in(commit_path, std::ios::binary);
  json commit;
  try {
    commit = json::parse(commit_in);
  } catch (const json::exception&) {
    Fail("{}: missing or not valid JSON; the checkpoint step is damaged: restore another step", commit_path);
  }
  const std::string sum = Checksum(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (!commit.is_object() || commit.value("xxh3_64", "") != sum ||
      commit.value("bytes", int64_t{-1}) != static_cast<int64_t>(text.size()))
    Fail("{}: fails its checksum ({} bytes, xxh3_64 {}; {} says {} bytes, xxh3_64 {}): the metadata is corrupted or "
         "comes from another checkpoint; restore another step",
         path, text.size(), sum, commit_path, commit.value("bytes", json(nullptr)).dump(),
         commit.value("xxh3_64", json(nullptr)).dump());
  json meta;
  try {
    meta = json::parse(text);
  } catch (const json::exception& e) {
    Fail("{}: not valid JSON ({}); the file is corrupted: restore another step", path, e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != kFormat || !meta.contains("tensors") ||
      !meta["tensors"].is_object())
    Fail("{}: not an Axle checkpoint metadata file (expected \"format\": \"{}\" and a \"tensors\" object)", path,
         kFormat);
  if (const int v = meta.value("version", 0); v < 1 || v > kVersion)
    Fail("{}: checkpoint format version {} is not one this Axle reads (1 to {}){}", path, v, kVersion,
         v > kVersion ? ": it was written by a newer Axle" : "");
  return meta;
}

}  // namespace internal

json Manager::read_extra(int64_t step) const {
  const json meta = ReadMetadata(StepDir(step));
  return meta.value("extra", json::object());
}

void Manager::restore(int64_t step, State& state) {
  RethrowError();
  last_restore_ = RestoreStats{};
  RestoreStats& stats = last_restore_;
  runtime::World* world = SeveralProcesses();
  const std::string step_dir = StepDir(step);
  const std::string meta_path = step_dir + "/" + kMetadataFile;
  json meta;
  std::vector<std::vector<SavedBlock>> blocks;
  Files files(step_dir);
  std::vector<uint8_t> buffer;  // one chunk
  // Reads chunk `c` of block `b` of tensor `name` into `dst` and checks it.
  auto read = [&](const SavedBlock& b, size_t c, const std::string& name, std::span<uint8_t> dst, bool second_pass) {
    const ChunkOf chunk = Chunk(b, c);
    const std::string path = step_dir + "/" + b.file;
    AXLE_CHECK(static_cast<int64_t>(dst.size()) == chunk.end - chunk.begin, "chunk size");
    if (!ReadRange(files.Open(b.file, name), path, chunk.begin, dst))
      Fail("checkpoint file '{}' is truncated: tensor '{}' needs bytes [{}, {}) of it, which end past the end "
           "of the file; restore another step",
           path, name, chunk.begin, chunk.end);
    ++stats.chunks_read;
    (second_pass ? stats.bytes_read : stats.bytes_checked) += chunk.end - chunk.begin;
    const std::string sum = Checksum(dst);
    if (sum != b.checksums[c])
      Fail("checkpoint file '{}': tensor '{}' (the block at offset {}, bytes [{}, {}) of the file) fails its "
           "checksum (xxh3_64 {}, the metadata says {}): {}",
           path, name, json(Offsets(chunk.box)).dump(), chunk.begin, chunk.end, sum, b.checksums[c],
           second_pass ? "the file changed while it was being restored (the tensors before this one are restored)"
                       : "the file is corrupted; restore another step");
  };
  auto stage = [&](int64_t bytes) {
    buffer.resize(static_cast<size_t>(bytes));
    stats.staging_bytes = std::max(stats.staging_bytes, bytes);
    return std::span<uint8_t>(buffer);
  };
  auto chunks_of = [](const SavedBlock& b) {
    return BoxElements(b.box) == 0 ? size_t{0} : b.checksums.size();
  };
  // Everything that can fail before a tensor changes: with several processes, each checks what it
  // will read, and all fail together with the first problem found (a process that reads other
  // blocks would otherwise go on with a half-restored run).
  std::string error;
  try {
    if (!fs::is_directory(step_dir)) {
      const std::vector<int64_t> steps = all_steps();
      Fail("checkpoint step {} is not in '{}' (committed steps: {})", step, dir_,
           steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", ")));
    }
    meta = ReadMetadata(step_dir);
    const json& saved = meta["tensors"];
    // Every problem of names and types first, in one message.
    std::vector<std::string> problems;
    for (const auto& [name, t] : state.tensors) {
      if (!t.defined()) Fail("checkpoint restore: tensor '{}' of the state is undefined", name);
      auto it = saved.find(name);
      if (it == saved.end()) {
        problems.push_back(fmt::format("tensor '{}' ({}) is not in the checkpoint", name, t.type_string()));
        continue;
      }
      const std::optional<DType> dtype = ParseSafetensorsDType(it->value("dtype", ""));
      std::vector<int64_t> shape;
      if (it->contains("shape") && (*it)["shape"].is_array()) shape = (*it)["shape"].get<std::vector<int64_t>>();
      if (!dtype || *dtype != t.dtype() || shape != Dims(t.sizes()))
        problems.push_back(fmt::format("tensor '{}' is {} here but {}{} in the checkpoint", name, t.type_string(),
                                       it->value("dtype", "?"), json(shape).dump()));
    }
    if (!problems.empty()) {
      std::string list;
      for (size_t i = 0; i < problems.size() && i < 20; ++i) list += "\n  " + problems[i];
      if (problems.size() > 20) list += fmt::format("\n  ... and {} more", problems.size() - 20);
      Fail("{}: the checkpoint does not match the state being restored (a checkpoint of another model or "
           "configuration?):{}",
           meta_path, list);
    }
    // Note [Restoring in two passes]: the first pass reads every chunk this process needs once,
    // into one reused buffer, and checks it, so a damaged checkpoint fails before any tensor
    // changes; the second assembles one tensor at a time and rebinds it at once, so its old
    // buffers go before the next tensor is read: the restore holds one tensor's new blocks and one
    // chunk beside the state, not a second copy of it. (The second pass checks the checksums
    // again; a file that changes between the passes is reported, with the tensors before it
    // already restored.)
    for (const auto& [name, t] : state.tensors) {
      blocks.push_back(ParseBlocks(saved[name], name, t.impl()->type, meta_path));
      const Assembly a = PlanAssembly(t);
      for (const SavedBlock& b : blocks.back())
        for (size_t c = 0; c < chunks_of(b); ++c) {
          const ChunkOf chunk = Chunk(b, c);
          if (a.Needs(chunk.box)) read(b, c, name, stage(chunk.end - chunk.begin), false);
        }
    }
  } catch (const std::exception& e) {
    if (world == nullptr) throw;
    error = e.what();
  }
  if (world != nullptr) {
    const auto all = world->AllGatherBytes(Bytes(error), fmt::format("checkpoint restore of step {}", step));
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty())
        Fail("checkpoint restore of step {} (process {} of {} found it): {}", step, r, all.size(), Text(all[r]));
  }
  // The check's buffer goes before the first new block is allocated.
  std::vector<uint8_t>().swap(buffer);
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const auto& [name, t] = state.tensors[i];
    const DType dtype = t.impl()->type.dtype;
    const int64_t elem = DTypeSize(dtype);
    Assembly a = PlanAssembly(t);
    stats.largest_block_bytes = std::max(stats.largest_block_bytes, a.local.NumElements() * elem);
    const bool in_place = PlanInPlace(t, a);  // Note [Restoring in place]
    if (!in_place) {
      Allocate(a, dtype);
      stats.new_block_bytes = std::max(stats.new_block_bytes, a.Bytes(dtype));
    } else {
      ++stats.tensors_in_place;
    }
    for (const SavedBlock& b : blocks[i]) {
      if (!a.Needs(b.box)) continue;
      // A saved block that is exactly one new block (the same layout) is read straight into it.
      const auto direct = std::find(a.buffer_boxes.begin(), a.buffer_boxes.end(), b.box);
      const size_t direct_k = static_cast<size_t>(direct - a.buffer_boxes.begin());
      if (direct != a.buffer_boxes.end() && a.boxes[direct_k] == b.box) {
        std::span<uint8_t> dst = a.buffers[direct_k]->mutable_bytes();
        for (size_t c = 0; c < chunks_of(b); ++c) {
          const ChunkOf chunk = Chunk(b, c);
          read(b, c, name, dst.subspan(static_cast<size_t>(chunk.begin - b.begin),
                                       static_cast<size_t>(chunk.end - chunk.begin)), true);
        }
        for (size_t k = 0; k < a.boxes.size(); ++k)
          if (k != direct_k)
            CopyRegion(dst, b.box, a.buffers[k]->mutable_bytes(), a.buffer_boxes[k], Intersect(a.boxes[k], b.box),
                       elem);
        continue;
      }
      for (size_t c = 0; c < chunks_of(b); ++c) {
        const ChunkOf chunk = Chunk(b, c);
        if (!a.Needs(chunk.box)) continue;
        std::span<uint8_t> src = stage(chunk.end - chunk.begin);
        read(b, c, name, src, true);
        for (size_t k = 0; k < a.boxes.size(); ++k)
          CopyRegion(src, chunk.box, a.buffers[k]->mutable_bytes(), a.buffer_boxes[k], Intersect(a.boxes[k], chunk.box),
                     elem);
      }
    }
    if (in_place) continue;
    Tensor value = Finish(a, t, fmt::format("checkpoint {} tensor {}", step_dir, name));
    set_data(state.tensors[i].second, value);
  }
  std::vector<uint8_t>().swap(buffer);
  state.extra = meta.value("extra", json::object());
}

}  // namespace axle::checkpoint
