// The "compiled" backend: default passes, loop fusion, generated C++ kernels (docs/compiler.md).
#pragma once

#include <memory>
#include <string>

#include "passes/pipeline.h"
#include "passes/remat.h"
#include "passes/target.h"

#include "runtime/backend.h"
#include "runtime/disk_cache.h"

namespace axle::runtime {

// The process-wide "compiled" backend (registered in backend.cc); caches kernels in
// DiskCache::Default().
Backend& CompiledBackend();
// A fresh backend instance storing its compiled kernels in `cache` (nullptr: no disk cache),
// planning its schedules for `target`. `cache` must outlive the backend and its executables'
// compiles.
std::unique_ptr<Backend> NewCompiledBackend(DiskCache* cache,
                                            const passes::Target& target = passes::Target::Host());

// What the compiled backend makes of `module` for `target`, stage by stage, without compiling
// native code (`axle compile`): the pipeline, the IR after it, the fused kernels, the generated
// C++, the schedule its executor runs and where its values live (the same texts a compiled
// executable's DescribeSchedule() and DescribeBuffers() give).
struct CompiledStages {
  std::string pipeline, ir, kernels, cpp, schedule, buffers;
};
CompiledStages DescribeCompiledStages(const ir::Module& module, const passes::Target& target, bool fast_math);

// Note [The schedule in the IR]: plans `module` (fused, without a schedule) for `target` as the
// executor does and writes the plan into it (the `schedule` pass, schedule_pass.cc).
void ScheduleFusedModule(ir::Module& module, const passes::Target& target, bool fast_math);
// Whether this process's BLAS multiplies bf16 natively (oneDNN's gemm_bf16bf16f32; Note [Products
// of halves] in dot.cc); without it half products are widened (Note [Widening half products once]).
bool NativeBf16Products();
// The disk cache's key of the optimized module the pipeline makes of `module` (Note [A warm start
// skips the pipeline]): its structural hash, the target, fast math, the memory budget
// (flags::memory_budget) and whether bf16 products are native, under the build's key.
std::string OptimizedModuleKey(const ir::Module& module, const passes::Target& target, bool fast_math);
// The compiled backend's pipeline options (its stages: passes::BuildPipeline), for fast math or not
// and a memory budget (0: none); `axle opt --pipeline` builds the same.
passes::PipelineOptions PipelineOptionsFor(bool fast_math, int64_t memory_budget);

// Note [Memory models] (passes/remat.h): `module` (fused) planned for `target` as the executor
// plans it, as the remat pass reads it; `module` is not changed.
passes::MemoryProfile ProfileFusedModule(const ir::Module& module, const passes::Target& target, bool fast_math);
// Registers the CPU backend's passes (`schedule`) with passes::CreatePass and its memory model
// (ProfileFusedModule) with passes::RegisterMemoryModel, once.
void RegisterCpuPasses();

}  // namespace axle::runtime
