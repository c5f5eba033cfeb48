#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace axle::passes {
namespace {

using Factory = std::unique_ptr<Pass> (*)();

// The one list of passes. Add a pass here and it is available to `axle opt` and the pipeline.
const std::vector<Factory>& Factories() {
  static const std::vector<Factory> factories = {
      MakeVerifyPass,
      MakeCanonicalizePass,
  };
  return factories;
}

}  // namespace

std::vector<PassInfo> ListPasses() {
  std::vector<PassInfo> out;
  // name() and summary() return views of string literals, which outlive the pass objects.
  for (Factory f : Factories()) {
    std::unique_ptr<Pass> p = f();
    out.push_back({p->name(), p->summary()});
  }
  return out;
}

std::unique_ptr<Pass> CreatePass(std::string_view name) {
  std::vector<std::string_view> known;
  for (Factory f : Factories()) {
    std::unique_ptr<Pass> p = f();
    if (p->name() == name) return p;
    known.push_back(p->name());
  }
  Fail("unknown pass '{}'; known passes: {} (see axle opt --list-passes)", name, fmt::join(known, ", "));
}

void RunPasses(ir::Module& module, const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string& n : names) passes.push_back(CreatePass(n));  // fail before running any
  ir::Verify(module);
  for (auto& p : passes) {
    p->Run(module);
    try {
      ir::Verify(module);
    } catch (const Error& e) {
      Fail("the module is invalid after pass '{}' (a bug in that pass):\n{}", p->name(), e.what());
    }
  }
}

}  // namespace axle::passes
