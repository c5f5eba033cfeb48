// The `axle` command-line tool: one binary, one subcommand per file (docs/cli.md).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "ir/module.h"

namespace axle::tools {

// Each Add*Command registers its subcommand on `app` and returns the code that runs it.
using CommandRunner = std::function<void()>;
void AddOptCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddRunCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddHashCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddFlagsCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddTrainCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddCacheCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddCompileCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddTestOpsCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddExportCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddLaunchCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddGenerateCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddTokenizeCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);
void AddShardPlanCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands);

// Range checks for numeric flags whose errors read as sentences: "--lr: 0 is not a positive
// number". (CLI11's PositiveNumber printed its range, whose upper end is the largest double, all
// 309 digits of it.) Non-numbers are "not a number".
extern const CLI::Validator kPositive;     // > 0 ("POSITIVE" in --help)
extern const CLI::Validator kNonNegative;  // >= 0 ("NONNEGATIVE")
CLI::Validator InRange(double lo, double hi);  // lo <= x <= hi, both printed as written ("[lo, hi]")

// Reads a whole file; throws axle::Error naming the file when it cannot.
std::string ReadFile(const std::string& path);
// Reads, parses and verifies an .axir file ("-" = standard input).
std::unique_ptr<ir::Module> LoadModule(const std::string& path);

}  // namespace axle::tools
