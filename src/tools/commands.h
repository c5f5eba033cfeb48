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

// Reads a whole file; throws axle::Error naming the file when it cannot.
std::string ReadFile(const std::string& path);
// Reads, parses and verifies an .axir file ("-" = standard input).
std::unique_ptr<ir::Module> LoadModule(const std::string& path);

}  // namespace axle::tools
