// axle opt [--passes=a,b,c | --pipeline] [--target=SPEC] [--exact-math] [--list-passes] [-o OUT] FILE.axir
// Parses and verifies FILE, runs the passes (verifying after each) and prints the module.
// --pipeline runs the compiler's pipeline (passes::BuildPipeline), as the compiled backend and
// the sharded step do: with the SPMD stages when the module has a mesh.
#include <cstdio>
#include <fstream>

#include "backends/cpu/compiled_backend.h"
#include "core/flags.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "tools/commands.h"

namespace axle::tools {

void AddOptCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::string file;
    std::vector<std::string> passes;
    bool list = false;
    bool pipeline = false;
    bool print_pipeline = false;
    bool exact_math = false;
    std::string target = "host";
    std::string out;
    std::string memory_budget;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("opt", "Verify an .axir module, run passes on it, print it");
  cmd->add_option("file", opts->file, "the .axir file ('-' for standard input)");
  cmd->add_option("--passes", opts->passes, "comma-separated passes to run, in order")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--list-passes", opts->list, "list the passes with a one-line summary each");
  cmd->add_flag("--pipeline", opts->pipeline,
                "run the compiled backend's pipeline for --target, fusion included (the SPMD stages too when the "
                "module has a mesh)");
  cmd->add_flag("--print-pipeline", opts->print_pipeline, "print the stages --pipeline runs instead of the module");
  cmd->add_option("--target", opts->target,
                  "the target the passes compile for (the pipeline's stages, `schedule`): host (default), cpu-<N>t or "
                  "cpu-<isa>-<N>t");
  cmd->add_flag("--exact-math", opts->exact_math, "no fast-math rewrites (as AXLE_FAST_MATH=0)");
  cmd->add_option("--memory-budget", opts->memory_budget,
                  "the remat pass's budget for the step's arena (2GiB, 800MB, ...); --pipeline adds the remat stage");
  cmd->add_option("-o,--output", opts->out, "write the module here instead of standard output");
  commands.emplace_back(cmd, [opts] {
    if (opts->list) {
      for (const passes::PassInfo& p : passes::ListPasses())
        std::printf("%-16s %.*s\n", std::string(p.name).c_str(), static_cast<int>(p.summary.size()),
                    p.summary.data());
      return;
    }
    if (opts->file.empty()) Fail("axle opt: missing FILE.axir (see axle opt --help)");
    if ((opts->pipeline || opts->print_pipeline) && !opts->passes.empty())
      Fail("axle opt: --passes and --pipeline exclude each other: --pipeline runs the compiler's own passes");
    std::unique_ptr<ir::Module> m = LoadModule(opts->file);
    const int64_t budget =
        opts->memory_budget.empty() ? flags::memory_budget() : flags::ParseByteSize(opts->memory_budget, "--memory-budget");
    if (opts->pipeline || opts->print_pipeline) {
      passes::PipelineOptions options = runtime::PipelineOptionsFor(!opts->exact_math && flags::fast_math(), budget);
      options.spmd = m->mesh().has_value() && m->mesh()->size() > 1;
      const passes::Pipeline pipeline = passes::BuildPipeline(passes::Target::Parse(opts->target), options);
      if (opts->print_pipeline) {
        std::fputs(pipeline.ToString().c_str(), stdout);
        return;
      }
      pipeline.Run(*m);
    } else {
      passes::RunPasses(*m, opts->passes,
                        {passes::Target::Parse(opts->target), !opts->exact_math && flags::fast_math(), budget});
    }
    std::string text = ir::PrintModule(*m);
    if (opts->out.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return;
    }
    std::ofstream out(opts->out, std::ios::binary);
    out << text;
    if (!out) Fail("cannot write '{}'", opts->out);
  });
}

}  // namespace axle::tools
