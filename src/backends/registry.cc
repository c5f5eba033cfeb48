// The backend registry (registry.h).
#include "backends/registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/executor.h"
#include "core/error.h"

namespace axle::runtime {
namespace {

struct Entry {
  std::string_view name;
  Backend& (*get)();
};
constexpr Entry kBackends[] = {
    {"cpu", CpuBackend}, {"interpreter", InterpreterBackend}, {"compiled", CompiledBackend}};

}  // namespace

Backend& GetBackend(std::string_view name) {
  for (const Entry& e : kBackends)
    if (e.name == name) return e.get();
  Fail("unknown backend '{}'; known backends: {}", name, fmt::join(BackendNames(), ", "));
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const Entry& e : kBackends) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace axle::runtime
