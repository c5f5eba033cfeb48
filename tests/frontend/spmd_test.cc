// The user-facing SPMD API: meshes, mark_sharding's checks, sharding_of on pending tensors (before
// anything runs), visualize_sharding, and sharded steps computing what unsharded ones do.
#include "axle/spmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "axle/metrics.h"
#include "core/flags.h"
#include "frontend/sharded_step.h"

#include <cmath>
#include <functional>

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

// A few SGD steps of a tanh MLP: the same losses (to float rounding: the sharded contractions
// sum in another order) with the weights split FSDP-style or Megatron-style over 4 devices, and
// the steps really are partitioned (collectives ran).
std::vector<float> TrainMlp(const std::function<void(Tensor&, Tensor&, Tensor&)>& shard, int steps) {
  Tensor x = randn({8, 16}, 5);
  Tensor y = randn({8, 4}, 6);
  Tensor w1 = (randn({16, 32}, 7) * 0.2).requires_grad_();
  Tensor w2 = (randn({32, 4}, 8) * 0.2).requires_grad_();
  sync();
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    shard(x, w1, w2);
    Tensor loss = (x.matmul(w1).tanh().matmul(w2) - y).pow(2).mean();
    loss.backward();
    {
      NoGradGuard no_grad;
      w1.sub_(w1.grad() * 0.1);
      w2.sub_(w2.grad() * 0.1);
      w1.grad().zero_();
      w2.grad().zero_();
    }
    losses.push_back(static_cast<float>(loss.item()));
  }
  return losses;
}

TEST_F(SpmdApiTest, ShardedTrainingStepsMatchUnsharded) {
  const std::vector<float> want = TrainMlp([](Tensor&, Tensor&, Tensor&) {}, 4);
  Mesh fsdp({4}, {"fsdp"});
  const std::vector<float> got_fsdp = TrainMlp(
      [&](Tensor& x, Tensor& w1, Tensor& w2) {
        mark_sharding(x, fsdp, {"fsdp"});
        mark_sharding(w1, fsdp, {"fsdp"});
        mark_sharding(w2, fsdp, {"fsdp"});
      },
      4);
  EXPECT_GT(detail::LastCollectiveStats().collectives, 0);
  Mesh tp({2, 2}, {"dp", "tp"});
  const std::vector<float> got_tp = TrainMlp(
      [&](Tensor& x, Tensor& w1, Tensor& w2) {
        mark_sharding(x, tp, {"dp"});
        mark_sharding(w1, tp, {nullptr, "tp"});
        mark_sharding(w2, tp, {"tp"});
      },
      4);
  EXPECT_GT(detail::LastCollectiveStats().all_reduce_bytes, 0);
  ASSERT_EQ(got_fsdp.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got_fsdp[i], want[i], 1e-5 * std::abs(want[i])) << "fsdp step " << i;
    EXPECT_NEAR(got_tp[i], want[i], 1e-5 * std::abs(want[i])) << "tp step " << i;
  }
  EXPECT_LT(want.back(), want.front());
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
