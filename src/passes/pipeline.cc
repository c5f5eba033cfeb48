// The default optimization pipeline, in one readable function, and the `default` pass that runs
// it to a fixed point.
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

bool RunDefaultPipeline(ir::Module& module) {
  std::vector<std::unique_ptr<Pass>> round;
  for (const std::string& name : DefaultPipeline()) round.push_back(CreatePass(name));
  bool changed = false;
  for (int r = 0; r < kDefaultPipelineMaxRounds; ++r) {
    bool round_changed = false;
    for (auto& p : round) round_changed |= RunInstrumented(*p, module);
    if (!round_changed) break;
    changed = true;
  }
  return changed;
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
