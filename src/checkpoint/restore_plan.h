// What a checkpoint restore reads and where it puts it (manager.cc's Manager::restore): the saved
// blocks of a tensor and their checksummed chunks, the new blocks of this process's devices
// (Assembly), and whether a tensor takes the values in its own buffers (PlanInPlace).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "axle/tensor.h"
#include "checkpoint/shard_io.h"
#include "core/error.h"
#include "ir/mesh.h"
#include "runtime/backend.h"

namespace axle::checkpoint {

// Note [Restoring in chunks]
// A saved block is checksummed in chunks: runs of whole rows of its first dimension, about
// ManagerOptions::chunk_bytes each (a scalar is one chunk). A chunk is a box and a contiguous byte
// range of the file, so a restore reads only the chunks that overlap the new blocks this process
// holds (a process of fsdp=8 reads an eighth of a tensor that is saved whole and restored split
// along its first dimension), checks each as it arrives, and copies it into those blocks: besides
// the new blocks it holds one chunk, never a whole saved block. (A split of a later dimension
// needs every chunk of a block, each read once.) Version 1 had one checksum per block: one chunk
// of all its rows.

Box WholeBox(const Shape& shape);
// The rows of its first dimension that block `box` has (1 for a scalar), and how many go in a chunk.
int64_t BlockRows(const Box& box);
int64_t ChunkRows(const Box& box, int64_t elem, int64_t chunk_bytes);

// A saved block as the metadata describes it, validated against its tensor's type.
struct SavedBlock {
  Box box;
  std::string file;
  int64_t begin = 0, end = 0;
  int64_t chunk_rows = 1;
  std::vector<std::string> checksums;  // per chunk
};

// Chunk `c` of saved block `b`: its box (rows of dimension 0), its bytes in the file.
struct ChunkOf {
  Box box;
  int64_t begin = 0, end = 0;
};
ChunkOf Chunk(const SavedBlock& b, size_t c);

// The saved blocks of tensor `name` (metadata entry `entry`), validated against its type; errors
// name `meta_path`.
std::vector<SavedBlock> ParseBlocks(const nlohmann::json& entry, const std::string& name, const ir::TensorType& type,
                                    const std::string& meta_path);

// The layout a tensor restores into: its annotation, else the layout its data has, else whole.
struct Target {
  std::optional<ir::Mesh> mesh;
  ir::Sharding sharding;
};
Target TargetLayout(const Tensor& t);

// A restored tensor being assembled: one padded buffer per distinct block of this process's
// devices (another process's devices get none: it assembles their blocks).
struct Assembly {
  Target target;
  std::vector<Box> boxes;                      // per distinct block, its valid region
  std::vector<Box> buffer_boxes;               // per distinct block, the padded buffer's region
  std::vector<runtime::BufferPtr> buffers;     // per distinct block, once Allocate ran
  std::vector<size_t> block_of_device;         // device -> distinct block, or kNone (another process's)
  Shape local;                                 // the shape of each buffer
  static constexpr size_t kNone = ~size_t{0};

  // Whether the box of saved chunk or block `box` overlaps a block of this process.
  bool Needs(const Box& box) const {
    for (const Box& b : boxes)
      if (BoxElements(Intersect(b, box)) > 0) return true;
    return false;
  }
  int64_t Bytes(DType dtype) const { return static_cast<int64_t>(boxes.size()) * local.NumElements() * DTypeSize(dtype); }
};

Assembly PlanAssembly(const Tensor& t);
void Allocate(Assembly& a, DType dtype);
// Note [Restoring in place] (restore_plan.cc): true when `a` now holds `t`'s own buffers.
bool PlanInPlace(const Tensor& t, Assembly& a);
// The tensor of `a`'s new blocks in its target layout.
Tensor Finish(Assembly& a, const Tensor& t, const std::string& origin);

// Open files of one step directory, by name.
class Files {
 public:
  explicit Files(std::string dir) : dir_(std::move(dir)) {}
  ~Files() {
    for (auto& [name, fd] : fds_) ::close(fd);
  }
  int Open(const std::string& name, const std::string& tensor) {
    auto it = fds_.find(name);
    if (it != fds_.end()) return it->second;
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      Fail("checkpoint file '{}' (holding tensor '{}') is missing or unreadable: {}; the checkpoint is damaged: "
           "restore another step",
           path, tensor, std::strerror(errno));
    return fds_[name] = fd;
  }

 private:
  std::string dir_;
  std::map<std::string, int> fds_;
};

}  // namespace axle::checkpoint
