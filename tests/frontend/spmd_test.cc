// The user-facing SPMD API: meshes, mark_sharding's checks, sharding_of on pending tensors (before
// anything runs), visualize_sharding, and sharded steps computing what unsharded ones do.
#include "axle/spmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "axle/metrics.h"
#include "core/flags.h"
#include "frontend/lazy.h"
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

// State kept beside a parameter takes its layout; computed pending, it is born as shards.
TEST_F(SpmdApiTest, MarkShardingLikeCopiesTheLayoutAndTheStateIsBornSharded) {
  Mesh mesh({4}, {"fsdp"});
  Tensor p = ones({8, 6});  // pending: the step that computes it runs partitioned
  mark_sharding(p, mesh, {"fsdp"});
  Tensor m = mark_sharding_like(zeros_like(p), p);
  EXPECT_EQ(sharding_of(m), sharding_of(p));
  Tensor plain = mark_sharding_like(zeros({8, 6}), zeros({8, 6}));  // nothing to copy
  EXPECT_TRUE(sharding_of(plain).IsReplicated());
  EXPECT_THAT(ErrorOf([&] { mark_sharding_like(zeros({6, 8}), p); }),
              AllOf(HasSubstr("the shapes differ"), HasSubstr("f32[6,8]"), HasSubstr("f32[8,6]")));
  const int64_t reshards = metrics().host_reshards;
  sync();
  for (const Tensor& t : {p, m}) {
    const std::shared_ptr<detail::ShardedData> data = t.impl()->data->GetSharded();
    ASSERT_NE(data, nullptr);  // shards from the start: never whole on the host
    EXPECT_EQ(data->shards[0]->shape(), Shape({2, 6}));
  }
  EXPECT_EQ(metrics().host_reshards, reshards);
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(48, 1.0f));
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

// local_shards gives each device's block without padding; from_local_shards builds the global
// tensor from them (sharded data loading) and computes like any other.
TEST_F(SpmdApiTest, LocalShardsAndFromLocalShardsRoundTrip) {
  Mesh mesh({2, 2}, {"dp", "tp"});
  std::vector<float> v(30);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor g = from_vector<float>(v, Dims{5, 6}, DType::kF32);  // 5 rows over dp: blocks of 3 and 2
  mark_sharding(g, mesh, {"dp", "tp"});
  std::vector<Tensor> shards = local_shards(g);
  ASSERT_EQ(shards.size(), 4u);
  EXPECT_EQ(shards[0].sizes(), (Dims{3, 3}));
  EXPECT_EQ(shards[3].sizes(), (Dims{2, 3}));
  EXPECT_EQ(shards[1].to_vector<float>(), (std::vector<float>{3, 4, 5, 9, 10, 11, 15, 16, 17}));
  EXPECT_EQ(shards[3].to_vector<float>(), (std::vector<float>{21, 22, 23, 27, 28, 29}));

  Tensor back = from_local_shards(shards, {5, 6}, mesh, {"dp", "tp"});
  EXPECT_EQ(sharding_of(back).ToString(), "{[dp], [tp]}");
  EXPECT_EQ(back.to_vector<float>(), v);
  std::vector<float> twice;
  for (float x : v) twice.push_back(2 * x + 1);
  EXPECT_EQ((back * 2.0 + 1.0).to_vector<float>(), twice);
  // A replicated dimension: every device gives all of it.
  std::vector<Tensor> rows;
  for (int d = 0; d < 4; ++d) rows.push_back(from_vector<float>(std::vector<float>{1.0f * (d / 2), 7}, Dims{1, 2}, DType::kF32));
  EXPECT_EQ(from_local_shards(rows, {2, 2}, mesh, {"dp"}).to_vector<float>(), (std::vector<float>{0, 7, 1, 7}));
  // An unsharded tensor is one piece.
  EXPECT_EQ(local_shards(zeros({3})).size(), 1u);
}

TEST_F(SpmdApiTest, FromLocalShardsRejectsWrongShards) {
  Mesh mesh({4}, {"dp"});
  std::vector<Tensor> three(3, zeros({2, 3}));
  EXPECT_THAT(ErrorOf([&] { from_local_shards(three, {8, 3}, mesh, {"dp"}); }),
              AllOf(HasSubstr("from_local_shards(3 shards, global f32[8,3], mesh [dp=4], spec ('dp',))"),
                    HasSubstr("one shard per device")));
  std::vector<Tensor> four(4, zeros({2, 3}));
  four[2] = zeros({3, 3});
  EXPECT_THAT(ErrorOf([&] { from_local_shards(four, {8, 3}, mesh, {"dp"}); }),
              HasSubstr("device 2's shard is f32[3,3], but its block of the global tensor is f32[2,3]"));
  four[2] = zeros({2, 3});
  EXPECT_THAT(ErrorOf([&] { from_local_shards(four, {8, 3}, mesh, {"tp"}); }), HasSubstr("axis 'tp'"));
  EXPECT_THAT(ErrorOf([&] { from_local_shards(four, {8, 3}, mesh, {"dp", "dp"}); }),
              HasSubstr("axis 'dp' is used twice"));
}

// A partitioned step leaves its results as shards on the devices; the next step reads them there.
// Only reading a value whole goes through the host (Metrics::host_reshards).
TEST_F(SpmdApiTest, ShardedValuesStayOnTheirDevicesBetweenSteps) {
  Mesh mesh({4}, {"fsdp"});
  std::vector<Tensor> pieces;
  std::vector<float> want;
  for (int d = 0; d < 4; ++d) {
    pieces.push_back(from_vector<float>(std::vector<float>{2.0f * d, 2.0f * d + 1}, Dims{2}, DType::kF32));
    want.push_back(2.0f * d);
    want.push_back(2.0f * d + 1);
  }
  Tensor w = from_local_shards(pieces, {8}, mesh, {"fsdp"});
  Tensor x = full({8}, 0.25);  // not sharded by anyone: replicated
  sync();
  const int64_t before = metrics().host_reshards;
  for (int s = 0; s < 3; ++s) {
    w = w * 0.5 + x;
    sync();
    for (float& v : want) v = v * 0.5f + 0.25f;
  }
  EXPECT_EQ(sharding_of(w).ToString(), "{[fsdp]}");
  EXPECT_EQ(metrics().host_reshards, before);
  EXPECT_EQ(local_shards(w)[3].to_vector<float>(), (std::vector<float>{want[6], want[7]}));
  EXPECT_EQ(metrics().host_reshards, before);
  EXPECT_EQ(w.to_vector<float>(), want);  // assembled once, on the host
  EXPECT_EQ(metrics().host_reshards, before + 1);
}

}  // namespace
}  // namespace axle::spmd
