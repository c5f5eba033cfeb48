// Compiler passes: IR -> IR transformations with a name.
//
// A pass has a name, a one-line summary and Run(Module&) returning whether it changed anything.
// Passes are registered once, in pass_registry.cc, so that `axle opt --passes=a,b,c` and
// `axle opt --list-passes` see every pass. The verifier runs between passes (RunPasses).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "passes/target.h"

namespace axle::passes {

// What a pass may read beside the module: the target it compiles for and whether rewrites that
// reassociate sums are allowed. A pipeline gives each of its passes its own (BuildPipeline's
// target and options); `axle opt --target` too. Most passes read neither.
struct PassContext {
  Target target;  // the default: one thread, no SIMD assumed (never the host's)
  bool fast_math = true;
  // The remat pass's budget for what the target allocates for the step (the CPU backend: its
  // arena), in bytes (0: no budget; Note [Rematerialization under a budget], remat.cc).
  int64_t memory_budget = 0;
  // The backend multiplies bf16 operands natively (oneDNN's gemm_bf16bf16f32 on AVX512-BF16):
  // widen-half-products then leaves bf16 products alone (Note [Widening half products once]).
  bool native_bf16_products = false;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  // Called once before Run by whoever runs the pass (RunPasses, Pipeline::Run).
  virtual void set_context(const PassContext& context) { (void)context; }
  // Transforms `module` in place; returns true when it changed anything.
  virtual bool Run(ir::Module& module) = 0;
};

struct PassInfo {
  std::string_view name;
  std::string_view summary;
};

// Registers a pass made by a higher layer (src/spmd's propagation and partitioner), after the
// built-in ones; a name already registered throws. Call before ListPasses / CreatePass need it
// (spmd::RegisterPasses() does it for its passes, once; the axle tool calls that at startup).
using PassFactory = std::unique_ptr<Pass> (*)();
void RegisterPass(PassFactory factory);

// Every registered pass, in registration order.
std::vector<PassInfo> ListPasses();
// A new instance of the pass called `name`; throws axle::Error listing the known passes when
// there is none.
std::unique_ptr<Pass> CreatePass(std::string_view name);

// Runs the named passes in order, verifying the module before the first and after each one
// (always, not only in debug builds: verifying costs little next to the passes, and a broken
// pass is caught where it breaks the module).
// A verifier failure after a pass names the pass that broke the module.
// With AXLE_DUMP_DIR=DIR (flags::dump_dir), the module is written as DIR/000-input.axir before
// the first pass and as DIR/NNN-<pass>.axir after each pass (the passes inside `default` too),
// NNN counting from 001 within this call.
void RunPasses(ir::Module& module, const std::vector<std::string>& names, const PassContext& context = {});

// Passes run in this process so far (every RunPasses / pipeline pass, `default`'s inner ones too):
// a warm start that takes its optimized modules from the disk cache runs none.
int64_t PassesRun();

// The default optimization pipeline: the passes of one round, in order. `default` (a registered
// pass, usable as `--passes=default`) repeats the round until no pass changes anything, at most
// kDefaultPipelineMaxRounds times.
std::vector<std::string> DefaultPipeline();
inline constexpr int kDefaultPipelineMaxRounds = 8;
// Runs the default pipeline on `module` as `--passes=default` does; returns whether it changed
// anything.
bool RunDefaultPipeline(ir::Module& module);

}  // namespace axle::passes
