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

#include <string>

#include "spmd/passes.h"
#include "testing/text_test.h"

namespace axle {
namespace {

const std::string kDir = std::string(AXLE_SOURCE_DIR) + "/tests/spmd";

class SpmdTextTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmdTextTest, MatchesChecks) {
  spmd::RegisterPasses();
  const testing::FileCheckResult r = testing::RunTextTest(GetParam());
  EXPECT_TRUE(r.ok) << GetParam() << ":\n" << r.message;
}

INSTANTIATE_TEST_SUITE_P(Files, SpmdTextTest, ::testing::ValuesIn(testing::TextTestFiles(kDir, true)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::TextTestName(info.param, kDir);
                         });

}  // namespace
}  // namespace axle
