// axle compile FILE.axir [--emit=all|pipeline|ir|kernels|cpp|schedule|buffers] [--target=SPEC] [--exact-math]
// Shows what the compiled backend makes of a module, stage by stage, without running it: the
// pipeline it runs, the IR after that pipeline, the kernels fusion partitions it into, the
// generated C++ translation unit, the schedule its executor runs and where each value lives (what
// jax.jit(f).lower(...).compile().as_text() shows a JAX user). It goes through the backend's own
// code (runtime::DescribeCompiledStages), minus the native compile, so it shows exactly what the
// backend would run for that target.
#include <cstdio>

#include <fmt/format.h>

#include "backends/cpu/compiled_backend.h"
#include "core/flags.h"
#include "passes/target.h"
#include "tools/commands.h"

namespace axle::tools {

void AddCompileCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::string file;
    std::string emit = "all";
    std::string target = "host";
    bool exact_math = false;
    std::string memory_budget;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Show the pipeline, optimized IR, fused kernels, generated C++, schedule and buffers of an .axir module");
  cmd->add_option("file", opts->file, "the .axir file ('-' for standard input)")->required();
  cmd->add_option("--emit", opts->emit, "what to print")
      ->check(CLI::IsMember({"all", "pipeline", "ir", "kernels", "cpp", "schedule", "buffers", "target"}));
  cmd->add_option("--target", opts->target,
                  "the machine to compile for: host (default), cpu-<N>t or cpu-<isa>-<N>t (isa: scalar, avx2, "
                  "avx512, avx512bf16)");
  cmd->add_flag("--exact-math", opts->exact_math,
                "C library transcendentals and no reassociated sums (as AXLE_FAST_MATH=0); default: the "
                "AXLE_FAST_MATH flag");
  cmd->add_option("--memory-budget", opts->memory_budget,
                  "fit the step's arena into this size (2GiB, 800MB, ...) with the remat pass; --emit=buffers first "
                  "says the arena without and with it (default: AXLE_MEMORY_BUDGET)");
  commands.emplace_back(cmd, [opts] {
    const passes::Target target = passes::Target::Parse(opts->target);
    if (!opts->memory_budget.empty()) flags::set_memory_budget(flags::ParseByteSize(opts->memory_budget, "--memory-budget"));
    if (opts->emit == "target") {
      std::printf("%s\n", target.Describe().c_str());
      return;
    }
    std::unique_ptr<ir::Module> m = LoadModule(opts->file);
    const bool fast_math = !opts->exact_math && flags::fast_math();
    const runtime::CompiledStages stages = runtime::DescribeCompiledStages(*m, target, fast_math);
    const bool all = opts->emit == "all";
    auto section = [&](const std::string& title) {
      if (all) std::printf("// ---- %s\n", title.c_str());
    };
    if (all || opts->emit == "pipeline") {
      section(fmt::format("pipeline for {}", target.Describe()));
      std::fputs(stages.pipeline.c_str(), stdout);
    }
    if (all || opts->emit == "ir") {
      section("IR after the pipeline");
      std::fputs(stages.ir.c_str(), stdout);
    }
    if (all || opts->emit == "kernels") {
      section("kernels (fused loops run generated code; the others run the executor's kernels)");
      std::printf("%s\n", stages.kernels.c_str());
    }
    if (all || opts->emit == "cpp") {
      section("generated C++ (one translation unit; compiled at run time with -O3 -march=native)");
      std::fputs(stages.cpp.c_str(), stdout);
    }
    if (all || opts->emit == "schedule") {
      section("schedule (the executor's steps, in order, with the plan's decisions)");
      std::fputs(stages.schedule.c_str(), stdout);
    }
    if (all || opts->emit == "buffers") {
      section("buffers (each value's storage and life: Note [Buffer assignment])");
      std::fputs(stages.buffers.c_str(), stdout);
    }
  });
}

}  // namespace axle::tools
