#include "spmd/passes.h"

#include <memory>
#include <mutex>

#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"

namespace axle::spmd {
namespace {

class ShardingPropagationPass : public passes::Pass {
 public:
  std::string_view name() const override { return "sharding-propagation"; }
  std::string_view summary() const override {
    return "Give every value of the entry function a sharding, from the annotated ones (docs/spmd.md).";
  }
  bool Run(ir::Module& module) override { return PropagateShardings(module).changed; }
};

std::unique_ptr<passes::Pass> MakeShardingPropagationPass() { return std::make_unique<ShardingPropagationPass>(); }

}  // namespace

void RegisterPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The SPMD passes, in pipeline order. Add new ones here.
    passes::RegisterPass(MakeShardingPropagationPass);
    passes::RegisterPass(CreatePartitionPass);
  });
}

}  // namespace axle::spmd
