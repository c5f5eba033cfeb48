// verify: checks the module and changes nothing (passes.h). Useful as `axle opt --passes=verify`.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "ir/verifier.h"

namespace axle::passes {
namespace {

class VerifyPass : public Pass {
 public:
  std::string_view name() const override { return "verify"; }
  std::string_view summary() const override {
    return "Check that the module is well formed (types, operands, attributes); change nothing.";
  }
  bool Run(ir::Module& module) override {
    ir::Verify(module);
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeVerifyPass() { return std::make_unique<VerifyPass>(); }

}  // namespace axle::passes
