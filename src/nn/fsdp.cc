// FSDPv2 (include/axle/fsdp.h): annotations only; the compiler does the rest.
#include "axle/fsdp.h"

namespace axle::fsdp {

void shard(const nn::Module& module, const spmd::Mesh& mesh, const std::string& axis) {
  for (const auto& [name, p] : module.named_parameters()) {
    if (p.dim() == 0) continue;
    spmd::mark_sharding(p, mesh, {axis});
  }
}

void shard_optimizer(const optim::AdamW& opt, const spmd::Mesh& mesh) {
  const auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      const ir::Sharding s = spmd::sharding_of(groups[g].params[i]);
      spmd::PartitionSpec spec(s.dims.size());
      for (size_t d = 0; d < s.dims.size(); ++d) spec[d].names = s.dims[d];
      spmd::mark_sharding(opt.exp_avg(g, i), mesh, spec);
      spmd::mark_sharding(opt.exp_avg_sq(g, i), mesh, spec);
    }
  }
}

}  // namespace axle::fsdp
