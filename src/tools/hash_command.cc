// axle hash FILE.axir: prints the module's structural hash (the compile-cache key's IR part).
#include <cstdio>

#include "ir/hash.h"
#include "tools/commands.h"

namespace axle::tools {

void AddHashCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "hash", "Print the structural hash of an .axir module (independent of names and node order)");
  cmd->add_option("file", *file, "the .axir file ('-' for standard input)")->required();
  commands.emplace_back(cmd, [file] {
    std::unique_ptr<ir::Module> m = LoadModule(*file);
    std::printf("%s\n", ir::HashModule(*m).ToHex().c_str());
  });
}

}  // namespace axle::tools
