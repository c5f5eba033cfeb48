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

#include <string>

#include "testing/text_test.h"

namespace axle {
namespace {

const std::string kDir = std::string(AXLE_SOURCE_DIR) + "/tests/passes";

class PassTextTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PassTextTest, MatchesChecks) {
  const testing::FileCheckResult r = testing::RunTextTest(GetParam());
  EXPECT_TRUE(r.ok) << GetParam() << ":\n" << r.message;
}

INSTANTIATE_TEST_SUITE_P(Files, PassTextTest, ::testing::ValuesIn(testing::TextTestFiles(kDir, false)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::TextTestName(info.param, kDir);
                         });

}  // namespace
}  // namespace axle
