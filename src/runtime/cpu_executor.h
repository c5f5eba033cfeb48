// The "cpu" backend: a planned, node-by-node executor over host literals with fast kernels.
// See cpu_executor.cc for the plan, donation and numerics.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace axle::runtime {

// The process-wide "cpu" and "interpreter" backends (registered in backend.cc).
Backend& CpuBackend();
Backend& InterpreterBackend();

}  // namespace axle::runtime
