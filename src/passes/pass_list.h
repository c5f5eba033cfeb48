// Factories of the registered passes (internal to src/passes; pass_registry.cc lists them).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace axle::passes {

std::unique_ptr<Pass> MakeVerifyPass();
std::unique_ptr<Pass> MakeCanonicalizePass();
std::unique_ptr<Pass> MakeDcePass();
std::unique_ptr<Pass> MakeCsePass();
std::unique_ptr<Pass> MakeSimplifyPass();
std::unique_ptr<Pass> MakeFoldPass();
std::unique_ptr<Pass> MakeDotTransposeFoldPass();
std::unique_ptr<Pass> MakeDefaultPipelinePass();
std::unique_ptr<Pass> MakeSplitReductionsPass();
std::unique_ptr<Pass> MakeScatterAccumulatePass();
std::unique_ptr<Pass> MakeRematPass();
std::unique_ptr<Pass> MakeWidenHalfProductsPass();

// The names of simplify's rewrite rules, in table order.
std::vector<std::string_view> SimplifyRuleNames();

// Runs one pass as RunPasses does: then verifies the module (naming the pass on failure) and,
// when AXLE_DUMP_DIR is set, writes the module to the dump directory. Returns Run's result.
bool RunInstrumented(Pass& pass, ir::Module& module);
// With AXLE_DUMP_DIR: restarts the dump numbering and writes `module` as DIR/000-input.axir.
void BeginDump(const ir::Module& module);

}  // namespace axle::passes
