// The op x backend check (testing/op_check.h): it passes on the oracle, it reports a wrong
// result with its sample's name, and it widens tolerances only where a backend documents it.
#include <gtest/gtest.h>

#include "core/flags.h"
#include "testing/op_check.h"

namespace axle::testing {
namespace {

using ir::samples::AllOpSamples;
using ir::samples::OpSample;

TEST(OpCheckTest, TheInterpreterAndTheCpuBackendPassEverySample) {
  for (const char* backend : {"interpreter", "cpu"}) {
    const OpCheckReport r = CheckOpSamples(backend);
    EXPECT_EQ(r.outcomes.size(), AllOpSamples().size());
    EXPECT_EQ(r.failures(), 0) << FormatOpTable({r});
  }
}

TEST(OpCheckTest, AFailureIsCountedAndNamed) {
  OpCheckReport r = CheckOpSamples("interpreter");
  ASSERT_GT(r.outcomes.size(), 1u);
  r.outcomes[1].error = "result 0: element 0 differs";
  const std::string table = FormatOpTable({r});
  EXPECT_EQ(r.failures(), 1);
  EXPECT_NE(table.find("FAILED " + r.outcomes[1].sample->name + " on interpreter"), std::string::npos) << table;
  EXPECT_NE(table.find(fmt::format("{} passed, 1 failed\n", r.outcomes.size() - 1)), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL "), std::string::npos);
}

TEST(OpCheckTest, OnlyFastMathFunctionsGetExtraUlps) {
  int widened = 0;
  for (const OpSample& s : AllOpSamples()) {
    EXPECT_EQ(ExtraUlps("cpu", true, s), 0) << s.name;
    EXPECT_EQ(ExtraUlps("compiled", false, s), 0) << s.name;
    const int64_t extra = ExtraUlps("compiled", true, s);
    if (extra == 0) continue;
    ++widened;
    EXPECT_TRUE(s.name.find(".f32") != std::string::npos) << s.name;
    EXPECT_LE(extra, 8) << s.name;
  }
  EXPECT_GT(widened, 0);
}

}  // namespace
}  // namespace axle::testing
