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

namespace axle::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  // Transforms `module` in place; returns true when it changed anything.
  virtual bool Run(ir::Module& module) = 0;
};

struct PassInfo {
  std::string_view name;
  std::string_view summary;
};

// Every registered pass, in registration order.
std::vector<PassInfo> ListPasses();
// A new instance of the pass called `name`; throws axle::Error listing the known passes when
// there is none.
std::unique_ptr<Pass> CreatePass(std::string_view name);

// Runs the named passes in order, verifying the module before the first and after each one.
// A verifier failure after a pass names the pass that broke the module.
void RunPasses(ir::Module& module, const std::vector<std::string>& names);

}  // namespace axle::passes
