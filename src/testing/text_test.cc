#include "testing/text_test.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cpu/compiled_backend.h"
#include "codegen/passes.h"
#include "core/error.h"
#include "core/flags.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"

namespace axle::testing {
namespace {

namespace fs = std::filesystem;

// The passes named on the `// RUN: --passes=a,b [--target=SPEC] [--memory-budget=SIZE]` line,
// and their context.
std::vector<std::string> RunLinePasses(const std::string& text, const std::string& file, passes::PassContext& context) {
  const std::string key = "// RUN: --passes=";
  const size_t at = text.find(key);
  if (at == std::string::npos) Fail("{}: no '{}' line", file, key);
  const size_t end = text.find('\n', at);
  std::stringstream words(text.substr(at + key.size(), end - at - key.size()));
  std::string list, word;
  words >> list;
  while (words >> word) {
    if (word.rfind("--target=", 0) == 0)
      context.target = passes::Target::Parse(word.substr(9));
    else if (word.rfind("--memory-budget=", 0) == 0)
      context.memory_budget = flags::ParseByteSize(word.substr(16), "--memory-budget");
    else
      Fail("{}: RUN line: unknown option '{}' (expected --target=SPEC or --memory-budget=SIZE)", file, word);
  }
  std::stringstream ss(list);
  std::vector<std::string> passes;
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) passes.push_back(p);
  return passes;
}

}  // namespace

std::vector<std::string> TextTestFiles(const std::string& dir, bool recursive) {
  std::vector<std::string> files;
  auto add = [&](const fs::directory_entry& e) {
    if (e.is_regular_file() && e.path().extension() == ".axir") files.push_back(e.path().string());
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) add(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir)) add(e);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string TextTestName(const std::string& file, const std::string& dir) {
  std::string name = fs::relative(file, dir).replace_extension().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

FileCheckResult RunTextTest(const std::string& file) {
  std::ifstream in(file);
  if (!in) Fail("cannot open '{}'", file);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::unique_ptr<ir::Module> m = ir::ParseModule(text, file);
  codegen::RegisterPasses();  // `fuse`
  runtime::RegisterCpuPasses();  // `schedule`
  passes::PassContext context;
  const std::vector<std::string> names = RunLinePasses(text, file, context);
  passes::RunPasses(*m, names, context);
  const std::string printed = ir::PrintModule(*m);
  FileCheckResult r = FileCheck(printed, text);
  if (!r.ok) r.message += "\n--- printed module:\n" + printed;
  return r;
}

}  // namespace axle::testing
