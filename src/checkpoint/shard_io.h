// The pieces of checkpoint::Manager that know nothing of tensors: block geometry, copying boxes
// between row-major buffers, and durable file I/O (write + fsync, directory fsync, exact pread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/mesh.h"

namespace axle::checkpoint {

// [begin, end) of each dimension.
using Box = std::vector<std::pair<int64_t, int64_t>>;

// The block of `device` of a tensor of `shape` whose dimension k is split over `sharding[k]`
// (blocks of ceil(size / n), the last ones cut short or empty: the partitioner's layout, without
// its padding).
Box DeviceBlock(const std::vector<int64_t>& shape, const std::vector<std::vector<std::string>>& sharding,
                const ir::Mesh& mesh, int64_t device);

// The intersection of two boxes; empty() when they do not overlap (or either is empty).
Box Intersect(const Box& a, const Box& b);
int64_t BoxElements(const Box& b);

// Copies `region` (global coordinates) from a row-major buffer holding box `src_box` to one
// holding `dst_box` (each buffer has the box's extents; elements of `elem` bytes). `region`
// must lie inside both boxes.
void CopyRegion(std::span<const uint8_t> src, const Box& src_box, std::span<uint8_t> dst, const Box& dst_box,
                const Box& region, int64_t elem);

// XXH3-64 of `bytes` as 16 hex digits.
std::string Checksum(std::span<const uint8_t> bytes);

// A file written in pieces, then fsynced and closed (Finish). Throws axle::Error naming the path
// and the OS error; a file not finished is closed (not synced) on destruction.
class DurableFile {
 public:
  explicit DurableFile(std::string path);  // creates (truncating)
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  void Write(std::span<const uint8_t> bytes);
  void Finish();  // fsync + close

 private:
  std::string path_;
  int fd_ = -1;
};

// Creates `path` (truncating), writes `bytes`, fsyncs and closes it.
void WriteFileDurably(const std::string& path, std::span<const uint8_t> bytes);
// fsyncs directory `path` (so the entries created or renamed in it are durable).
void SyncDirectory(const std::string& path);
// Reads out.size() bytes from offset `begin` of the open file `fd` (named `path` in errors) into
// `out`; false when the file ends first.
bool ReadRange(int fd, const std::string& path, int64_t begin, std::span<uint8_t> out);

}  // namespace axle::checkpoint
