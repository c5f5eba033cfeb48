// Pass tests as text: every tests/passes/*.axir file is one test. Its first line names the
// passes to run, the module follows, and CHECK lines state what the printed result must hold:
//
//   // RUN: --passes=canonicalize
//   module @m { ... }
//   // CHECK: %0 = parameter() {index=0}
//
// The runner parses the file, runs the passes (verifying after each, as `axle opt` does), prints
// the module and runs FileCheck on the print. To reproduce a failure by hand:
//   build/axle opt --passes=... tests/passes/FILE.axir
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "testing/filecheck.h"

namespace axle {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> PassTestFiles() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(AXLE_SOURCE_DIR) / "tests" / "passes"))
    if (e.path().extension() == ".axir") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The passes named on the `// RUN: --passes=a,b` line.
std::vector<std::string> RunLinePasses(const std::string& text, const std::string& file) {
  const std::string key = "// RUN: --passes=";
  size_t at = text.find(key);
  if (at == std::string::npos) Fail("{}: no '{}' line", file, key);
  size_t end = text.find('\n', at);
  std::string list = text.substr(at + key.size(), end - at - key.size());
  std::vector<std::string> passes;
  std::stringstream ss(list);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) passes.push_back(p);
  return passes;
}

class PassTextTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PassTextTest, MatchesChecks) {
  const std::string& file = GetParam();
  std::ifstream in(file);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::unique_ptr<ir::Module> m = ir::ParseModule(text, file);
  passes::RunPasses(*m, RunLinePasses(text, file));
  const std::string printed = ir::PrintModule(*m);
  testing::FileCheckResult r = testing::FileCheck(printed, text);
  EXPECT_TRUE(r.ok) << file << ":\n" << r.message << "\n--- printed module:\n" << printed;
}

INSTANTIATE_TEST_SUITE_P(Files, PassTextTest, ::testing::ValuesIn(PassTestFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace axle
