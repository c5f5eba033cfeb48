#include "train/shard_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "axle/autocast.h"
#include "axle/fsdp.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "core/error.h"
#include "frontend/calibrate.h"
#include "frontend/inspect.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "train/parallel.h"

namespace axle::train {
namespace {

struct PlanSpec {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
};

// The standard manual plans on `shape`: over all devices dp, fsdp and tp; with two axes of more
// than one device, also dp x tp, fsdp x tp and dp x fsdp (HSDP) on that shape.
std::vector<PlanSpec> StandardPlans(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  std::vector<int64_t> two;
  for (int64_t s : shape) {
    n *= s;
    if (s > 1) two.push_back(s);
  }
  std::vector<PlanSpec> plans = {{"dp", {"dp"}, {n}}, {"fsdp", {"fsdp"}, {n}}, {"tp", {"tp"}, {n}}};
  if (two.size() == 2) {
    plans.push_back({"dp x tp", {"dp", "tp"}, two});
    plans.push_back({"fsdp x tp", {"fsdp", "tp"}, two});
    plans.push_back({"dp x fsdp", {"dp", "fsdp"}, two});
  }
  return plans;
}

std::string Bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} KB", b / 1e3);
}

std::string MeshText(const PlanSpec& p) {
  std::vector<std::string> items;
  for (size_t i = 0; i < p.axes.size(); ++i) items.push_back(fmt::format("{}={}", p.axes[i], p.sizes[i]));
  return fmt::format("{}", fmt::join(items, ","));
}

ir::Sharding ToSharding(const spmd::PartitionSpec& spec, int64_t rank) {
  ir::Sharding s;
  s.dims.resize(static_cast<size_t>(rank));
  for (size_t d = 0; d < spec.size() && d < s.dims.size(); ++d) s.dims[d] = spec[d].names;
  return s;
}

}  // namespace

ShardPlanReport PlanShardings(const ShardPlanOptions& o) {
  const std::vector<int64_t> shape = ParseMeshShape(o.mesh_shape, "--mesh-shape");
  if (o.batch < 1) Fail("--batch {}: must be at least 1", o.batch);
  if (o.seq < 1) Fail("--seq {}: must be at least 1", o.seq);
  if (o.precision != "fp32" && o.precision != "bf16-mixed" && o.precision != "bf16")
    Fail("--precision {}: one of fp32, bf16-mixed, bf16", o.precision);

  // The model, its parameters placeholders: nothing is initialized or loaded.
  std::shared_ptr<nn::CausalLM> model;
  if (!o.init.empty()) {
    std::filesystem::path cfg = o.init;
    if (std::filesystem::is_directory(cfg)) cfg /= "config.json";
    std::ifstream in(cfg);
    if (!in) Fail("--init {}: cannot read {} (shard-plan reads only the config, no weights)", o.init, cfg.string());
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      Fail("--init {}: {} is not JSON: {}", o.init, cfg.string(), e.what());
    }
    model = nn::MakeCausalLM(config, cfg.string(), 0, /*init=*/false, /*materialize=*/false);
  } else if (o.model == "llama") {
    model = std::make_shared<nn::Llama>(nn::LlamaConfig::Preset(o.config), 0, false, false);
  } else if (o.model == "gpt2" || o.model == "auto") {
    model = std::make_shared<nn::GPT2>(nn::GPT2Config::Preset(o.config), 0, false, false);
  } else {
    Fail("--model {}: one of auto, gpt2, llama", o.model);
  }
  if (o.seq > model->max_positions()) Fail("--seq {} is longer than the model's context ({})", o.seq, model->max_positions());
  if (o.precision == "bf16") model->to(DType::kBF16);
  std::vector<Tensor> decay, no_decay, all;
  std::vector<std::string> decay_names, no_decay_names;
  std::unordered_map<const detail::TensorImpl*, std::string> role;  // parameter name, or its moment's
  for (const auto& [name, p] : model->named_parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    (p.dim() >= 2 ? decay_names : no_decay_names).push_back(name);
    all.push_back(p);
    role[p.impl().get()] = name;
  }
  detail::MakePlaceholders(all);
  optim::AdamW opt({{decay, 0.1}, {no_decay, 0.0}}, 1e-3, {0.9, 0.999}, 1e-8, 0.1);
  std::vector<Tensor> moments;
  for (size_t g = 0; g < 2; ++g) {
    const auto& names = g == 0 ? decay_names : no_decay_names;
    for (size_t i = 0; i < names.size(); ++i)
      for (const Tensor& m : {opt.exp_avg(g, i), opt.exp_avg_sq(g, i)}) {
        moments.push_back(m);
        role[m.impl().get()] = names[i];
      }
  }
  detail::MakePlaceholders(moments);
  const std::vector<int32_t> zeros(static_cast<size_t>(o.batch * o.seq), 0);
  const Tensor x = from_vector<int32_t>(zeros, {o.batch, o.seq}, DType::kI32);
  const Tensor y = from_vector<int32_t>(zeros, {o.batch, o.seq}, DType::kI32);

  // One training step, as axle train traces it.
  opt.zero_grad();
  Tensor loss;
  {
    std::optional<autocast> mixed;
    if (o.precision != "fp32") mixed.emplace(kBFloat16);
    loss = model->forward(x, y);
  }
  loss.backward();
  optim::clip_grad_norm_(all, 1.0);
  opt.step();
  opt.zero_grad();
  Tensor kept = loss.detach();
  detail::TracedStep step = detail::TakeTrace();

  ShardPlanReport report;
  int64_t devices = 1;
  for (int64_t s : shape) devices *= s;
  report.model = o.calibrate ? detail::CalibratedCostModel(shape, devices) : spmd::CostModel::Default();
  // Parameter i of the step: the tensor behind it, and result j's (updated parameters and state
  // keep the parameter's layout: the auto plan ties them).
  std::vector<std::pair<int64_t, int64_t>> tied;
  for (size_t j = 0; j < step.results.size(); ++j)
    for (size_t i = 0; i < step.inputs.size(); ++i)
      if (step.results[j] && step.results[j] == step.inputs[i]) tied.emplace_back(j, i);
  std::vector<std::unique_ptr<ir::Module>> manual;  // propagated, for the auto plan's references
  auto finish = [&](PlanResult& r, ir::Module& global) {
    for (ir::Node* p : global.entry()->Parameters()) {
      const detail::TensorImpl* impl = step.inputs[static_cast<size_t>(p->attrs_as<ir::ParameterAttrs>().index)].get();
      if (auto it = role.find(impl); it != role.end() && impl->type == p->result()->type() &&
                                     std::none_of(r.parameter_shardings.begin(), r.parameter_shardings.end(),
                                                  [&](const auto& e) { return e.first == it->second; }))
        r.parameter_shardings.emplace_back(it->second, p->result()->sharding()->ToString());
    }
    const std::unique_ptr<ir::Module> local = spmd::Partition(global);
    r.cost = spmd::EvaluatePartitioned(*local, report.model);
  };
  for (const PlanSpec& plan : StandardPlans(shape)) {
    const spmd::Mesh mesh(plan.sizes, plan.axes);
    std::map<std::string, spmd::PartitionSpec> specs;
    for (auto& [name, spec] : fsdp::parameter_specs(*model, mesh, MeshLayout(mesh))) specs[name] = spec;
    const spmd::PartitionSpec batch = BatchSpec(mesh);
    std::unique_ptr<ir::Module> global = step.module->Clone();
    global->set_mesh(mesh.ir_mesh());
    for (ir::Node* p : global->entry()->Parameters()) {
      const int64_t index = p->attrs_as<ir::ParameterAttrs>().index;
      const detail::TensorImpl* impl = step.inputs[static_cast<size_t>(index)].get();
      const int64_t rank = p->result()->type().rank();
      spmd::PartitionSpec spec;
      if (auto it = role.find(impl); it != role.end()) spec = specs.at(it->second);
      else if (impl == x.impl().get() || impl == y.impl().get()) spec = batch;
      p->result()->set_sharding(ToSharding(spec, rank));
    }
    spmd::PropagateShardings(*global);
    PlanResult r;
    r.name = plan.name;
    r.mesh = MeshText(plan);
    finish(r, *global);
    report.plans.push_back(std::move(r));
    manual.push_back(std::move(global));
  }
  if (o.auto_plan) {
    // The auto plan: the compiler chooses every value's sharding on a mesh of axes x (and y).
    PlanSpec plan{"auto", {}, {}};
    for (int64_t size : shape)
      if (size > 1) {
        plan.axes.push_back(plan.axes.empty() ? "x" : "y");
        plan.sizes.push_back(size);
      }
    if (plan.axes.empty()) plan = {"auto", {"x"}, {1}};
    std::unique_ptr<ir::Module> global = step.module->Clone();
    global->set_mesh(ir::Mesh(plan.axes, plan.sizes));
    spmd::AutoShardOptions ao;
    ao.memory_bound_bytes = o.memory_bound_bytes;
    ao.use_ilp = o.use_ilp;
    ao.time_limit_s = o.time_limit_s;
    ao.tied = tied;
    // The manual plans on this mesh's shape, renamed onto x and y, priced in the solver's program.
    std::vector<std::unique_ptr<ir::Module>> renamed;
    for (size_t i = 0; i < manual.size(); ++i) {
      // A plan on this shape maps axis for axis; a plan over all devices on one axis maps that
      // axis onto all of x and y (the same devices in the same order).
      if (!manual[i]) continue;
      const auto& names = manual[i]->mesh()->axis_names();
      const bool same_shape = manual[i]->mesh()->shape() == plan.sizes;
      if (!same_shape && names.size() != 1) continue;
      std::unique_ptr<ir::Module> m = manual[i]->Clone();
      auto rename = [&](std::vector<std::string>& axes) {
        std::vector<std::string> out;
        for (const auto& a : axes)
          for (size_t k = 0; k < names.size(); ++k)
            if (a == names[k]) {
              if (same_shape) out.push_back(plan.axes[k]);
              else out.insert(out.end(), plan.axes.begin(), plan.axes.end());
            }
        axes = std::move(out);
      };
      for (const auto& n : m->entry()->nodes())
        for (ir::Value* v : n->results())
          if (v->sharding()) {
            ir::Sharding sh = *v->sharding();
            for (auto& d : sh.dims) rename(d);
            rename(sh.partial);
            v->set_sharding(sh);
          }
      ao.references.emplace_back(report.plans[i].name, m.get());
      renamed.push_back(std::move(m));
    }
    PlanResult r;
    r.name = "auto";
    r.mesh = MeshText(plan);
    r.solver = spmd::AutoShard(*global, report.model, ao);
    spmd::PropagateShardings(*global);
    finish(r, *global);
    report.plans.push_back(std::move(r));
  }

  // The report.
  std::string& s = report.text;
  s += fmt::format("axle shard-plan: {} {} ({:.2f}M parameters), batch {} x seq {}, {}, {} devices (mesh shape {})\n",
                   model->model_type(), model->config_string(), model->num_parameters() / 1e6, o.batch, o.seq,
                   o.precision, devices, o.mesh_shape);
  s += report.model.Describe();
  s += fmt::format("the step: {} nodes, {} parameters; modelled per device, compute + collectives, nothing "
                   "overlapped\n\n",
                   step.module->entry()->nodes().size(), step.module->entry()->Parameters().size());
  s += fmt::format("{:<10} {:<16} {:>10} {:>10} {:>12} {:>7} {:>11} {:>11} {:>11}\n", "plan", "mesh", "step",
                   "compute", "collectives", "calls", "moved", "arguments", "peak");
  size_t best = 0;
  for (size_t i = 0; i < report.plans.size(); ++i) {
    const PlanResult& r = report.plans[i];
    if (r.cost.step_s() < report.plans[best].cost.step_s()) best = i;
    s += fmt::format("{:<10} {:<16} {:>8.3f} s {:>8.3f} s {:>10.3f} s {:>7} {:>11} {:>11} {:>11}\n", r.name, r.mesh,
                     r.cost.step_s(), r.cost.compute_s, r.cost.collective_s, r.cost.collective_count(),
                     Bytes(static_cast<double>(r.cost.collective_bytes())), Bytes(static_cast<double>(r.cost.argument_bytes)),
                     Bytes(static_cast<double>(r.cost.peak_bytes)));
  }
  s += fmt::format("\nfastest modelled: {} ({})\n", report.plans[best].name, report.plans[best].mesh);
  for (const PlanResult& r : report.plans)
    if (r.solver) {
      const spmd::AutoShardReport& a = *r.solver;
      size_t best_manual = 0;
      for (size_t i = 0; i < report.plans.size(); ++i)
        if (!report.plans[i].solver && (report.plans[best_manual].solver ||
                                        report.plans[i].cost.step_s() < report.plans[best_manual].cost.step_s()))
          best_manual = i;
      s += fmt::format("auto plan: {} in {:.2f} s ({:.2f} s in all): {} nodes, {} decisions, {} ILP columns and {} "
                       "rows; chosen: {} (program {:.4f} s, partitioned {:.4f} s): {:.1f}% of the best manual plan ({}){}\n",
                       a.solver, a.solve_s, a.total_s, a.nodes, a.variable_sets, a.columns, a.rows, a.chosen,
                       a.objective_s, r.cost.step_s(),
                       100.0 * r.cost.step_s() / report.plans[best_manual].cost.step_s(), report.plans[best_manual].name,
                       o.memory_bound_bytes > 0
                           ? fmt::format("; arguments {} per device against a bound of {}",
                                         Bytes(static_cast<double>(a.argument_bytes)),
                                         Bytes(static_cast<double>(o.memory_bound_bytes)))
                           : std::string());
      for (const std::string& line : a.candidates) s += "  candidate " + line + "\n";
    }
  for (const PlanResult& r : report.plans) {
    s += fmt::format("\n{} ({}): collectives per step\n", r.name, r.mesh);
    if (r.cost.collectives.empty()) s += "  none\n";
    for (const spmd::CollectiveCost& c : r.cost.collectives)
      s += fmt::format("  {:<18} over {:<10} {:>5} calls {:>11} {:>9.4f} s\n", spmd::CollectiveName(c.kind),
                       c.axes.empty() ? std::string("-") : fmt::format("{}", fmt::join(c.axes, ",")), c.count,
                       Bytes(static_cast<double>(c.bytes)), c.seconds);
  }
  if (!o.plan.empty()) {
    auto it = std::find_if(report.plans.begin(), report.plans.end(), [&](const PlanResult& r) { return r.name == o.plan; });
    if (it == report.plans.end()) {
      std::vector<std::string> names;
      for (const PlanResult& r : report.plans) names.push_back(r.name);
      Fail("--plan {}: not a plan on mesh shape {} (the plans: {})", o.plan, o.mesh_shape, fmt::join(names, ", "));
    }
    s += fmt::format("\n{} ({}): the parameters' shardings\n", it->name, it->mesh);
    for (const auto& [name, sharding] : it->parameter_shardings) s += fmt::format("  {:<40} {}\n", name, sharding);
  }
  (void)kept;
  return report;
}

}  // namespace axle::train
