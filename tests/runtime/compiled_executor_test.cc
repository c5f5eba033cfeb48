// The compiled backend on the planned executor: in-place updates of donated buffers, read-only
// shared arguments, reshapes without copies, and results equal to the interpreter's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <set>

#include <fmt/format.h>

#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/executor.h"
#include "backends/registry.h"
#include "backends/cpu/cpu_flags.h"
#include "ir/parser.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

namespace axle::runtime {
namespace {

using testutil::RandomLiteral;

// A run's counts: the executor's and the CPU schedule's.
struct Stats : ExecuteStats, CpuScheduleStats {};
Stats LastStats(const Executable& exe) {
  Stats s;
  static_cast<ExecuteStats&>(s) = exe.last_stats();
  static_cast<CpuScheduleStats&>(s) = LastScheduleStats(exe);
  return s;
}

// A compiled backend without the disk cache: DiskCache::Default() must stay unread in this binary
// (DiskCache.DefaultReadsTheFlags checks it in a forked child).
// The schedules these tests check (pairs, chains, groups) are planned for a two-thread target,
// on any machine: the executor cuts products for its target, not for the pool that runs them
// (Note [Products cut for the target]), so the bits do not depend on the host's cores.
Backend& Compiled() {
  static std::unique_ptr<Backend> b = NewCompiledBackend(nullptr, passes::Target::Parse("cpu-2t"));
  return *b;
}
// The "cpu" backend (hand kernels, no fusion) planned for the same target.
Backend& Cpu() {
  static std::unique_ptr<Backend> b = NewCpuBackend(passes::Target::Parse("cpu-2t"));
  return *b;
}

// One AdamW-style update of p, m, v (a fused kernel with three outputs of the arguments' types).
constexpr const char* kUpdate = R"(module @adam {
  func @main {
    %p = parameter() {index=0} : f32[4096]
    %m = parameter() {index=1} : f32[4096]
    %v = parameter() {index=2} : f32[4096]
    %g = parameter() {index=3} : f32[4096]
    %b1 = constant() {value=0.9} : f32[]
    %c1 = constant() {value=0.1} : f32[]
    %lr = constant() {value=0.001} : f32[]
    %eps = constant() {value=1e-8} : f32[]
    %b1s = broadcast_in_dim(%b1) {dims=[]} : f32[4096]
    %c1s = broadcast_in_dim(%c1) {dims=[]} : f32[4096]
    %lrs = broadcast_in_dim(%lr) {dims=[]} : f32[4096]
    %epss = broadcast_in_dim(%eps) {dims=[]} : f32[4096]
    %mb = mul(%m, %b1s) : f32[4096]
    %gc = mul(%g, %c1s) : f32[4096]
    %m2 = add(%mb, %gc) : f32[4096]
    %vb = mul(%v, %b1s) : f32[4096]
    %gg = mul(%g, %g) : f32[4096]
    %ggc = mul(%gg, %c1s) : f32[4096]
    %v2 = add(%vb, %ggc) : f32[4096]
    %sq = sqrt(%v2) : f32[4096]
    %den = add(%sq, %epss) : f32[4096]
    %upd = div(%m2, %den) : f32[4096]
    %step = mul(%upd, %lrs) : f32[4096]
    %p2 = sub(%p, %step) : f32[4096]
    return %p2, %m2, %v2
  }
})";

std::vector<ir::Literal> UpdateArgs() {
  std::vector<ir::Literal> args;
  for (uint64_t s = 0; s < 4; ++s) args.push_back(RandomLiteral(DType::kF32, {4096}, 40 + s));
  // v must be non-negative for the sqrt.
  for (int64_t i = 0; i < 4096; ++i) args[2].SetDouble(i, std::abs(args[2].GetDouble(i)));
  return args;
}

TEST(CompiledExecutorTest, DonatedArgumentsAreUpdatedInPlace) {
  auto m = ir::ParseModule(kUpdate);
  const std::vector<ir::Literal> args = UpdateArgs();
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto exe = Compiled().Compile(*m);
  std::vector<BufferPtr> in = testutil::Buffers(args);
  std::set<const void*> storage;  // any dying argument of the type will do, not only "its own"
  for (const BufferPtr& b : in) storage.insert(b->bytes().data());
  std::vector<BufferPtr> got = exe->Execute(std::move(in));  // the only references: donated
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(LastStats(*exe).donated_reused, 3);
  std::set<const void*> used;
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(storage.count(got[k]->bytes().data())) << "result " << k << " is not in an argument's storage";
    used.insert(got[k]->bytes().data());
    EXPECT_TRUE(testutil::SameBits(*want[k], *got[k])) << "result " << k;
  }
  EXPECT_EQ(used.size(), 3u);
}

TEST(CompiledExecutorTest, SharedArgumentsAreNeverWritten) {
  auto m = ir::ParseModule(kUpdate);
  const std::vector<ir::Literal> args = UpdateArgs();
  auto exe = Compiled().Compile(*m);
  std::vector<BufferPtr> held = testutil::Buffers(args);
  std::vector<BufferPtr> got = exe->Execute(held);  // the caller keeps a reference to each
  EXPECT_EQ(LastStats(*exe).donated_reused, 0);
  for (size_t k = 0; k < args.size(); ++k) EXPECT_TRUE(*held[k] == args[k]) << "argument " << k << " was written";
  for (size_t k = 0; k < 3; ++k) EXPECT_NE(got[k]->bytes().data(), held[k]->bytes().data());
}

// The CPU plan's switches an executable is compiled under (Note [Batch-sliced chains], [Products
// into views], [Independent kernels as one loop]).
struct Planner {
  bool chains = true, views = true, groups = true;
};

// Compiles m under `planner` (the flags are restored after) and runs it on `args` (donated);
// *stats gets the run's counts.
std::vector<BufferPtr> RunPlanned(const ir::Module& m, const std::vector<ir::Literal>& args, Planner planner,
                                  Stats* stats) {
  const Planner before{flags::chains(), flags::views(), flags::groups()};
  flags::set_chains(planner.chains);
  flags::set_views(planner.views);
  flags::set_groups(planner.groups);
  auto exe = Compiled().Compile(m);
  flags::set_chains(before.chains);
  flags::set_views(before.views);
  flags::set_groups(before.groups);
  std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
  *stats = LastStats(*exe);
  // Note [Buffer assignment]: whatever ran side by side, the plan is legal and the executor's
  // count of live bytes is the plan's.
  const PlannedBuffers planned = BuffersOf(*exe);
  EXPECT_EQ(passes::CheckBufferPlan(*planned.problem, *planned.plan), "") << m.name();
  EXPECT_EQ(stats->peak_bytes, planned.plan->peak_live_bytes) << m.name();
  return got;
}

// Note [Batch-sliced chains] (backends/cpu/chains.cc): runs `text` with chains and kernel by kernel (for
// `args` and for `args` with one inf), and checks that the chained run ran `chained` kernels in
// chains, that both runs have the same bits, and that they are the interpreter's within 1e-4.
void ExpectChainsKeepTheBits(const std::string& text, const std::vector<ir::Literal>& args, int64_t inf_at,
                             int64_t chained, const std::string& what) {
  auto m = ir::ParseModule(text);
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto run = [&](bool chains, const std::vector<ir::Literal>& in, Stats* stats) {
    return RunPlanned(*m, in, Planner{.chains = chains}, stats);
  };
  Stats with, without;
  const std::vector<BufferPtr> got = run(true, args, &with);
  const std::vector<BufferPtr> ref = run(false, args, &without);
  EXPECT_EQ(with.chained_kernels, chained) << what;
  EXPECT_EQ(with.chains_rerun, 0) << what;
  EXPECT_EQ(without.chained_kernels, 0) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_TRUE(testutil::SameBits(*ref[r], *got[r])) << what << ": result " << r << " differs from the unchained run";
    for (int64_t i = 0; i < want[r]->NumElements(); ++i)
      ASSERT_NEAR(got[r]->GetDouble(i), want[r]->GetDouble(i), 1e-4 * (1 + std::abs(want[r]->GetDouble(i))))
          << what << ": result " << r << " element " << i;
  }
  // An inf operand: a product's BLAS block is not finite, the product is recomputed exactly and
  // the chain runs again kernel by kernel.
  std::vector<ir::Literal> with_inf = args;
  with_inf[0].SetDouble(inf_at, INFINITY);
  const std::vector<BufferPtr> got_inf = run(true, with_inf, &with);
  const std::vector<BufferPtr> ref_inf = run(false, with_inf, &without);
  EXPECT_EQ(with.chains_rerun, 1) << what;
  for (size_t r = 0; r < got_inf.size(); ++r)
    EXPECT_TRUE(testutil::SameBits(*ref_inf[r], *got_inf[r])) << what << ": result " << r << " with an inf operand";
}

// Attention's scores product, causally masked softmax rows and values product run as one chain,
// slice by slice of the (batch, head) pairs, with the mask kernel between them moved before it.
// Shapes and the scores' elementwise op vary; the products are at least 32^3 (through BLAS).
TEST(CompiledExecutorTest, AttentionRunsAsBatchSlicedChains) {
  struct Case {
    int64_t B, T, H, D;
    const char* op;  // applied to the scaled scores before the mask
  };
  for (const Case& c : {Case{2, 32, 4, 32, "tanh"}, Case{3, 32, 2, 48, "negate"}, Case{2, 64, 2, 32, "abs"},
                        Case{1, 48, 4, 32, "none"}}) {
    const std::string q = fmt::format("f32[{},{},{},{}]", c.B, c.T, c.H, c.D);
    const std::string st = fmt::format("[{},{},{},{}]", c.B, c.H, c.T, c.T);
    const std::string row = fmt::format("[{},{},{}]", c.B, c.H, c.T);
    const std::string op = std::string(c.op) == "none" ? "" : std::string(c.op) == "negate" ? "neg" : c.op;
    std::string text = fmt::format(R"(module @attention {{
  func @main {{
    %q = parameter() {{index=0}} : {0}
    %k = parameter() {{index=1}} : {0}
    %v = parameter() {{index=2}} : {0}
    %s = dot_general(%q, %k) {{lhs_batch=[0,2], rhs_batch=[0,2], lhs_contracting=[3], rhs_contracting=[3]}} : f32{1}
    %i = iota() {{dim=0}} : i32[{3},{3}]
    %j = iota() {{dim=1}} : i32[{3},{3}]
    %future = compare(%j, %i) {{dir=gt}} : bool[{3},{3}]
    %fb = broadcast_in_dim(%future) {{dims=[2,3]}} : bool{1}
    %c = constant() {{value=0.25}} : f32[]
    %cs = broadcast_in_dim(%c) {{dims=[]}} : f32{1}
    %lo = constant() {{value=-1e30}} : f32[]
    %los = broadcast_in_dim(%lo) {{dims=[]}} : f32{1}
    %ss0 = mul(%s, %cs) : f32{1}
)",
                                   q, st, row, c.T);
    text += op.empty() ? "    %ss = add(%ss0, %ss0) : f32" + st + "\n" : "    %ss = " + op + "(%ss0) : f32" + st + "\n";
    text += fmt::format(R"(    %sm = select(%fb, %los, %ss) : f32{0}
    %mx = reduce(%sm) {{kind=max, dims=[3]}} : f32{1}
    %mxb = broadcast_in_dim(%mx) {{dims=[0,1,2]}} : f32{0}
    %d = sub(%sm, %mxb) : f32{0}
    %e = exp(%d) : f32{0}
    %su = reduce(%e) {{kind=sum, dims=[3]}} : f32{1}
    %sub = broadcast_in_dim(%su) {{dims=[0,1,2]}} : f32{0}
    %p = div(%e, %sub) : f32{0}
    %o = dot_general(%p, %v) {{lhs_batch=[0,1], rhs_batch=[0,2], lhs_contracting=[3], rhs_contracting=[1]}} : f32[{2},{3},{4},{5}]
    return %o, %p
  }}
}})",
                        st, row, c.B, c.H, c.T, c.D);
    std::vector<ir::Literal> args;
    for (uint64_t s = 0; s < 3; ++s) args.push_back(RandomLiteral(DType::kF32, {c.B, c.T, c.H, c.D}, 60 + s));
    const int64_t inf_at = ((0 * c.T + 5) * c.H + 1) * c.D + 1;  // q[0, 5, 1, 1]
    ExpectChainsKeepTheBits(text, args, inf_at, /*chained=*/3,
                            fmt::format("B {} T {} H {} D {} {}", c.B, c.T, c.H, c.D, c.op));
    if (HasFatalFailure()) return;
  }
}

// An MLP's products, cut into one block of rows per thread as their kernel cuts them, and the
// elementwise kernel between them run as one chain of row blocks.
TEST(CompiledExecutorTest, AnMlpRunsAsAChainOfRowBlocks) {
  struct Case {
    int64_t M, K, N;
    const char* op;
  };
  for (const Case& c : {Case{256, 128, 256, "tanh"}, Case{512, 64, 128, "exp"}, Case{256, 512, 128, "abs"}}) {
    const std::string text = fmt::format(R"(module @mlp {{
  func @main {{
    %x = parameter() {{index=0}} : f32[{0},{1}]
    %w1 = parameter() {{index=1}} : f32[{1},{2}]
    %w2 = parameter() {{index=2}} : f32[{2},{1}]
    %h = dot_general(%x, %w1) {{lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]}} : f32[{0},{2}]
    %t = {3}(%h) : f32[{0},{2}]
    %y = dot_general(%t, %w2) {{lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]}} : f32[{0},{1}]
    return %y, %t
  }}
}})",
                                         c.M, c.K, c.N, c.op);
    std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {c.M, c.K}, 70),
                                     RandomLiteral(DType::kF32, {c.K, c.N}, 71),
                                     RandomLiteral(DType::kF32, {c.N, c.K}, 72)};
    for (int64_t i = 0; i < args[1].NumElements(); ++i) args[1].SetDouble(i, args[1].GetDouble(i) * 0.1);
    const int64_t inf_at = (c.M - 7) * c.K + 3;  // a row of the second block
    ExpectChainsKeepTheBits(text, args, inf_at, /*chained=*/3, fmt::format("M {} K {} N {} {}", c.M, c.K, c.N, c.op));
    if (HasFatalFailure()) return;
  }
}

// Note [Independent kernels as one loop] (backends/cpu/groups.cc): three parameters' updates (one fused
// kernel each, of 40000, 4096 and 100 elements, reading none of each other's results) and a
// kernel that reads the first one's gradient run as one pool call; the results are the bits of
// one call each, still written into the donated arguments' storage (except where another kernel
// of the call reads it), and the interpreter's within 1e-6.
TEST(CompiledExecutorTest, IndependentKernelsRunAsOneLoop) {
  std::string text = "module @updates {\n  func @main {\n    %lr = parameter() {index=0} : f32[]\n";
  const int64_t sizes[] = {40000, 4096, 100};
  for (int u = 0; u < 3; ++u)
    text += fmt::format(R"(    %p{0} = parameter() {{index={1}}} : f32[{2}]
    %g{0} = parameter() {{index={3}}} : f32[{2}]
    %lrs{0} = broadcast_in_dim(%lr) {{dims=[]}} : f32[{2}]
    %t{0} = tanh(%g{0}) : f32[{2}]
    %s{0} = mul(%t{0}, %lrs{0}) : f32[{2}]
    %q{0} = sub(%p{0}, %s{0}) : f32[{2}]
)",
                        u, 1 + 2 * u, sizes[u], 2 + 2 * u);
  // h1 reads g0 too: a fourth kernel, the last reader of g0.
  text += "    %two = constant() {value=2.0} : f32[]\n    %twos = broadcast_in_dim(%two) {dims=[]} : f32[40000]\n";
  text += "    %h0 = mul(%g0, %twos) : f32[40000]\n    %h1 = exp(%h0) : f32[40000]\n";
  text += "    return %q0, %q1, %q2, %h1\n  }\n}\n";
  auto m = ir::ParseModule(text);
  std::vector<ir::Literal> args = {ir::Literal::FromVector<float>(DType::kF32, Shape{}, std::vector<float>{0.01f})};
  for (int u = 0; u < 3; ++u) {
    args.push_back(RandomLiteral(DType::kF32, {sizes[u]}, 90 + 2 * u));
    args.push_back(RandomLiteral(DType::kF32, {sizes[u]}, 91 + 2 * u));
  }
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto run = [&](bool groups, Stats* stats) { return RunPlanned(*m, args, Planner{.groups = groups}, stats); };
  Stats grouped, alone;
  const std::vector<BufferPtr> got = run(true, &grouped);
  const std::vector<BufferPtr> ref = run(false, &alone);
  EXPECT_EQ(grouped.grouped_kernels, 4);  // planned for the two-thread target, whatever the pool
  EXPECT_EQ(alone.grouped_kernels, 0);
  EXPECT_EQ(grouped.kernels_run, alone.kernels_run);
  // g0 dies at h1's kernel, which alone writes h1 into it; in the group the first update's
  // kernel may still be reading g0, so h1 gets a buffer of its own.
  EXPECT_EQ(grouped.donated_reused, alone.donated_reused - 1);
  EXPECT_GE(grouped.donated_reused, 3);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(testutil::SameBits(*ref[k], *got[k])) << "result " << k;
    std::string where;
    EXPECT_TRUE(testutil::Near(*want[k], *got[k], 1e-6, 1.0, &where)) << "result " << k << ": " << where;
  }
}

// Note [Products into views] (backends/cpu/views.cc): attention's q, k and v slices of a QKV buffer are
// read in place by the products, the output's transpose and the gradients' transposes and
// concatenation are written by them; 8 copies folded. The bits are those of the copies (with
// chains and without, and with an inf that sends the products to their exact loop), and the
// values the interpreter's. A slice that is also a result of the function stays a copy.
TEST(CompiledExecutorTest, ProductsReadAndWriteViewsInsteadOfCopies) {
  for (const bool v_returned : {false, true}) {
    const std::string text = fmt::format(R"(module @attention_views {{
  func @main {{
    %qkv = parameter() {{index=0}} : f32[2,32,384]
    %g = parameter() {{index=1}} : f32[2,4,32,32]
    %q0 = slice(%qkv) {{start=[0,0,0], limit=[2,32,128], strides=[1,1,1]}} : f32[2,32,128]
    %k0 = slice(%qkv) {{start=[0,0,128], limit=[2,32,256], strides=[1,1,1]}} : f32[2,32,128]
    %v0 = slice(%qkv) {{start=[0,0,256], limit=[2,32,384], strides=[1,1,1]}} : f32[2,32,128]
    %q = reshape(%q0) : f32[2,32,4,32]
    %k = reshape(%k0) : f32[2,32,4,32]
    %v = reshape(%v0) : f32[2,32,4,32]
    %s = dot_general(%q, %k) {{lhs_batch=[0,2], rhs_batch=[0,2], lhs_contracting=[3], rhs_contracting=[3]}} : f32[2,4,32,32]
    %e = tanh(%s) : f32[2,4,32,32]
    %o = dot_general(%e, %v) {{lhs_batch=[0,1], rhs_batch=[0,2], lhs_contracting=[3], rhs_contracting=[1]}} : f32[2,4,32,32]
    %ot = transpose(%o) {{perm=[0,2,1,3]}} : f32[2,32,4,32]
    %out = reshape(%ot) : f32[2,32,128]
    %dq = dot_general(%g, %k) {{lhs_batch=[0,1], rhs_batch=[0,2], lhs_contracting=[3], rhs_contracting=[1]}} : f32[2,4,32,32]
    %dk = dot_general(%g, %q) {{lhs_batch=[0,1], rhs_batch=[0,2], lhs_contracting=[2], rhs_contracting=[1]}} : f32[2,4,32,32]
    %dv = dot_general(%e, %g) {{lhs_batch=[0,1], rhs_batch=[0,1], lhs_contracting=[2], rhs_contracting=[2]}} : f32[2,4,32,32]
    %dqt = transpose(%dq) {{perm=[0,2,1,3]}} : f32[2,32,4,32]
    %dkt = transpose(%dk) {{perm=[0,2,1,3]}} : f32[2,32,4,32]
    %dvt = transpose(%dv) {{perm=[0,2,1,3]}} : f32[2,32,4,32]
    %dq2 = reshape(%dqt) : f32[2,32,128]
    %dk2 = reshape(%dkt) : f32[2,32,128]
    %dv2 = reshape(%dvt) : f32[2,32,128]
    %dqkv = concatenate(%dq2, %dk2, %dv2) {{dim=2}} : f32[2,32,384]
    return %out, %dqkv{}
  }}
}})",
                                         v_returned ? ", %v0" : "");
    auto m = ir::ParseModule(text);
    std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {2, 32, 384}, 80),
                                     RandomLiteral(DType::kF32, {2, 4, 32, 32}, 81)};
    const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
    auto run = [&](bool views, bool chains, const std::vector<ir::Literal>& in, Stats* stats) {
      return RunPlanned(*m, in, Planner{.chains = chains, .views = views}, stats);
    };
    for (const bool inf : {false, true}) {
      if (inf) args[0].SetDouble((1 * 32 + 3) * 384 + 40, INFINITY);  // q[1, 3, head 1, 8]
      const std::string what = fmt::format("v returned {}, inf {}", v_returned, inf);
      Stats copies, viewed, unchained;
      const std::vector<BufferPtr> ref = run(false, true, args, &copies);
      const std::vector<BufferPtr> got = run(true, true, args, &viewed);
      const std::vector<BufferPtr> alone = run(true, false, args, &unchained);
      EXPECT_EQ(copies.copies_folded, 0) << what;
      EXPECT_EQ(viewed.copies_folded, v_returned ? 7 : 8) << what;
      EXPECT_EQ(unchained.copies_folded, viewed.copies_folded) << what;
      EXPECT_EQ(viewed.kernels_run, copies.kernels_run - viewed.copies_folded) << what;
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t r = 0; r < got.size(); ++r) {
        EXPECT_TRUE(testutil::SameBits(*ref[r], *got[r])) << what << ": result " << r << " differs from the copies'";
        EXPECT_TRUE(testutil::SameBits(*ref[r], *alone[r])) << what << ": result " << r << " unchained";
        if (inf) continue;
        for (int64_t i = 0; i < want[r]->NumElements(); ++i)
          ASSERT_NEAR(got[r]->GetDouble(i), want[r]->GetDouble(i), 1e-4 * (1 + std::abs(want[r]->GetDouble(i))))
              << what << ": result " << r << " element " << i;
      }
    }
  }
}

// Note [Products into views] with Note [Products side by side]: a linear layer's two gradient
// products read dy as a slice of a wider buffer in place, side by side; the bits are those of the
// sliced copy's run.
TEST(CompiledExecutorTest, PairedProductsReadASliceInPlace) {
  constexpr const char* kGrads = R"(module @grads_of_a_slice {
  func @main {
    %x = parameter() {index=0} : f32[64,128]
    %w = parameter() {index=1} : f32[256,128]
    %both = parameter() {index=2} : f32[64,512]
    %dy = slice(%both) {start=[0,256], limit=[64,512], strides=[1,1]} : f32[64,256]
    %dx = dot_general(%dy, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,128]
    %dw = dot_general(%dy, %x) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[256,128]
    return %dx, %dw
  }
})";
  auto m = ir::ParseModule(kGrads);
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 128}, 4),
                                         RandomLiteral(DType::kF32, {256, 128}, 5),
                                         RandomLiteral(DType::kF32, {64, 512}, 6)};
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto run = [&](bool views, Stats* stats) { return RunPlanned(*m, args, Planner{.views = views}, stats); };
  Stats viewed, copied;
  const std::vector<BufferPtr> got = run(true, &viewed);
  const std::vector<BufferPtr> ref = run(false, &copied);
  EXPECT_EQ(viewed.copies_folded, 1);
  EXPECT_EQ(viewed.products_paired, 2);
  EXPECT_EQ(copied.products_paired, 2);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_TRUE(testutil::SameBits(*ref[k], *got[k])) << "result " << k;
    std::string where;
    EXPECT_TRUE(testutil::Near(*want[k], *got[k], 1e-4, 1.0, &where)) << "result " << k << ": " << where;
  }
}

// Note [Products side by side] (backends/cpu/pairs.cc): a linear layer's two gradient products (dx and
// dw, independent, equal work) run as one pool call of two whole products on a two-thread pool;
// a product that reads the one before it does not pair. Results as the interpreter's, and the
// same bits on every run.
TEST(CompiledExecutorTest, IndependentProductsRunSideBySide) {
  constexpr const char* kGrads = R"(module @grads {
  func @main {
    %x = parameter() {index=0} : f32[64,128]
    %w = parameter() {index=1} : f32[256,128]
    %dy = parameter() {index=2} : f32[64,256]
    %dx = dot_general(%dy, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,128]
    %dw = dot_general(%dy, %x) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[256,128]
    %z = dot_general(%dx, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[1]} : f32[64,256]
    return %dx, %dw, %z
  }
})";
  auto m = ir::ParseModule(kGrads);
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 128}, 1),
                                         RandomLiteral(DType::kF32, {256, 128}, 2),
                                         RandomLiteral(DType::kF32, {64, 256}, 3)};
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  for (Backend* backend : {&Cpu(), &Compiled()}) {
    const std::string what(backend->name());
    auto exe = backend->Compile(*m);
    std::vector<BufferPtr> first;
    for (int run = 0; run < 3; ++run) {
      const std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
      EXPECT_EQ(LastStats(*exe).products_paired, 2) << what;  // dx and dw; z reads dx
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t k = 0; k < want.size(); ++k) {
        for (int64_t i = 0; i < want[k]->NumElements(); ++i)
          ASSERT_NEAR(got[k]->GetDouble(i), want[k]->GetDouble(i), 1e-4 * (1 + std::abs(want[k]->GetDouble(i))))
              << what << " result " << k << " element " << i;
        if (run == 0) first.push_back(got[k]);
        else EXPECT_TRUE(testutil::SameBits(*first[k], *got[k])) << what << " result " << k;
      }
    }
  }
}

// Note [Kernels beside a pair] (backends/cpu/pairs.cc): the small kernels next to a pair that do not
// read its products join its pool call (the sum of squares of the first weight gradient moves
// up from the end to beside the second pair), and the results are the interpreter's, the same
// bits on every run and the same as without the pool (one thread runs everything in order).
// Note [Followers of a pair]: dy2 reads dx1 and not dw1, so the thread that ran dx1 may run it
// while dw1 runs; inline, that thread runs it before dw1 starts, so it always does.
TEST(CompiledExecutorTest, SmallKernelsRunBesideAPair) {
  constexpr const char* kTwoLayers = R"(module @two_layers {
  func @main {
    %x1 = parameter() {index=0} : f32[64,128]
    %w1 = parameter() {index=1} : f32[256,128]
    %dy = parameter() {index=2} : f32[64,256]
    %x2 = parameter() {index=3} : f32[64,128]
    %w2 = parameter() {index=4} : f32[128,128]
    %dx1 = dot_general(%dy, %w1) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,128]
    %dw1 = dot_general(%dy, %x1) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[256,128]
    %dy2 = tanh(%dx1) : f32[64,128]
    %dx2 = dot_general(%dy2, %w2) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,128]
    %dw2 = dot_general(%dy2, %x2) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[128,128]
    %q1 = mul(%dw1, %dw1) : f32[256,128]
    %s1 = reduce(%q1) {kind=sum, dims=[0,1]} : f32[]
    %q2 = mul(%dw2, %dw2) : f32[128,128]
    %s2 = reduce(%q2) {kind=sum, dims=[0,1]} : f32[]
    %norm = add(%s1, %s2) : f32[]
    return %dx2, %dw1, %dw2, %norm
  }
})";
  auto m = ir::ParseModule(kTwoLayers);
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 128}, 1), RandomLiteral(DType::kF32, {256, 128}, 2),
                                         RandomLiteral(DType::kF32, {64, 256}, 3), RandomLiteral(DType::kF32, {64, 128}, 4),
                                         RandomLiteral(DType::kF32, {128, 128}, 5)};
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto exe = Compiled().Compile(*m);
  std::vector<BufferPtr> first;
  int64_t first_kernels = -1;
  for (int run = 0; run < 3; ++run) {
    const std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
    if (run == 0) first_kernels = LastStats(*exe).kernels_run;
    EXPECT_EQ(LastStats(*exe).products_paired, 4);
    EXPECT_EQ(LastStats(*exe).kernels_beside_pairs, 1);  // dw1's sum of squares; none after dw2
    EXPECT_LE(LastStats(*exe).followers_beside_pairs, 1);  // dy2, when dw1 was still running
    EXPECT_EQ(LastStats(*exe).kernels_run, first_kernels) << "run " << run;
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      for (int64_t i = 0; i < want[k]->NumElements(); ++i)
        ASSERT_NEAR(got[k]->GetDouble(i), want[k]->GetDouble(i), 1e-4 * (1 + std::abs(want[k]->GetDouble(i))))
            << "result " << k << " element " << i;
      if (run == 0) first.push_back(got[k]);
      else EXPECT_TRUE(testutil::SameBits(*first[k], *got[k])) << "result " << k;
    }
  }
  // Inline (a crowded pool runs every call on the caller, in plan order): the same bits.
  ThreadPool::Global().SetThreadInline(true);
  const std::vector<BufferPtr> inline_got = exe->Execute(testutil::Buffers(args));
  ThreadPool::Global().SetThreadInline(false);
  EXPECT_EQ(LastStats(*exe).followers_beside_pairs, 1);
  EXPECT_EQ(LastStats(*exe).kernels_run, first_kernels);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(testutil::SameBits(*first[k], *inline_got[k])) << "result " << k;
}

// Note [Kernels beside a pair]: a small kernel that neither product reads moves down beside the
// pair also from behind a kernel that stays (the product reads it): here the column sum c, behind
// the tanh the pair multiplies. Same values as the interpreter's.
TEST(CompiledExecutorTest, ASmallKernelMovesBesideAPairPastOneThatStays) {
  constexpr const char* kLayer = R"(module @layer {
  func @main {
    %x = parameter() {index=0} : f32[64,128]
    %w = parameter() {index=1} : f32[256,128]
    %dy = parameter() {index=2} : f32[64,256]
    %c = reduce(%dy) {kind=sum, dims=[0]} : f32[256]
    %t = tanh(%dy) : f32[64,256]
    %dx = dot_general(%t, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,128]
    %dw = dot_general(%t, %x) {lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]} : f32[256,128]
    return %dx, %dw, %c
  }
})";
  auto m = ir::ParseModule(kLayer);
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 128}, 1), RandomLiteral(DType::kF32, {256, 128}, 2),
                                         RandomLiteral(DType::kF32, {64, 256}, 3)};
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  auto exe = Compiled().Compile(*m);
  const std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
  EXPECT_EQ(LastStats(*exe).products_paired, 2);
  EXPECT_EQ(LastStats(*exe).kernels_beside_pairs, 1);  // c
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    std::string where;
    EXPECT_TRUE(testutil::Near(*want[k], *got[k], 1e-4, 1.0, &where)) << "result " << k << ": " << where;
  }
}

// Note [Followers of a pair] on random chains: a backward pair (dx = dy w, dw = dy^T x) followed by
// a random chain of elementwise ops, row reductions and column sums on dx (the chain's kernels
// are the pair's followers when they are small), and a sum of squares of dw. The results are the
// interpreter's, and the bits are the same on every threaded run (however far dx's thread got)
// and inline (where dx's thread runs every follower before dw starts).
TEST(CompiledExecutorTest, FollowersOfRandomChainsKeepTheirValues) {
  for (uint64_t seed = 0; seed < 8; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::vector<int64_t> from) { return from[rng() % from.size()]; };
    const int64_t M = pick({64, 96, 128}), N = pick({128, 192, 256}), K = pick({128, 160});
    std::string body = fmt::format(
        "    %x = parameter() {{index=0}} : f32[{0},{2}]\n"
        "    %w = parameter() {{index=1}} : f32[{1},{2}]\n"
        "    %dy = parameter() {{index=2}} : f32[{0},{1}]\n"
        "    %dx = dot_general(%dy, %w) {{lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]}} : f32[{0},{2}]\n"
        "    %dw = dot_general(%dy, %x) {{lhs_batch=[], rhs_batch=[], lhs_contracting=[0], rhs_contracting=[0]}} : f32[{1},{2}]\n",
        M, N, K);
    const std::string mk = fmt::format("f32[{},{}]", M, K);
    std::string prev = "%dx", results;
    const int steps = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < steps; ++i) {
      const std::string t = fmt::format("%t{}", i);
      switch (rng() % 5) {
        case 0: body += fmt::format("    {} = tanh({}) : {}\n", t, prev, mk); break;
        case 1: body += fmt::format("    {} = mul({}, %x) : {}\n", t, prev, mk); break;
        case 2:  // a row reduction, broadcast back: a row kernel
          body += fmt::format("    %r{0} = reduce({1}) {{kind=sum, dims=[1]}} : f32[{2}]\n"
                              "    %b{0} = broadcast_in_dim(%r{0}) {{dims=[0]}} : {3}\n"
                              "    {4} = sub({1}, %b{0}) : {3}\n",
                              i, prev, M, mk, t);
          break;
        case 3:  // a column sum beside the chain (a bias gradient's shape)
          body += fmt::format("    %c{0} = reduce({1}) {{kind=sum, dims=[0]}} : f32[{2}]\n"
                              "    {3} = neg({1}) : {4}\n",
                              i, prev, K, t, mk);
          results += fmt::format(", %c{}", i);
          break;
        default:
          body += fmt::format("    %a{0} = abs({1}) : {2}\n    %n{0} = neg(%a{0}) : {2}\n    {3} = exp(%n{0}) : {2}\n",
                              i, prev, mk, t);
          break;
      }
      prev = t;
    }
    body += fmt::format("    %q = mul(%dw, %dw) : f32[{},{}]\n    %s = reduce(%q) {{kind=sum, dims=[0,1]}} : f32[]\n", N, K);
    const std::string text =
        fmt::format("module @chain{} {{\n  func @main {{\n{}    return {}, %dw, %s{}\n  }}\n}}\n", seed, body, prev, results);
    SCOPED_TRACE(text);
    auto m = ir::ParseModule(text);
    const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {M, K}, 10 * seed + 1),
                                           RandomLiteral(DType::kF32, {N, K}, 10 * seed + 2),
                                           RandomLiteral(DType::kF32, {M, N}, 10 * seed + 3)};
    const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
    auto exe = Compiled().Compile(*m);
    std::vector<BufferPtr> first;
    int64_t kernels = -1;
    for (int run = 0; run < 4; ++run) {
      const bool inline_run = run == 3;
      if (inline_run) ThreadPool::Global().SetThreadInline(true);
      const std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
      if (inline_run) ThreadPool::Global().SetThreadInline(false);
      const Stats stats = LastStats(*exe);
      EXPECT_EQ(stats.products_paired, 2) << "run " << run;
      if (run == 0) kernels = stats.kernels_run;
      EXPECT_EQ(stats.kernels_run, kernels) << "run " << run;
      if (inline_run) {
        EXPECT_GE(stats.followers_beside_pairs, 1);
      }
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        for (int64_t i = 0; i < want[k]->NumElements(); ++i)
          ASSERT_NEAR(got[k]->GetDouble(i), want[k]->GetDouble(i), 1e-3 * (1 + std::abs(want[k]->GetDouble(i))))
              << "run " << run << " result " << k << " element " << i;
        if (run == 0) first.push_back(got[k]);
        else EXPECT_TRUE(testutil::SameBits(*first[k], *got[k])) << "run " << run << " result " << k;
      }
    }
  }
}

// Note [Buffers kept between runs] (backends/cpu/executor.cc): from the second run on, a run's
// arena is kept for the next, so the third run allocates its results' buffers alone; the results
// handed out earlier are never in the arena (still the same values after later runs).
TEST(CompiledExecutorTest, IntermediatesAreKeptForTheNextRun) {
  constexpr const char* kChain = R"(module @chain {
  func @main {
    %x = parameter() {index=0} : f32[64,64]
    %t = tanh(%x) : f32[64,64]
    %d = dot_general(%t, %t) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,64]
    %c = constant() {value=0.01} : f32[]
    %cs = broadcast_in_dim(%c) {dims=[]} : f32[64,64]
    %s = mul(%d, %cs) : f32[64,64]
    %e = exp(%s) : f32[64,64]
    %d2 = dot_general(%e, %t) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[64,64]
    %r = reduce(%d2) {kind=sum, dims=[1]} : f32[64]
    return %e, %r
  }
})";
  auto m = ir::ParseModule(kChain);
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 64}, 7)};
  const std::vector<BufferPtr> want = testutil::Run("interpreter", *m, args);
  for (Backend* backend : {&Cpu(), &Compiled()}) {
    const std::string what(backend->name());
    auto exe = backend->Compile(*m);
    std::vector<std::vector<BufferPtr>> runs;
    std::vector<int64_t> fresh;
    for (int run = 0; run < 3; ++run) {
      std::vector<BufferPtr> in = testutil::Buffers(args);
      const std::vector<BufferPtr> held = in;  // not donated
      runs.push_back(exe->Execute(std::move(in)));
      fresh.push_back(LastStats(*exe).new_buffers);
    }
    const passes::BufferPlan& plan = *BuffersOf(*exe).plan;
    std::set<int> own;
    for (const passes::BufferPlan::Value& v : plan.values)
      if (v.storage == passes::BufferPlan::Storage::kOwn) own.insert(v.buffer);
    EXPECT_EQ(own.size(), 2u) << what << "\n" << exe->DescribeBuffers();  // %e and %r
    EXPECT_GT(plan.arena_bytes, 0) << what;
    EXPECT_EQ(fresh[0], 3) << what;  // the results and the arena
    EXPECT_EQ(fresh[1], 3) << what;  // the arena is kept from the second run on
    EXPECT_EQ(fresh[2], 2) << what;
    // The products go through BLAS: close to the interpreter, and every run bitwise the first.
    ASSERT_EQ(runs[0].size(), want.size()) << what;
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < want[k]->NumElements(); ++i)
        ASSERT_NEAR(runs[0][k]->GetDouble(i), want[k]->GetDouble(i), 1e-4 * (1 + std::abs(want[k]->GetDouble(i))))
            << what << " result " << k << " element " << i;
    for (const auto& got : runs)
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_TRUE(testutil::SameBits(*runs[0][k], *got[k])) << what << " result " << k;
    EXPECT_NE(runs[0][0]->bytes().data(), runs[2][0]->bytes().data()) << what;
  }
}

// A reshape of a dying intermediate takes its storage: no copy, and the result is right.
TEST(CompiledExecutorTest, ReshapeOfADyingValueIsFree) {
  auto m = ir::ParseModule(R"(module @r {
  func @main {
    %x = parameter() {index=0} : f32[64,32]
    %w = parameter() {index=1} : f32[32,48]
    %y = dot_general(%x, %w) {lhs_contracting=[1], rhs_contracting=[0]} : f32[64,48]
    %r = reshape(%y) : f32[8,8,48]
    %t = tanh(%r) : f32[8,8,48]
    return %t
  }
})");
  const std::vector<ir::Literal> args = {RandomLiteral(DType::kF32, {64, 32}, 1), RandomLiteral(DType::kF32, {32, 48}, 2)};
  const bool fast = flags::fast_math();
  flags::set_fast_math(false);
  const std::vector<BufferPtr> want = testutil::Run("cpu", *m, args);
  std::vector<BufferPtr> got = Compiled().Compile(*m)->Execute(testutil::Buffers(args));
  flags::set_fast_math(fast);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(testutil::SameBits(*want[0], *got[0]));
  EXPECT_EQ(got[0]->type().ToString(), "f32[8,8,48]");
}

}  // namespace
}  // namespace axle::runtime
