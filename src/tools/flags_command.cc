// axle flags: the table of AXLE_* environment flags (core/flags.h).
#include <cstdio>

#include "core/flags.h"
#include "tools/commands.h"

namespace axle::tools {

void AddFlagsCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  CLI::App* cmd = app.add_subcommand("flags", "List the AXLE_* environment variables Axle reads");
  commands.emplace_back(cmd, [] {
    for (const flags::FlagInfo& f : flags::AllFlags())
      std::printf("%-28s %-7s default %-12s %s\n", f.env.c_str(), f.type.c_str(),
                  f.default_value.c_str(), f.help.c_str());
  });
}

}  // namespace axle::tools
