// axle test-ops [--backend=interpreter,cpu,compiled] [--exact-math]
// Runs the op-sample table on each backend against its expected values (testing/op_check.h) and
// prints the op x backend table; exits 1 when any sample fails.
#include <cstdio>

#include "core/flags.h"
#include "testing/op_check.h"
#include "tools/commands.h"

namespace axle::tools {

void AddTestOpsCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::vector<std::string> backends = {"interpreter", "cpu", "compiled"};
    bool exact_math = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "test-ops", "Run every op's samples (all dtypes, edge shapes, NaN/inf/-0) on each backend against the expected values");
  cmd->add_option("--backend", opts->backends, "comma-separated backends (default: interpreter,cpu,compiled)")
      ->delimiter(',')
      ->check(CLI::IsMember({"interpreter", "cpu", "compiled"}));
  cmd->add_flag("--exact-math", opts->exact_math,
                "the compiled backend without fast math (as AXLE_FAST_MATH=0): every sample within its own ulps");
  commands.emplace_back(cmd, [opts] {
    if (opts->exact_math) flags::set_fast_math(false);
    std::vector<testing::OpCheckReport> reports;
    for (const std::string& b : opts->backends) reports.push_back(testing::CheckOpSamples(b));
    std::fputs(testing::FormatOpTable(reports).c_str(), stdout);
    int failed = 0;
    for (const testing::OpCheckReport& r : reports) failed += r.failures();
    if (failed > 0) Fail("axle test-ops: {} sample runs failed (listed above)", failed);
  });
}

}  // namespace axle::tools
