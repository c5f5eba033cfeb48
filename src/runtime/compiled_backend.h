// The "compiled" backend: default passes, loop fusion, generated C++ kernels (docs/compiler.md).
#pragma once

#include <memory>

#include "runtime/backend.h"
#include "runtime/disk_cache.h"

namespace axle::runtime {

// The process-wide "compiled" backend (registered in backend.cc); caches kernels in
// DiskCache::Default().
Backend& CompiledBackend();
// A fresh backend instance storing its compiled kernels in `cache` (nullptr: no disk cache).
// `cache` must outlive the backend and its executables' compiles.
std::unique_ptr<Backend> NewCompiledBackend(DiskCache* cache);

}  // namespace axle::runtime
