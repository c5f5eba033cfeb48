// axle shard-plan (--config NAME | --init DIR) --mesh-shape 2x4 [--batch B --seq T --precision P]
//                 [--plan NAME] [--no-calibrate]
// What each standard sharding plan of a training step costs per device, without running it
// (src/train/shard_plan.h, docs/spmd.md "axle shard-plan").
#include <iostream>

#include "core/flags.h"
#include "tools/commands.h"
#include "train/shard_plan.h"

namespace axle::tools {

void AddShardPlanCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto o = std::make_shared<train::ShardPlanOptions>();
  auto no_calibrate = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "shard-plan", "Price the sharding plans of a training step on a mesh (any size) without running it");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--model", o->model, "gpt2 | llama | auto (config.json's family with --init)")
      ->check(CLI::IsMember({"auto", "gpt2", "llama"}));
  sub->add_option("--config", o->config, "The preset (gpt2: tiny, small, 124m; llama: tiny, small, bench, ...)");
  sub->add_option("--init", o->init, "A Hugging Face directory: its config.json (no weights are read)");
  sub->add_option("--mesh-shape", o->mesh_shape, "Devices and the shape of the two-axis plans: 8, 2x4, 16x16");
  sub->add_option("--batch", o->batch, "Rows per step (the whole mesh's)")->check(kPositive);
  sub->add_option("--seq", o->seq, "Tokens per row")->check(kPositive);
  sub->add_option("--precision", o->precision, "fp32 | bf16-mixed | bf16")
      ->check(CLI::IsMember({"fp32", "bf16-mixed", "bf16"}));
  sub->add_option("--plan", o->plan, "Also print each parameter's sharding under this plan (e.g. \"fsdp x tp\")");
  auto solver = std::make_shared<std::string>("ilp");
  auto bound = std::make_shared<std::string>();
  sub->add_option("--solver", *solver, "The auto plan's solver: ilp (CBC, the greedy as its start and fallback), "
                                       "greedy, or none (no auto plan)")
      ->check(CLI::IsMember({"ilp", "greedy", "none"}));
  sub->add_option("--time-limit", o->time_limit_s, "Seconds the ILP solver may take")->check(kPositive);
  sub->add_option("--memory-bound", *bound,
                  "The auto plan's bound on each device's parameters, optimizer state and batch (\"2GB\", \"512MiB\")");
  sub->add_flag("--no-calibrate", *no_calibrate,
                "Price with the fixed default cost model instead of one measured on this machine");
  commands.emplace_back(sub, [o, no_calibrate, solver, bound] {
    train::ShardPlanOptions options = *o;
    options.calibrate = !*no_calibrate;
    options.auto_plan = *solver != "none";
    options.use_ilp = *solver == "ilp";
    if (!bound->empty()) options.memory_bound_bytes = flags::ParseByteSize(*bound, "--memory-bound");
    std::cout << train::PlanShardings(options).text;
  });
}

}  // namespace axle::tools
