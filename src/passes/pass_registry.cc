#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/flags.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace axle::passes {
namespace {

using Factory = PassFactory;

// The one list of passes. Add a pass here and it is available to `axle opt` and the pipeline
// (passes of higher layers come through RegisterPass).
std::vector<Factory>& Factories() {
  static std::vector<Factory> factories = {
      MakeVerifyPass,
      MakeCanonicalizePass,
      MakeDcePass,
      MakeCsePass,
      MakeSimplifyPass,
      MakeFoldPass,
      MakeDotTransposeFoldPass,
      MakeDefaultPipelinePass,
      MakeSplitReductionsPass,
      MakeScatterAccumulatePass,
      MakeRematPass,
      MakeWidenHalfProductsPass,
  };
  return factories;
}

// The number of the next dump file (NNN-<pass>.axir); RunPasses restarts it at 0.
thread_local int next_dump = 0;

// Writes `module` to DIR/NNN-<label>.axir when AXLE_DUMP_DIR (flags::dump_dir) is set.
void Dump(const ir::Module& module, std::string_view label) {
  const std::string dir = flags::dump_dir();
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  const std::string path = fmt::format("{}/{:03}-{}.axir", dir, next_dump++, label);
  std::ofstream out(path, std::ios::binary);
  out << ir::PrintModule(module);
  if (!out) Fail("AXLE_DUMP_DIR: cannot write '{}'", path);
}

std::atomic<int64_t> g_passes_run{0};  // PassesRun

}  // namespace

int64_t PassesRun() { return g_passes_run.load(std::memory_order_relaxed); }

bool RunInstrumented(Pass& pass, ir::Module& module) {
  g_passes_run.fetch_add(1, std::memory_order_relaxed);
  const bool changed = pass.Run(module);
  try {
    ir::Verify(module);
  } catch (const Error& e) {
    Fail("the module is invalid after pass '{}' (a bug in that pass):\n{}", pass.name(), e.what());
  }
  Dump(module, pass.name());
  return changed;
}

void RegisterPass(PassFactory factory) {
  std::unique_ptr<Pass> p = factory();
  for (Factory f : Factories())
    if (f()->name() == p->name()) Fail("RegisterPass: a pass named '{}' is already registered", p->name());
  Factories().push_back(factory);
}

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

void BeginDump(const ir::Module& module) {
  next_dump = 0;
  Dump(module, "input");
}

void RunPasses(ir::Module& module, const std::vector<std::string>& names, const PassContext& context) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string& n : names) passes.push_back(CreatePass(n));  // fail before running any
  for (auto& p : passes) p->set_context(context);
  ir::Verify(module);
  BeginDump(module);
  for (auto& p : passes) RunInstrumented(*p, module);
}

}  // namespace axle::passes
