// The default optimization round, the `default` pass that repeats it to a fixed point, and the
// compiler's pipeline (pipeline.h), in one readable place.
#include "passes/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace axle::passes {

std::vector<std::string> DefaultPipeline() {
  return {
      "simplify",  // algebra first: exposes constants (select of a constant) and dead operands
      "dot-transpose-fold",  // dot_general reads transposed operands in place (after simplify
                             // has composed transpose chains); the transposes go in dce
      "fold",      // constants whose operands became constants
      "cse",       // merges what simplify and fold made equal (equal constants too)
      "dce",       // removes everything the three above left unused
  };
}

namespace {

// Runs `passes` (created already) in order until none changes anything, at most max_rounds times.
bool RunRounds(std::vector<std::unique_ptr<Pass>>& passes, ir::Module& module, int max_rounds) {
  bool changed = false;
  for (int r = 0; r < max_rounds; ++r) {
    bool round_changed = false;
    for (auto& p : passes) round_changed |= RunInstrumented(*p, module);
    if (!round_changed) break;
    changed = true;
  }
  return changed;
}

}  // namespace

bool RunDefaultPipeline(ir::Module& module) {
  std::vector<std::unique_ptr<Pass>> round;
  for (const std::string& name : DefaultPipeline()) round.push_back(CreatePass(name));
  return RunRounds(round, module, kDefaultPipelineMaxRounds);
}

Pipeline::Pipeline(std::vector<PipelineStage> stages, PassContext context)
    : stages_(std::move(stages)), context_(std::move(context)) {
  for (const PipelineStage& s : stages_) AXLE_CHECK(s.max_rounds >= 1, "pipeline stage '{}' has no rounds", s.name);
}

bool Pipeline::Run(ir::Module& module, const StageObserver& observer) const {
  // Every pass is created before any runs: an unknown name fails on an untouched module.
  std::vector<std::vector<std::unique_ptr<Pass>>> created(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s)
    for (const std::string& name : stages_[s].passes) {
      created[s].push_back(CreatePass(name));
      created[s].back()->set_context(context_);
    }
  ir::Verify(module);
  BeginDump(module);
  bool changed = false;
  for (size_t s = 0; s < stages_.size(); ++s) {
    changed |= RunRounds(created[s], module, stages_[s].max_rounds);
    if (observer) observer(stages_[s].name, module);
  }
  return changed;
}

Pipeline Pipeline::Through(std::string_view stage) const {
  for (size_t s = 0; s < stages_.size(); ++s)
    if (stages_[s].name == stage)
      return Pipeline({stages_.begin(), stages_.begin() + static_cast<ptrdiff_t>(s) + 1}, context_);
  Fail("the pipeline has no stage '{}':\n{}", stage, ToString());
}

std::string Pipeline::ToString() const {
  std::string out;
  for (const PipelineStage& s : stages_) {
    out += s.max_rounds > 1 ? fmt::format("{} x{}: ", s.name, s.max_rounds) : s.name + ": ";
    out += fmt::format("{}\n", fmt::join(s.passes, ", "));
  }
  return out;
}

Pipeline BuildPipeline(const Target& target, const PipelineOptions& options) {
  std::vector<PipelineStage> stages;
  const PipelineStage simplify{"simplify", DefaultPipeline(), kDefaultPipelineMaxRounds};
  // Simplified before partitioning too: folding the tied head's transpose of wte into its
  // dot_general leaves one use of the FSDP-sharded wte, so the partitioner gathers it once
  // instead of once per layout.
  stages.push_back(simplify);
  if (options.spmd) {
    stages.push_back({"propagate", {"sharding-propagation"}});
    stages.push_back({"partition", {"spmd-partition"}});
    stages.push_back(simplify);  // the per-device program: slices of constants fold, and so on
  }
  // After simplify: transposes already folded into the products the pass rewrites.
  if (options.widen_half_products) stages.push_back({"widen-half-products", {"widen-half-products"}});
  if (options.fast_math) {
    // Rewrites that reassociate sums; dce removes the scatters scatter-accumulate replaced.
    stages.push_back({"fast-math", {"split-reductions", "scatter-accumulate", "dce"}});
  }
  // Last: every rewrite above sees plain nodes. dce drops the constants only fused functions read.
  if (options.fuse) stages.push_back({"fuse", {"fuse", "dce"}});
  // Recomputation under a memory budget, on the kernels: after every rewrite that could merge a
  // clone back (CSE), before the schedule (Note [Rematerialization under a budget]).
  if (options.memory_budget > 0) stages.push_back({"remat", {"remat"}});
  // The fused module's schedule for the target: what the CPU backend's executor runs.
  if (options.schedule) stages.push_back({"schedule", {"schedule"}});
  return Pipeline(std::move(stages),
                  PassContext{target, options.fast_math, options.memory_budget, options.native_bf16_products});
}

namespace {

class DefaultPipelinePass : public Pass {
 public:
  std::string_view name() const override { return "default"; }
  std::string_view summary() const override {
    return "The default pipeline: simplify, dot-transpose-fold, fold, cse, dce, repeated until nothing changes (<= 8 rounds).";
  }
  bool Run(ir::Module& module) override { return RunDefaultPipeline(module); }
};

}  // namespace

std::unique_ptr<Pass> MakeDefaultPipelinePass() { return std::make_unique<DefaultPipelinePass>(); }

}  // namespace axle::passes
