// axle::CompiledFunction: a step traced twice, then replayed without tracing, with the same bits
// as tracing every call; and the steps it refuses to replay, with the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "axle/compile.h"
#include "axle/metrics.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/spmd.h"
#include "axle/tensor.h"
#include "core/error.h"
#include "core/flags.h"

namespace axle {
namespace {
using ::testing::HasSubstr;

Tensor F32(std::vector<float> v, Dims shape) { return from_vector<float>(v, shape, DType::kF32); }
using PartitionSpecOrNone = std::optional<spmd::PartitionSpec>;

class CompiledFunctionTest : public ::testing::Test {
 protected:
  void SetUp() override { set_backend("cpu"); }
  void TearDown() override {
    flags::set_replay(true);
    set_backend("cpu");
  }
};

// A linear model trained with AdamW and clipping, `steps` calls of a CompiledFunction; the losses
// and the final weights.
struct Trained {
  std::vector<float> losses, weight;
  int64_t traced = 0, replayed = 0, metric_replays = 0;
  std::string why;
};
// `mesh`: the weight sharded over tp and the batch over dp of a 2 x 2 mesh (a partitioned step).
Trained TrainLinear(int steps, bool replay, const spmd::Mesh* mesh = nullptr) {
  flags::set_replay(replay);
  Tensor w = F32({0.5f, -0.25f, 0.125f, 1.0f, -0.5f, 0.75f}, {3, 2}).requires_grad_();
  if (mesh) spmd::mark_sharding(w, *mesh, {nullptr, "tp"});
  Tensor b = F32({0.1f, -0.2f}, {2}).requires_grad_();
  optim::AdamW opt(std::vector<Tensor>{w, b}, 0.05);
  CompiledFunction step(
      [&](const std::vector<Tensor>& in) {
        Tensor loss = ((matmul(in[0], w) + b - in[1]).square()).mean();
        loss.backward();
        optim::clip_grad_norm_({w, b}, 1.0);
        opt.step();
        opt.zero_grad();
        return std::vector<Tensor>{loss};
      },
      "linear_step");
  const int64_t replays_before = metrics().replays;
  Trained run;
  std::vector<Tensor> losses;
  for (int i = 0; i < steps; ++i) {
    opt.set_lr(0.05 / (1 + i));  // a host value that changes every call: uploaded, not baked
    // The same data in new tensors each call (the replay must read the arguments it is given).
    Tensor x = F32({1, 0.5f, 2, -1, 0.5f, 1.5f, -2, 1, 2, 0.25f, 3, 1}, {4, 3});
    Tensor y = F32({1, 0, 2, 1, -1, 2, 0.5f, 1}, {4, 2});
    if (mesh) {
      spmd::mark_sharding(x, *mesh, {"dp", nullptr});
      spmd::mark_sharding(y, *mesh, {"dp", nullptr});
    }
    losses.push_back(step({x, y})[0]);
  }
  for (const Tensor& l : losses) run.losses.push_back(l.item());
  run.weight = w.to_vector<float>();
  run.traced = step.traced_calls();
  run.replayed = step.replayed_calls();
  run.metric_replays = metrics().replays - replays_before;
  run.why = step.why_traced();
  EXPECT_EQ(opt.param_steps(0, 0), steps);  // the replays advanced the step counts
  return run;
}

TEST_F(CompiledFunctionTest, ReplaysFromTheThirdCallWithTheBitsOfTracing) {
  const Trained traced = TrainLinear(6, /*replay=*/false);
  const Trained replayed = TrainLinear(6, /*replay=*/true);
  EXPECT_EQ(traced.traced, 6);
  EXPECT_EQ(traced.replayed, 0);
  EXPECT_EQ(replayed.traced, 2);
  EXPECT_EQ(replayed.replayed, 4);
  EXPECT_EQ(replayed.metric_replays, 4);
  EXPECT_EQ(replayed.why, "");
  EXPECT_EQ(replayed.losses, traced.losses);  // bit for bit
  EXPECT_EQ(replayed.weight, traced.weight);
  // And the loss went down: the replays really updated the weights.
  EXPECT_LT(replayed.losses.back(), replayed.losses.front());
}

// Note [Replaying a sharded step]: a partitioned step replays too, with the bits of tracing.
TEST_F(CompiledFunctionTest, ASteppedMeshReplaysWithTheBitsOfTracing) {
  const int64_t devices = flags::cpu_devices();
  flags::set_cpu_devices(4);
  const spmd::Mesh mesh({2, 2}, {"dp", "tp"});
  const Trained traced = TrainLinear(6, /*replay=*/false, &mesh);
  const Trained replayed = TrainLinear(6, /*replay=*/true, &mesh);
  const Trained whole = TrainLinear(6, /*replay=*/false);
  flags::set_cpu_devices(devices);
  // The first call reads the optimizer's fresh state whole; from the second on every value is held
  // in the layout a step left it in, so calls 2 and 3 trace the same graph and 4-6 replay it.
  EXPECT_EQ(replayed.traced, 3) << replayed.why;
  EXPECT_EQ(replayed.replayed, 3);
  EXPECT_EQ(replayed.losses, traced.losses);  // bit for bit
  EXPECT_EQ(replayed.weight, traced.weight);
  for (size_t i = 0; i < whole.losses.size(); ++i) EXPECT_NEAR(replayed.losses[i], whole.losses[i], 1e-6);
}

// A call whose argument is laid out otherwise than the plan's is traced again.
TEST_F(CompiledFunctionTest, AnArgumentInAnotherLayoutIsTracedAgain) {
  const int64_t devices = flags::cpu_devices();
  flags::set_cpu_devices(4);
  const spmd::Mesh mesh({2, 2}, {"dp", "tp"});
  Tensor w = F32({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  CompiledFunction f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * w).sum()}; }, "f");
  auto call = [&](const PartitionSpecOrNone& spec) {
    Tensor x = F32({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2});
    if (spec) spmd::mark_sharding(x, mesh, *spec);
    return f({x})[0].item();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(call(spmd::PartitionSpec{"dp", nullptr}), 110.0);
  EXPECT_EQ(f.replayed_calls(), 1);
  EXPECT_EQ(call(spmd::PartitionSpec{nullptr, "tp"}), 110.0);  // another layout: traced
  EXPECT_EQ(f.replayed_calls(), 1);
  EXPECT_EQ(f.traced_calls(), 3);
  flags::set_cpu_devices(devices);
}

TEST_F(CompiledFunctionTest, PendingWorkBeforeACallIsItsOwnStep) {
  Tensor w = F32({1, 2}, {2});
  CompiledFunction twice([&](const std::vector<Tensor>& in) {
    w.copy_(w * 2.0);
    return std::vector<Tensor>{in[0] + w};
  });
  std::vector<float> got;
  for (int i = 0; i < 5; ++i) {
    w.copy_(w + 1.0);  // pending when the call starts
    got.push_back(twice({F32({10, 20}, {2})})[0].to_vector<float>()[0]);
  }
  // w: 1 -> (1+1)*2 = 4 -> 10 -> 22 -> 46 -> 94; the result is 10 + w.
  EXPECT_EQ(got, (std::vector<float>{14, 20, 32, 56, 104}));
  EXPECT_EQ(twice.replayed_calls(), 3);
}

TEST_F(CompiledFunctionTest, AScalarMadeInsideEveryCallIsNotReplayed) {
  Tensor w = F32({1, 2}, {2});
  CompiledFunction fn([&](const std::vector<Tensor>& in) {
    static float k = 0;
    Tensor scale = F32({++k}, {});  // host data uploaded anew on every call
    w.copy_(w + in[0] * scale);
    return std::vector<Tensor>{w * 1.0};
  });
  for (int i = 0; i < 4; ++i) fn({F32({1, 1}, {2})});
  EXPECT_EQ(fn.replayed_calls(), 0);
  EXPECT_EQ(fn.traced_calls(), 4);
  EXPECT_THAT(fn.why_traced(), HasSubstr("makes anew on each call"));
  EXPECT_THAT(fn.why_traced(), HasSubstr("compiled_function_test.cc"));
  // Traced every call, so the values are right: w = 1 + (1+2+3+4), 2 + 10.
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{11, 12}));
}

TEST_F(CompiledFunctionTest, AGradientLeftAliveIsNotReplayed) {
  Tensor w = F32({1, 2}, {2}).requires_grad_();
  CompiledFunction fn([&](const std::vector<Tensor>& in) {
    w.set_grad(Tensor());
    Tensor loss = (w * in[0]).sum();
    loss.backward();  // w.grad() outlives the call
    return std::vector<Tensor>{loss.detach()};
  });
  for (int i = 0; i < 3; ++i) fn({F32({3, 4}, {2})});
  EXPECT_EQ(fn.replayed_calls(), 0);
  EXPECT_THAT(fn.why_traced(), HasSubstr("zero_grad"));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST_F(CompiledFunctionTest, NewArgumentTypesAreTracedAgain) {
  Tensor acc = F32({0}, {1});
  CompiledFunction fn([&](const std::vector<Tensor>& in) {
    acc.copy_(acc + in[0].sum());
    return std::vector<Tensor>{acc * 1.0};
  });
  for (int i = 0; i < 3; ++i) fn({F32({1, 2}, {2})});
  EXPECT_EQ(fn.replayed_calls(), 1);
  fn({F32({1, 2, 3}, {3})});  // another shape: traced; the next call makes a new plan
  EXPECT_EQ(fn.traced_calls(), 3);
  for (int i = 0; i < 3; ++i) fn({F32({1, 2, 3}, {3})});
  EXPECT_EQ(fn.traced_calls(), 4);
  EXPECT_EQ(fn.replayed_calls(), 3);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{3 * 3 + 4 * 6}));
}

TEST_F(CompiledFunctionTest, ASyncInsideTheFunctionIsNotReplayed) {
  Tensor w = F32({1}, {1});
  float seen = 0;
  CompiledFunction fn([&](const std::vector<Tensor>& in) {
    w.copy_(w + in[0]);
    seen = w.item();  // reads a value: a sync inside
    return std::vector<Tensor>{w * 2.0};
  });
  for (int i = 0; i < 3; ++i) fn({F32({1}, {1})});
  EXPECT_EQ(fn.replayed_calls(), 0);
  EXPECT_THAT(fn.why_traced(), HasSubstr("syncs inside"));
  EXPECT_EQ(seen, 4);
}

TEST_F(CompiledFunctionTest, SetDataChecksTypes) {
  Tensor a = F32({1, 2}, {2});
  set_data(a, F32({5, 6}, {2}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{5, 6}));
  Tensor b = F32({1, 2, 3}, {3});
  EXPECT_THROW(set_data(a, b), Error);
}

}  // namespace
}  // namespace axle
