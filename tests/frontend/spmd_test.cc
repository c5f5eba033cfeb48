// The user-facing SPMD API: meshes, mark_sharding's checks, sharding_of on pending tensors (before
// anything runs), visualize_sharding, and sharded steps computing what unsharded ones do.
#include "axle/spmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "axle/metrics.h"
#include "core/flags.h"

namespace axle::spmd {
namespace {
using ::testing::HasSubstr;

class SpmdApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sync();
    flags::set_cpu_devices(4);
    clear_global_mesh();
  }
  void TearDown() override {
    sync();
    clear_global_mesh();
    flags::set_cpu_devices(1);
  }
};

std::string ErrorOf(auto&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(SpmdApiTest, ImpossibleSpecsNameTheTensorAndTheSpec) {
  Mesh mesh({2, 2}, {"dp", "tp"});
  Tensor x = zeros({4, 8});
  EXPECT_THAT(ErrorOf([&] { mark_sharding(x, mesh, {"dp", "mp"}); }),
              AllOf(HasSubstr("tensor f32[4,8]"), HasSubstr("('dp', 'mp')"), HasSubstr("axis 'mp'"),
                    HasSubstr("its axes: dp, tp")));
  EXPECT_THAT(ErrorOf([&] { mark_sharding(x, mesh, {"dp", "dp"}); }), HasSubstr("axis 'dp' is used twice"));
  EXPECT_THAT(ErrorOf([&] { mark_sharding(x, mesh, {"dp", nullptr, "tp"}); }),
              AllOf(HasSubstr("('dp', None, 'tp')"), HasSubstr("3 entries but the tensor has 2 dimensions")));
  Mesh eight({8}, {"fsdp"});
  EXPECT_THAT(ErrorOf([&] { mark_sharding(x, eight, {"fsdp"}); }),
              AllOf(HasSubstr("has 8 devices, but this process has 4"), HasSubstr("AXLE_CPU_DEVICES=8")));
  EXPECT_THAT(ErrorOf([&] { set_global_mesh(eight); }), HasSubstr("has 8 devices, but this process has 4"));
  EXPECT_THAT(ErrorOf([&] { mark_sharding(x, {"dp"}); }), HasSubstr("without a mesh: call set_global_mesh"));
  EXPECT_THAT(ErrorOf([] { Mesh({2, 2}, {"x", "x"}); }), HasSubstr("axis 'x' is named twice"));
  EXPECT_THAT(ErrorOf([] { Mesh({0, 1, 1}, {3}, {"x"}); }), HasSubstr("not a permutation"));
}

TEST_F(SpmdApiTest, ShardingOfAPendingIntermediateBeforeAnythingRuns) {
  Mesh mesh({0, 1, 2, 3}, {2, 2}, {"dp", "tp"});
  set_global_mesh(mesh);
  Tensor x = randn({8, 16}, 1);
  Tensor w = randn({16, 32}, 2);
  sync();
  const int64_t syncs = metrics().syncs;
  mark_sharding(x, {"dp", nullptr});
  mark_sharding(w, {nullptr, "tp"});
  Tensor h = x.matmul(w).tanh();
  EXPECT_EQ(sharding_of(x).ToString(), "{[dp], []}");
  EXPECT_EQ(sharding_of(h).ToString(), "{[dp], [tp]}");
  EXPECT_EQ(metrics().syncs, syncs);  // propagation ran on the pending graph; nothing executed
  // Unannotated work on a mesh-less trace is replicated.
  EXPECT_EQ(sharding_of(ones({3})).ToString(), "{[]}");
}

TEST_F(SpmdApiTest, ShardedStepComputesWhatTheUnshardedOneDoes) {
  Tensor x = randn({8, 16}, 3);
  Tensor w = randn({16, 4}, 4);
  const std::vector<float> want = x.matmul(w).tanh().sum({1}).to_vector<float>();
  Mesh mesh({4}, {"dp"});
  mark_sharding(x, mesh, {"dp"});
  mark_sharding(w, mesh, {});
  EXPECT_EQ(x.matmul(w).tanh().sum({1}).to_vector<float>(), want);
  // The annotation stays with the materialized tensor in later steps.
  EXPECT_EQ(sharding_of(x).ToString(), "{[dp], []}");
  Tensor y = x * 2.0;
  EXPECT_EQ(sharding_of(y).ToString(), "{[dp], []}");
}

TEST_F(SpmdApiTest, VisualizeShardingDrawsTheBlocks) {
  Mesh mesh({2, 2}, {"dp", "tp"});
  Tensor w = zeros({8, 4});
  mark_sharding(w, mesh, {"dp", "tp"});
  EXPECT_EQ(visualize_sharding(w),
            "f32[8,4] {[dp], [tp]} on mesh [dp=2, tp=2]\n"
            "          cols 0-1  cols 2-3\n"
            "rows 0-3  device 0  device 1\n"
            "rows 4-7  device 2  device 3\n");
  Tensor b = zeros({6});
  mark_sharding(b, mesh, {"tp"});
  EXPECT_EQ(visualize_sharding(b),
            "f32[6] {[tp]} on mesh [dp=2, tp=2]\n"
            "  [0:3]  devices 0,2\n"
            "  [3:6]  devices 1,3\n");
}

TEST_F(SpmdApiTest, OneStepUsesOneMesh) {
  Tensor x = zeros({4});
  Tensor y = zeros({4});
  mark_sharding(x, Mesh({4}, {"a"}), {"a"});
  EXPECT_THAT(ErrorOf([&] { mark_sharding(y, Mesh({4}, {"b"}), {"b"}); }),
              HasSubstr("this step already uses mesh [a=4]"));
}

}  // namespace
}  // namespace axle::spmd
