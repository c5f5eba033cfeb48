// axle: the command-line tool. Exit 0 on success, 1 on a user error (message on stderr), never
// a signal: every failure is caught here.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "backends/cpu/compiled_backend.h"
#include "codegen/passes.h"
#include "core/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "spmd/passes.h"
#include "tools/commands.h"

namespace axle::tools {

std::string ReadFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) Fail("cannot read '{}'", path);
  return ss.str();
}

std::unique_ptr<ir::Module> LoadModule(const std::string& path) {
  std::unique_ptr<ir::Module> m = ir::ParseModule(ReadFile(path), path == "-" ? "<stdin>" : path);
  ir::Verify(*m);
  return m;
}

}  // namespace axle::tools

int main(int argc, char** argv) {
  // The passes of higher layers join the registry before any command lists or runs them: the SPMD
  // passes, `fuse` and the CPU backend's `schedule`.
  axle::spmd::RegisterPasses();
  axle::codegen::RegisterPasses();
  axle::runtime::RegisterCpuPasses();
  using namespace axle::tools;
  CLI::App app{"axle: the Axle compiler and training tool"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;
  AddOptCommand(app, commands);
  AddRunCommand(app, commands);
  AddCompileCommand(app, commands);
  AddTestOpsCommand(app, commands);
  AddHashCommand(app, commands);
  AddFlagsCommand(app, commands);
  AddTrainCommand(app, commands);
  AddCacheCommand(app, commands);
  AddExportCommand(app, commands);
  AddLaunchCommand(app, commands);
  AddGenerateCommand(app, commands);
  AddTokenizeCommand(app, commands);
  AddShardPlanCommand(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 1;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) run();
    return 0;
  } catch (const axle::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}
