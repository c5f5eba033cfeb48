// SPMD pass tests as text: every .axir file under tests/spmd/ (subfolders included) is one test,
// as in tests/passes/pass_text_test.cc. Its first line names the passes to run, the module follows,
// and CHECK lines state what the printed result must hold:
//
//   // RUN: --passes=sharding-propagation
//   module @m {mesh_axes=[tp], mesh_shape=[4]} { ... }
//   // CHECK: dot_general(%x, %w1) {{.*}} : f32[8,32]{[], [tp]}
//
// The runner parses the file, runs the passes (verifying after each, as `axle opt` does), prints
// the module and runs FileCheck on the print. To reproduce a failure by hand:
//   build/axle opt --passes=... tests/spmd/FILE.axir
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "spmd/passes.h"
#include "testing/filecheck.h"

namespace axle {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> SpmdTestFiles() {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(AXLE_SOURCE_DIR) / "tests" / "spmd"))
    if (e.is_regular_file() && e.path().extension() == ".axir") files.push_back(e.path().string());
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

class SpmdTextTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmdTextTest, MatchesChecks) {
  spmd::RegisterPasses();
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

INSTANTIATE_TEST_SUITE_P(Files, SpmdTextTest, ::testing::ValuesIn(SpmdTestFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           fs::path rel = fs::relative(info.param, fs::path(AXLE_SOURCE_DIR) / "tests" / "spmd");
                           std::string name = rel.replace_extension().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace axle
