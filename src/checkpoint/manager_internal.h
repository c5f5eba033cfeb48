// What checkpoint::Manager's saving (manager.cc) and restoring (manager_restore.cc) share: the
// file names and format version of docs/checkpoint.md, and small helpers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/shard_io.h"
#include "runtime/world.h"

namespace axle::checkpoint::internal {

inline constexpr const char* kMetadataFile = "checkpoint.json";
inline constexpr const char* kCommitFile = "commit.json";  // the metadata's size and checksum
inline constexpr const char* kFormat = "axle-checkpoint";
// Version 2 checksums chunks of a block (Note [Restoring in chunks]); version 1 checksummed each
// block whole and is still read.
inline constexpr int kVersion = 2;

// The world when this process is one of several (their saves and restores coordinate), else null.
inline runtime::World* SeveralProcesses() {
  runtime::World* w = runtime::GetWorld();
  return w != nullptr && w->size() > 1 ? w : nullptr;
}

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

inline std::string Text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// A box's lower corner.
inline std::vector<int64_t> Offsets(const Box& b) {
  std::vector<int64_t> o;
  for (const auto& [lo, hi] : b) o.push_back(lo);
  return o;
}

// The metadata file of a committed step, parsed and checked for the fields restore reads.
nlohmann::json ReadMetadata(const std::string& step_dir);

}  // namespace axle::checkpoint::internal
