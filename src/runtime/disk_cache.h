// The persistent on-disk cache of compiled artifacts (docs/cache.md).
//
// A flat directory of `<name>.axc` files, one per key. Each file is a header (magic, format
// version, key, payload size, FNV-1a-64 checksum of the payload) followed by the payload, an
// opaque byte blob (the optimizing compiler will store compiled kernels here).
//
// - Get: a missing file is a miss; a truncated file, wrong magic/version, wrong key, size or
//   checksum mismatch is a miss with one warning line on stderr naming the file and the reason,
//   and the bad file is removed. A hit touches the file's mtime (the LRU clock).
// - Put: written to a unique temporary file in the same directory, fsync'ed, renamed over the
//   final name, directory fsync'ed: processes and threads may share a directory and readers never
//   see a torn entry. Past the size cap, least recently used entries (oldest mtime) are removed
//   until the total is under 90% of the cap. An I/O error (full disk, read-only directory) never
//   throws: it is warned about once per cache object and the put is dropped.
//
// All methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace axle::runtime {

class DiskCache {
 public:
  struct Stats {
    // Counters of this DiskCache object (since construction).
    int64_t hits = 0;
    int64_t misses = 0;   // includes corrupt entries
    int64_t corrupt = 0;  // entries found damaged and removed
    int64_t puts = 0;     // successful puts
    int64_t evictions = 0;
    // Filled by ScanDirectory(): the directory as it is now (all processes' entries).
    int64_t entries = 0;
    int64_t bytes = 0;
  };

  struct Entry {
    std::string file;  // full path
    std::string key;   // from the header; empty when the header is unreadable
    int64_t bytes = 0;
    std::time_t last_use = 0;  // mtime
  };

  static constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;
  static constexpr const char* kExtension = ".axc";

  // A cache in `dir` (created on the first put). `enabled = false`: Get always misses, Put does
  // nothing.
  explicit DiskCache(std::string dir, int64_t max_bytes = kDefaultMaxBytes, bool enabled = true);

  // The process-wide cache: AXLE_CACHE_DIR, AXLE_CACHE_MAX_BYTES, AXLE_CACHE (core/flags.h), read
  // on first use.
  static DiskCache& Default();

  // Hex hash of this build of Axle: the executable's GNU build id (else its size and mtime), the
  // compiler (__VERSION__), the cache format version, and the CPU ISA features that generated
  // code may use (avx2, avx512f, fma). Computed once.
  static std::string Fingerprint();
  // What Fingerprint() hashes, readable ("axle-cache-format=1;build-id=...;cc=...;isa=x86,avx2").
  static std::string FingerprintSource();
  // The key for a module: `<module_hash>-<Fingerprint()>` (a module hash that is not a short run
  // of [0-9A-Za-z_] is hashed first).
  static std::string MakeKey(std::string_view module_hash);

  std::optional<std::string> Get(std::string_view key);
  void Put(std::string_view key, std::string_view blob);

  Stats stats() const;
  // The counters plus the directory's entry count and total bytes (`.axc` files only).
  Stats ScanDirectory() const;
  // Every entry, most recently used first.
  std::vector<Entry> List() const;
  // Removes every file the cache wrote: entries, and temporaries older than a minute (crashed
  // writers' leftovers; younger ones may be puts in flight). Never other files.
  // Returns the number of entries removed.
  int64_t Clear();

  // The file that holds `key` (whether or not it exists).
  std::string PathFor(std::string_view key) const;

  const std::string& dir() const { return dir_; }
  int64_t max_bytes() const { return max_bytes_; }
  bool enabled() const { return enabled_; }

 private:
  void Corrupt(const std::string& path, int fd, const std::string& reason);
  void WarnPutFailure(const std::string& what, int err);
  void EvictIfNeeded();

  std::string dir_;
  int64_t max_bytes_;
  bool enabled_;
  std::atomic<int64_t> hits_{0}, misses_{0}, corrupt_{0}, puts_{0}, evictions_{0};
  std::atomic<bool> put_warned_{false};
};

// FNV-1a 64 (the entries' payload checksum; axle_runtime does not link xxhash).
uint64_t Fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace axle::runtime
