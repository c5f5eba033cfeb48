// axle compile FILE.axir [--emit=all|ir|kernels|cpp] [--exact-math]
// Shows what the compiled backend makes of a module, stage by stage, without running it: the IR
// after the default pipeline, the kernels fusion partitions it into, and the generated C++
// translation unit (what jax.jit(f).lower(...).compile().as_text() shows a JAX user). The same
// steps as runtime/compiled_backend.cc, minus the native compile.
#include <cstdio>

#include <fmt/format.h>

#include "codegen/emit_cpp.h"
#include "codegen/fusion.h"
#include "core/flags.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "tools/commands.h"

namespace axle::tools {

void AddCompileCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::string file;
    std::string emit = "all";
    bool exact_math = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Show the optimized IR, the fused kernels and the generated C++ of an .axir module");
  cmd->add_option("file", opts->file, "the .axir file ('-' for standard input)")->required();
  cmd->add_option("--emit", opts->emit, "what to print")
      ->check(CLI::IsMember({"all", "ir", "kernels", "cpp"}));
  cmd->add_flag("--exact-math", opts->exact_math,
                "C library transcendentals (as AXLE_FAST_MATH=0); default: the AXLE_FAST_MATH flag");
  commands.emplace_back(cmd, [opts] {
    std::unique_ptr<ir::Module> m = LoadModule(opts->file);
    passes::RunDefaultPipeline(*m);
    const std::vector<codegen::Kernel> kernels = codegen::FuseFunction(*m->entry());
    const bool all = opts->emit == "all";
    auto section = [&](const char* title) {
      if (all) std::printf("// ---- %s\n", title);
    };
    if (all || opts->emit == "ir") {
      section("IR after the default pipeline");
      std::fputs(ir::PrintModule(*m).c_str(), stdout);
    }
    if (all || opts->emit == "kernels") {
      section("kernels (fused loops run generated code; the others run the executor's kernels)");
      std::printf("%s\n", codegen::DescribeKernels(kernels).c_str());
    }
    if (all || opts->emit == "cpp") {
      section("generated C++ (one translation unit; compiled at run time with -O3 -march=native)");
      const bool exact = opts->exact_math || !flags::fast_math();
      std::fputs(codegen::EmitCpp(kernels, {.exact_math = exact}).source.c_str(), stdout);
    }
  });
}

}  // namespace axle::tools
