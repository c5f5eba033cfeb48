// axle opt [--passes=a,b,c] [--list-passes] [-o OUT] FILE.axir
// Parses and verifies FILE, runs the passes (verifying after each) and prints the module.
#include <cstdio>
#include <fstream>

#include "ir/printer.h"
#include "passes/pass.h"
#include "tools/commands.h"

namespace axle::tools {

void AddOptCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::string file;
    std::vector<std::string> passes;
    bool list = false;
    std::string out;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("opt", "Verify an .axir module, run passes on it, print it");
  cmd->add_option("file", opts->file, "the .axir file ('-' for standard input)");
  cmd->add_option("--passes", opts->passes, "comma-separated passes to run, in order")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--list-passes", opts->list, "list the passes with a one-line summary each");
  cmd->add_option("-o,--output", opts->out, "write the module here instead of standard output");
  commands.emplace_back(cmd, [opts] {
    if (opts->list) {
      for (const passes::PassInfo& p : passes::ListPasses())
        std::printf("%-16s %.*s\n", std::string(p.name).c_str(), static_cast<int>(p.summary.size()),
                    p.summary.data());
      return;
    }
    if (opts->file.empty()) Fail("axle opt: missing FILE.axir (see axle opt --help)");
    std::unique_ptr<ir::Module> m = LoadModule(opts->file);
    passes::RunPasses(*m, opts->passes);
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
