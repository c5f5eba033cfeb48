// AXLE_PROFILE's table (runtime/profile.h): per-label sums, and the time of the calls that ran on
// one thread apart from the total.
#include "runtime/profile.h"

#include <gtest/gtest.h>

#include <string>

namespace axle::runtime::profile {
namespace {

TEST(ProfileTest, ReportSumsCallsAndShowsTheOneThreadTime) {
  Reset();
  EXPECT_EQ(Report(), "");
  Record("dot_general f32[4,4], f32[4,4] -> f32[4,4]", 0.003, 192);             // split
  Record("dot_general f32[4,4], f32[4,4] -> f32[4,4]", 0.001, 192, false);      // inline
  Record("reduce{mul}[1] f32", 0.0006, 1000, false);
  const std::string r = Report();
  EXPECT_NE(r.find("3 kernel calls, 0.005 s in 2 distinct kernels, 0.002 s of it on one thread"), std::string::npos)
      << r;
  EXPECT_NE(r.find("1-thr ms"), std::string::npos) << r;
  // calls, total ms, share, GB/s (384 bytes in 4 ms), one-thread ms, label; the larger total first.
  const size_t dot = r.find("        2        4.0  87.0%     0.0       1.0  dot_general"),
               red = r.find("        1        0.6  13.0%     0.0       0.6  reduce{mul}[1] f32");
  EXPECT_NE(dot, std::string::npos) << r;
  EXPECT_NE(red, std::string::npos) << r;
  EXPECT_LT(dot, red) << r;
  Reset();
  EXPECT_EQ(Report(), "");
}

}  // namespace
}  // namespace axle::runtime::profile
