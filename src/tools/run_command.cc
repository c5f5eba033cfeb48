// axle run FILE.axir [--input NAME=FILE.npy ...] [--output-dir DIR]
// Runs the module's entry function on the reference interpreter and writes each result as
// DIR/output_<i>.npy. NAME is a parameter's value name (%x -> x) or its index.
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "ir/interpreter.h"
#include "ir/npy.h"
#include "tools/commands.h"

namespace axle::tools {
namespace {

std::string DescribeParameters(const std::vector<ir::Node*>& params) {
  std::string out;
  for (ir::Node* p : params)
    out += fmt::format("\n  {} %{}: {}", p->attrs_as<ir::ParameterAttrs>().index,
                       p->result()->name().empty() ? "?" : p->result()->name(),
                       p->result()->type().ToString());
  return out;
}

// Maps --input NAME=FILE to the parameter list, reading each file.
std::vector<ir::Literal> ReadInputs(const ir::Function& f, const std::vector<std::string>& inputs) {
  std::vector<ir::Node*> params = f.Parameters();
  std::vector<std::string> files(params.size());
  for (const std::string& spec : inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      Fail("--input '{}': expected NAME=FILE.npy", spec);
    std::string name = spec.substr(0, eq);
    int64_t found = -1;
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i]->result()->name() == name || std::to_string(i) == name) found = static_cast<int64_t>(i);
    if (found < 0)
      Fail("--input {}: the entry function @{} has no parameter named '{}'; its parameters are:{}",
           spec, f.name(), name, DescribeParameters(params));
    if (!files[found].empty()) Fail("--input {}: parameter '{}' is given twice", spec, name);
    files[found] = spec.substr(eq + 1);
  }
  std::vector<ir::Literal> args;
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::TensorType& want = params[i]->result()->type();
    if (files[i].empty())
      Fail("missing --input for parameter {} (%{}: {}); the parameters are:{}", i,
           params[i]->result()->name(), want.ToString(), DescribeParameters(params));
    ir::Literal lit = ir::ReadNpy(files[i]);
    if (lit.type() != want)
      Fail("--input {}: the file holds {}, but parameter %{} expects {}{}", files[i],
           lit.type().ToString(), params[i]->result()->name(), want.ToString(),
           lit.dtype() == DType::kF64 && want.dtype == DType::kF32
               ? " (NumPy defaults to float64: save it with .astype(np.float32))"
               : "");
    args.push_back(std::move(lit));
  }
  return args;
}

}  // namespace

void AddRunCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  struct Options {
    std::string file;
    std::vector<std::string> inputs;
    std::string output_dir = ".";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Run an .axir module on the reference interpreter");
  cmd->add_option("file", opts->file, "the .axir file ('-' for standard input)")->required();
  cmd->add_option("--input", opts->inputs, "NAME=FILE.npy for each parameter (name or index)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--output-dir", opts->output_dir, "where to write output_<i>.npy (default .)");
  commands.emplace_back(cmd, [opts] {
    std::unique_ptr<ir::Module> m = LoadModule(opts->file);
    const ir::Function& f = *m->entry();
    std::vector<ir::Literal> args = ReadInputs(f, opts->inputs);
    std::vector<ir::Literal> results = ir::Evaluate(f, args);
    std::error_code ec;
    std::filesystem::create_directories(opts->output_dir, ec);
    if (ec) Fail("cannot create --output-dir '{}': {}", opts->output_dir, ec.message());
    for (size_t i = 0; i < results.size(); ++i) {
      std::string path = (std::filesystem::path(opts->output_dir) / fmt::format("output_{}.npy", i)).string();
      ir::WriteNpy(path, results[i]);
      std::printf("%s: %s\n", path.c_str(), results[i].ToString(/*max_elements=*/12).c_str());
    }
  });
}

}  // namespace axle::tools
