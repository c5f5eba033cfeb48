// The backend registry: "cpu" (cpu_executor.cc), "interpreter" (the reference oracle) and
// "compiled" (compiled_backend.cc: fusion + generated C++).
#include "runtime/backend.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "runtime/compiled_backend.h"
#include "runtime/cpu_executor.h"

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
