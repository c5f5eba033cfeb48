// The backends by name: "compiled" (the default: the compiler's pipeline, fusion, generated C++;
// backends/cpu/compiled_backend.h), "cpu" (the planned executor running the module node by node;
// backends/cpu/executor.h) and "interpreter" (the reference oracle; runtime/interpreter_backend.cc).
// The registry sits above the runtime, which knows only the Backend interface, and the backends,
// which know nothing of each other.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend.h"

namespace axle::runtime {

// The backend registered under `name`; throws axle::Error listing the known names otherwise.
// Backends are process-wide singletons.
Backend& GetBackend(std::string_view name);
// Names of the registered backends, sorted.
std::vector<std::string> BackendNames();

}  // namespace axle::runtime
