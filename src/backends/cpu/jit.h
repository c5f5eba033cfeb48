// Compiles generated C++ into a shared object and loads it (docs/compiler.md).
//
// CompileAndLoad writes the source to a fresh temporary directory, runs the host C++ compiler
// (the one that built Axle, AXLE_HOST_CXX) with JitFlags() through posix_spawn, dlopens the
// result (RTLD_NOW | RTLD_LOCAL) and resolves the requested symbols. The compiler's stderr is
// captured: a failure is an axle::Error quoting it. With a BlobCache, the shared object's bytes
// are stored under a key hashing the source, the compiler path and the flags; a hit writes the
// bytes to a temporary file and dlopens that, without running the compiler. The codegen layer
// does not know the runtime's DiskCache: the runtime passes its get/put as a BlobCache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace axle::codegen {

struct BlobCache {
  std::function<std::optional<std::string>(const std::string& key)> get;
  std::function<void(const std::string& key, const std::string& blob)> put;
};

// A loaded shared object; dlclose'd when the last reference goes.
class JitLibrary {
 public:
  explicit JitLibrary(void* handle) : handle_(handle) {}
  ~JitLibrary();
  JitLibrary(const JitLibrary&) = delete;
  JitLibrary& operator=(const JitLibrary&) = delete;
  // The symbol's address; throws axle::Error when it is missing.
  void* Symbol(const std::string& name) const;

 private:
  void* handle_;
};

struct JitStats {
  int64_t compiles = 0;    // compiler runs that succeeded
  int64_t failures = 0;    // compiler runs that failed
  int64_t disk_hits = 0;   // shared objects loaded from the BlobCache
  double compile_seconds = 0;  // wall time in the compiler
};

// Process-wide counters (thread-safe).
JitStats GetJitStats();
void ResetJitStats();

// The compiler used: AXLE_HOST_CXX unless overridden (tests point it at a missing or failing
// program; "" restores the default).
std::string JitCompiler();
void SetJitCompilerForTesting(std::string path);
// "-O3 -march=native [-mprefer-vector-width=512] -fPIC -shared -ffp-contract=off -std=c++17"
// (fp-contract: no FMA, exact; the vector width where the host has AVX-512F).
std::vector<std::string> JitFlags();

// Hex key of (source, compiler, flags).
std::string JitCacheKey(const std::string& source);

// `disk_hit`, when given, says whether the library came from `cache` (no compiler run).
std::shared_ptr<JitLibrary> CompileAndLoad(const std::string& source, const BlobCache* cache,
                                           bool* disk_hit = nullptr);

}  // namespace axle::codegen
