// FSDPv2 and tensor parallelism (include/axle/fsdp.h): annotations only; the compiler does the rest.
#include "axle/fsdp.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace axle::fsdp {
namespace {

// The dim of a projection's parameter that `style` splits, or -1 (a rowwise bias is replicated).
int64_t SplitDim(const nn::Module& projection, const std::string& param, nn::ParallelStyle style) {
  const bool colwise = style == nn::ParallelStyle::kColwise;
  const std::string& type = projection.type_name();
  if (param == "bias") return colwise ? 0 : -1;
  if (type == "Linear") return colwise ? 0 : 1;  // weight [out, in]
  return colwise ? 1 : 0;                        // Conv1D: weight [in, out]
}

void CheckAxis(const spmd::Mesh& mesh, const std::string& axis, const char* what) {
  const auto& names = mesh.axis_names();
  if (!axis.empty() && std::find(names.begin(), names.end(), axis) == names.end())
    Fail("fsdp: the {} axis '{}' is not an axis of the mesh {}; name one of its axes or leave it empty", what, axis,
         mesh.ToString());
}

}  // namespace

std::vector<std::pair<std::string, spmd::PartitionSpec>> parameter_specs(const nn::Module& module,
                                                                         const spmd::Mesh& mesh,
                                                                         const Layout& layout) {
  CheckAxis(mesh, layout.fsdp_axis, "fsdp");
  CheckAxis(mesh, layout.tp_axis, "tensor-parallel");
  // Parameter name -> the dim tensor parallelism splits, from every module's plan.
  std::map<std::string, int64_t> tp_dim;
  if (!layout.tp_axis.empty()) {
    for (const auto& [path, m] : module.named_modules()) {
      for (const auto& [child_name, style] : m->parallel_plan()) {
        const nn::Module* child = nullptr;
        for (const auto& [name, c] : m->named_children())
          if (name == child_name) child = c.get();
        if (child == nullptr || (child->type_name() != "Linear" && child->type_name() != "Conv1D"))
          Fail("fsdp: the parallel plan of {} ('{}') names '{}', {}; a plan names Linear or Conv1D children",
               m->type_name(), path, child_name,
               child ? "a " + child->type_name() : std::string("which it does not have"));
        const std::string prefix = (path.empty() ? "" : path + ".") + child_name + ".";
        for (const auto& [pname, p] : child->named_parameters(/*recurse=*/false))
          if (const int64_t d = SplitDim(*child, pname, style); d >= 0) tp_dim[prefix + pname] = d;
      }
    }
  }
  std::vector<std::pair<std::string, spmd::PartitionSpec>> specs;
  for (const auto& [name, p] : module.named_parameters()) {
    spmd::PartitionSpec spec(static_cast<size_t>(p.dim()));
    if (p.dim() > 0) {
      if (auto it = tp_dim.find(name); it != tp_dim.end())
        spec[static_cast<size_t>(it->second)].names.push_back(layout.tp_axis);
      if (!layout.fsdp_axis.empty()) spec[0].names.push_back(layout.fsdp_axis);
    }
    specs.emplace_back(name, std::move(spec));
  }
  return specs;
}

void shard(const nn::Module& module, const spmd::Mesh& mesh, const Layout& layout) {
  const auto specs = parameter_specs(module, mesh, layout);
  const auto params = module.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) spmd::mark_sharding(params[i].second, mesh, specs[i].second);
}

void shard(const nn::Module& module, const spmd::Mesh& mesh, const std::string& axis) {
  shard(module, mesh, Layout{.fsdp_axis = axis, .tp_axis = ""});
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
