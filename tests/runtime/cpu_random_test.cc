// The cpu backend against the interpreter backend on random programs (testing::RandomModule).
// Every cpu kernel but BLAS dot_general is bitwise equal to the interpreter, and small dots use
// the exact loop, so random programs (tiny shapes) must match bit for bit; with BLAS forced for
// every dot, f32/f64 results must match within a tolerance.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "backends/cpu/executor.h"
#include "backends/cpu/kernels.h"
#include "backends/registry.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "runtime_test_util.h"
#include "testing/random_module.h"

namespace axle::runtime {
namespace {

using testutil::Buffers;

int64_t kernels_run = 0, fallbacks = 0, nonfinite = 0;  // over a test, to check the fast kernels ran

// Seeds per test: the default, or AXLE_RANDOM_SEEDS for a longer local soak.
uint64_t Seeds(uint64_t n) {
  const char* env = std::getenv("AXLE_RANDOM_SEEDS");
  return env ? std::strtoull(env, nullptr, 10) : n;
}

std::string Program(const ir::Module& m) { return ir::PrintModule(m); }

// Runs seed's module on both backends; returns false (with a gtest failure) on a mismatch.
// Modules the interpreter rejects (e.g. gathering from an empty axis) must be rejected by the
// cpu backend too.
void Compare(uint64_t seed, const testing::RandomModuleOptions& opts, bool exact, int* compared) {
  std::unique_ptr<ir::Module> m = testing::RandomModule(seed, opts);
  std::vector<ir::Literal> args = testing::RandomArguments(*m->entry(), seed);
  std::vector<BufferPtr> want, got;
  bool interp_failed = false;
  try {
    want = GetBackend("interpreter").Compile(*m)->Execute(Buffers(args));
  } catch (const Error&) {
    interp_failed = true;
  }
  auto exe = GetBackend("cpu").Compile(*m);
  if (interp_failed) {
    EXPECT_THROW(exe->Execute(Buffers(args)), Error) << "seed " << seed << "\n" << Program(*m);
    return;
  }
  got = exe->Execute(Buffers(args));
  // Note [Buffer assignment]: the plan is legal, and the executor's count of live bytes is the
  // plan's.
  const PlannedBuffers planned = BuffersOf(*exe);
  ASSERT_NE(planned.plan, nullptr);
  ASSERT_EQ(passes::CheckBufferPlan(*planned.problem, *planned.plan), "") << "seed " << seed;
  EXPECT_EQ(exe->last_stats().peak_bytes, planned.plan->peak_live_bytes) << "seed " << seed << "\n" << Program(*m);
  ASSERT_EQ(got.size(), want.size()) << "seed " << seed;
  for (size_t i = 0; i < want.size(); ++i) {
    if (exact) {
      ASSERT_TRUE(testutil::SameBits(*want[i], *got[i])) << "seed " << seed << " result " << i << "\nwant "
                                       << want[i]->ToString(64) << "\ngot  " << got[i]->ToString(64)
                                       << "\n" << Program(*m);
    } else {
      std::string where;
      ASSERT_TRUE(testutil::Near(*want[i], *got[i], 1e-4, 1.0, &where, true, &nonfinite))
          << "seed " << seed << " result " << i << ": " << where << "\n" << Program(*m);
    }
  }
  kernels_run += exe->last_stats().kernels_run;
  fallbacks += exe->last_stats().fallback_kernels;
  ++*compared;
}

// rng_bit_generator's kernel (backends/cpu/kernels_random.cc, split over the pool) against the
// interpreter's Philox, bit for bit: sizes that end inside a block, several blocks, and many
// across the pool's chunks, and counters whose increments carry across all four words.
TEST(CpuRandomTest, RngBitGeneratorBitwiseEqual) {
  const std::vector<std::vector<uint32_t>> counters = {
      {0, 0, 0, 0}, {0xfffffff0u, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 7}};
  for (const auto& counter : counters)
    for (int64_t n : {0, 1, 3, 4 * 16 + 3, 4 * 16 * 5, 100003}) {
      ir::Module m("rng");
      ir::Builder b(m.AddFunction("main"));
      ir::Value* key = b.Parameter(0, ir::TensorType(DType::kU32, Shape{2}), "key");
      ir::Value* ctr = b.Parameter(1, ir::TensorType(DType::kU32, Shape{4}), "counter");
      b.Return({b.Build1(ir::OpKind::kRngBitGenerator, {key, ctr}, ir::NoAttrs{},
                         {ir::TensorType(DType::kU32, Shape{n})})});
      const std::vector<ir::Literal> args = {
          ir::Literal::FromVector<uint32_t>(DType::kU32, Shape{2}, {0xa4093822u, 0x299f31d0u}),
          ir::Literal::FromVector<uint32_t>(DType::kU32, Shape{4}, counter)};
      const std::vector<BufferPtr> want = GetBackend("interpreter").Compile(m)->Execute(Buffers(args));
      const std::vector<BufferPtr> got = GetBackend("cpu").Compile(m)->Execute(Buffers(args));
      ASSERT_TRUE(testutil::SameBits(*want[0], *got[0])) << "n " << n << " counter " << counter[0];
    }
}

TEST(CpuRandomTest, AllOpsAllDTypesBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  int compared = 0;
  for (uint64_t seed = 0; seed < Seeds(1000); ++seed) {
    Compare(seed, opts, /*exact=*/true, &compared);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(compared, 300);
  std::printf("[stats] %d programs, %lld kernels, %lld by the interpreter's kernels\n", compared,
              static_cast<long long>(kernels_run), static_cast<long long>(fallbacks));
}

TEST(CpuRandomTest, BiggerFloatProgramsBitwiseEqual) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  opts.num_nodes = 20;
  opts.max_dim = 7;
  opts.max_rank = 4;
  opts.dtypes = {DType::kF32, DType::kF64};
  int compared = 0;
  kernels_run = fallbacks = 0;
  for (uint64_t seed = 100000; seed < 100000 + Seeds(400); ++seed) {
    Compare(seed, opts, /*exact=*/true, &compared);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(compared, 250);
  std::printf("[stats] %d programs, %lld kernels, %lld by the interpreter's kernels\n", compared,
              static_cast<long long>(kernels_run), static_cast<long long>(fallbacks));
  // Float programs: most nodes have a fast kernel (iota, sort, rng, ... do not).
  EXPECT_LT(fallbacks * 3, kernels_run);
}

TEST(CpuRandomTest, BlasDotsWithinTolerance) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions opts;
  opts.dtypes = {DType::kF32, DType::kF64};
  opts.ops = {ir::OpKind::kDotGeneral, ir::OpKind::kAdd, ir::OpKind::kMul, ir::OpKind::kTranspose,
              ir::OpKind::kReshape, ir::OpKind::kBroadcastInDim, ir::OpKind::kReduce};
  const int64_t saved = cpu::BlasMinFlops();
  cpu::SetBlasMinFlops(1);
  int compared = 0;
  for (uint64_t seed = 200000; seed < 200000 + Seeds(400); ++seed) {
    Compare(seed, opts, /*exact=*/false, &compared);
    if (HasFatalFailure()) break;
  }
  cpu::SetBlasMinFlops(saved);
  EXPECT_GE(compared, 250);
  std::printf("[stats] %d programs, %lld non-finite elements differing (overflow order)\n", compared,
              static_cast<long long>(nonfinite));
}

}  // namespace
}  // namespace axle::runtime
