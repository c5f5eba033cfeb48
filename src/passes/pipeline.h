// The compiler's pipeline: the one place that says which passes compile a module, in which order.
//
// BuildPipeline(target, options) is the only way a module is compiled: the compiled backend, the
// sharded step (src/frontend), `axle compile` and `axle opt --pipeline` all run what it returns,
// so what the tools show is what the backends run. Running a pipeline verifies the module before
// the first pass and after every pass, and with AXLE_DUMP_DIR writes it after every pass
// (RunInstrumented): one place, for every caller.
//
//   simplify    simplify, dot-transpose-fold, fold, cse, dce        repeated to a fixed point
//   propagate   sharding-propagation                                only for a module with a mesh
//   partition   spmd-partition                                      only for a module with a mesh
//   simplify    (again, on the per-device module)                   only after partition
//   widen-half-products                                             for a backend that widens half products
//   fast-math   split-reductions, scatter-accumulate, dce           unless exact math is asked for
//   fuse        fuse, dce                                           for a backend that runs fused kernels
//   remat       remat                                               with a memory budget
//   schedule    schedule                                            for the CPU backend: order, pairs,
//                                                                   chains, groups, views, as IR
//
// Buffer assignment follows in the backend, on the scheduled module's steps (docs/compiler.md).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "passes/pass.h"
#include "passes/target.h"

namespace axle::passes {

struct PipelineOptions {
  // The module has a mesh: propagate shardings and partition it into the per-device program
  // first (the SPMD passes must be registered: spmd::RegisterPasses()).
  bool spmd = false;
  // Rewrites that reassociate sums (split-reductions, scatter-accumulate): the compiled backend's
  // default, off under AXLE_FAST_MATH=0 or `--exact-math`.
  bool fast_math = true;
  // Fuse the module into kernels (the `fuse` pass: fusion nodes calling functions of the module,
  // Note [Fusion in the IR] in src/codegen/fuse_pass.cc; codegen::RegisterPasses() registers it):
  // the compiled backend's pipeline ends with it.
  bool fuse = false;
  // Then schedule the fused module for the target (the `schedule` pass: the entry function's
  // order and its nodes' schedule entries, Note [The schedule in the IR]; registered by the CPU
  // backend, runtime::RegisterCpuPasses()).
  bool schedule = false;
  // Rematerialize until the target's plan fits this many bytes (the `remat` pass, on the fused module
  // before the schedule; 0: none). `axle train --memory-budget`, AXLE_MEMORY_BUDGET.
  int64_t memory_budget = 0;
  // Products of halves as f32 products of widened operands (the `widen-half-products` pass,
  // after simplify), for a backend that would widen them per call; bf16 ones stay when the
  // backend has native_bf16_products (Note [Widening half products once]).
  bool widen_half_products = false;
  bool native_bf16_products = false;
};

// One stage: passes run in order, the whole list repeated until no pass changes anything (at
// most max_rounds times).
struct PipelineStage {
  std::string name;
  std::vector<std::string> passes;
  int max_rounds = 1;
};

class Pipeline {
 public:
  explicit Pipeline(std::vector<PipelineStage> stages, PassContext context = {});

  const std::vector<PipelineStage>& stages() const { return stages_; }

  // Called after each stage with the stage's name and the module as it left the stage (the
  // sharded step keeps the module after propagation: its shardings are the step's interface).
  using StageObserver = std::function<void(std::string_view stage, const ir::Module&)>;

  // Runs every stage on `module` in place, verifying and dumping after each pass; returns whether
  // any pass changed anything. Throws axle::Error when a pass fails or breaks the module (naming
  // the pass).
  bool Run(ir::Module& module, const StageObserver& observer = {}) const;

  // The stages up to and including the first one named `stage` (throws when there is none): the
  // sharded step runs the pipeline through `partition`, the backend the per-device stages.
  Pipeline Through(std::string_view stage) const;

  // One line a stage: "simplify x8: simplify, dot-transpose-fold, fold, cse, dce".
  std::string ToString() const;

 private:
  std::vector<PipelineStage> stages_;
  PassContext context_;  // given to every pass
};

// The pipeline that compiles a module for `target`. Its stages depend on the options and, as
// passes that read the target join it, on the target.
Pipeline BuildPipeline(const Target& target, const PipelineOptions& options);

}  // namespace axle::passes
