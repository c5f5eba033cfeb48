// Schedules as text: every tests/runtime/schedules/*.axir file is one test. Its RUN lines name
// the targets to compile it for, each with the prefix of its CHECK lines:
//
//   // RUN: --target=cpu-2t --check-prefix=T2
//   // RUN: --target=cpu-16t --check-prefix=T16
//   module @m { ... }
//   // T2: pair with 3
//   // T16-NOT: pair with
//
// The runner prints the schedule the compiled backend's executor runs for each target (as
// `axle compile --emit=schedule --target=...` does) and FileChecks it; a RUN line that starts
// with `--emit=buffers` checks the buffer plan instead (Note [Buffer assignment]). The targets
// are values, not this machine: the tests read the same on any core count and never skip.
// Reproduce one with
//   build/axle compile --emit=schedule --target=cpu-16t tests/runtime/schedules/FILE.axir
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "backends/cpu/compiled_backend.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/target.h"
#include "runtime_test_util.h"
#include "runtime/thread_pool.h"
#include "testing/filecheck.h"
#include "testing/random_module.h"
#include "testing/text_test.h"

namespace axle::runtime {
namespace {

const std::string kDir = std::string(AXLE_SOURCE_DIR) + "/tests/runtime/schedules";

std::string ReadFile(const std::string& file) {
  std::ifstream in(file);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

class ScheduleTextTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleTextTest, MatchesChecks) {
  const std::string text = ReadFile(GetParam());
  const std::regex run(R"(// RUN: (--emit=buffers )?--target=(\S+) --check-prefix=(\S+))");
  int runs = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), run), end; it != end; ++it, ++runs) {
    const bool buffers = (*it)[1].matched;
    const std::string target = (*it)[2], prefix = (*it)[3];
    auto m = ir::ParseModule(text, GetParam());
    const CompiledStages stages = DescribeCompiledStages(*m, passes::Target::Parse(target), /*fast_math=*/true);
    const std::string& out = buffers ? stages.buffers : stages.schedule;
    const testing::FileCheckResult r = testing::FileCheck(out, text, prefix);
    EXPECT_TRUE(r.ok) << GetParam() << " for " << target << ":\n" << r.message << "\n--- output:\n" << out;
  }
  EXPECT_GT(runs, 0) << GetParam() << ": no '// RUN: [--emit=buffers] --target=SPEC --check-prefix=P' line";
}

INSTANTIATE_TEST_SUITE_P(Files, ScheduleTextTest, ::testing::ValuesIn(testing::TextTestFiles(kDir, false)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::TextTestName(info.param, kDir);
                         });

// A module of products that pair, an attention chain and independent update kernels.
constexpr const char* kMixed = R"(module @mixed {
  func @main {
    %x = parameter() {index=0} : f32[256,256]
    %w1 = parameter() {index=1} : f32[256,256]
    %w2 = parameter() {index=2} : f32[256,256]
    %a = dot_general(%x, %w1) {lhs_contracting=[1], rhs_contracting=[0]} : f32[256,256]
    %b = dot_general(%x, %w2) {lhs_contracting=[1], rhs_contracting=[0]} : f32[256,256]
    %c = add(%a, %b) : f32[256,256]
    %d = tanh(%c) : f32[256,256]
    return %d
  }
})";

// The compiler and the executor's planning read the target they are given, never the runtime's
// pool (ARCHITECTURE.md, invariant 8): compiling and planning for three targets asks
// ThreadPool::Global() nothing.
TEST(ScheduleTest, PlanningNeverReadsTheGlobalPool) {
  auto m = ir::ParseModule(kMixed);
  const int64_t before = ThreadPool::GlobalAccessesOnThisThread();
  for (const char* t : {"cpu-2t", "cpu-8t", "cpu-16t"})
    EXPECT_FALSE(DescribeCompiledStages(*m, passes::Target::Parse(t), true).schedule.empty()) << t;
  EXPECT_EQ(ThreadPool::GlobalAccessesOnThisThread(), before);
  // The counter counts: running a step asks for the pool.
  auto exe = NewCompiledBackend(nullptr, passes::Target::Parse("cpu-2t"))->Compile(*m);
  EXPECT_EQ(ThreadPool::GlobalAccessesOnThisThread(), before) << "compiling read the pool";
  std::vector<BufferPtr> args;
  for (int i = 0; i < 3; ++i) args.push_back(std::make_shared<ir::Literal>(ir::TensorType(DType::kF32, {256, 256})));
  exe->Execute(std::move(args));
  EXPECT_GT(ThreadPool::GlobalAccessesOnThisThread(), before);
}

// What `axle compile --emit=schedule` (and `--emit=buffers`) prints is the plan the backend's
// executable runs (the module has pairs, chains and groups).
TEST(ScheduleTest, TheDescribedScheduleIsTheExecutablesOwn) {
  const std::string file = kDir + "/pairs_and_chains.axir";
  auto m = ir::ParseModule(ReadFile(file), file);
  for (const char* t : {"cpu-2t", "cpu-8t", "cpu-16t"}) {
    const passes::Target target = passes::Target::Parse(t);
    auto exe = NewCompiledBackend(nullptr, target)->Compile(*m);
    const CompiledStages stages = DescribeCompiledStages(*m, target, true);
    EXPECT_EQ(exe->DescribeSchedule(), stages.schedule) << t;
    EXPECT_EQ(exe->DescribeBuffers(), stages.buffers) << t;
  }
}

// Note [Reading a schedule]: the pipeline's output is the scheduled module, and that module,
// printed and parsed back, compiles to the same schedule and buffers without any pass planning it
// again (a file holds the decisions).
TEST(ScheduleTest, AScheduledModuleRunsAsWritten) {
  const std::vector<std::string> files = testing::TextTestFiles(kDir, false);
  ASSERT_GE(files.size(), 2u);
  for (const std::string& file : files) {
    auto m = ir::ParseModule(ReadFile(file), file);
    for (const char* t : {"cpu-2t", "cpu-8t", "cpu-16t"}) {
      const passes::Target target = passes::Target::Parse(t);
      const CompiledStages stages = DescribeCompiledStages(*m, target, true);
      auto scheduled = ir::ParseModule(stages.ir, "<scheduled>");
      EXPECT_EQ(scheduled->scheduled_for(), target.ToString());
      const CompiledStages again = DescribeCompiledStages(*scheduled, target, true);
      EXPECT_EQ(again.ir, stages.ir) << file << " for " << t;
      EXPECT_EQ(again.schedule, stages.schedule) << file << " for " << t;
      EXPECT_EQ(again.buffers, stages.buffers) << file << " for " << t;
    }
  }
}

// The same on random programs (every op; and element-wise ones over larger shapes, which group):
// a scheduled module printed and parsed back gives the same IR, schedule and buffers.
TEST(ScheduleTest, RandomScheduledModulesRoundTrip) {
  testing::RegisterTestCustomCalls();
  testing::RandomModuleOptions wide;
  wide.dtypes = {DType::kF32};
  wide.max_functions = 1;
  wide.max_dim = 64;
  using ir::OpKind;
  wide.ops = {OpKind::kAdd, OpKind::kMul, OpKind::kExp, OpKind::kNeg, OpKind::kTanh, OpKind::kReduce,
              OpKind::kDotGeneral, OpKind::kTranspose, OpKind::kSlice, OpKind::kConcatenate};
  int compiled = 0, with_entries = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    // Through text first: the printer names unnamed values, and both compiles should see the names.
    auto m = ir::ParseModule(
        ir::PrintModule(*testing::RandomModule(seed, seed % 2 == 0 ? wide : testing::RandomModuleOptions{})));
    const passes::Target target = passes::Target::Parse(seed % 3 == 0 ? "cpu-8t" : "cpu-2t");
    CompiledStages stages;
    try {
      stages = DescribeCompiledStages(*m, target, true);
    } catch (const Error&) {
      continue;  // a program the compiled backend refuses (its error is tested elsewhere)
    }
    ++compiled;
    with_entries += stages.ir.find(" sched{") != std::string::npos;
    const CompiledStages again = DescribeCompiledStages(*ir::ParseModule(stages.ir, "<scheduled>"), target, true);
    EXPECT_EQ(again.ir, stages.ir) << "seed " << seed;
    EXPECT_EQ(again.schedule, stages.schedule) << "seed " << seed;
    EXPECT_EQ(again.buffers, stages.buffers) << "seed " << seed;
  }
  EXPECT_GE(compiled, 100);
  EXPECT_GE(with_entries, 10) << "too few random programs got a schedule entry to test reading one";
}

// Two products and two kernels, scheduled by hand for cpu-2t: `A` and `C` are replaced by each
// case's entries.
constexpr const char* kHandScheduled = R"(module @hand {schedule="TARGET"} {
  func @main {
    %x = parameter() {index=0} : f32[8,8]
    %w = parameter() {index=1} : f32[8,8]
    %a = dot_general(%x, %w) {lhs_contracting=[1], rhs_contracting=[0]} A : f32[8,8]
    %b = dot_general(%B, %w) {lhs_contracting=[1], rhs_contracting=[0]} : f32[8,8]
    %c = neg(%b) C : f32[8,8]
    %d = neg(%x) : f32[8,8]
    return %c, %d
  }
})";

std::string HandScheduled(const std::string& a, const std::string& c, const std::string& b_reads = "x",
                          const std::string& target = "cpu-avx2-2t") {
  std::string text = kHandScheduled;
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"TARGET", target}, {" A :", " " + a + " :"},
                                   {"%B", "%" + b_reads}, {" C :", " " + c + " :"}})
    text.replace(text.find(key), key.size(), value);
  return text;
}

// A schedule read from a file is checked before anything runs: each broken entry is an error
// naming the node and the entry. Legality is checked, not size: two 8 x 8 products, far below
// what the planner pairs, may be written as a pair.
TEST(ScheduleTest, AWrittenScheduleIsChecked) {
  const passes::Target t2 = passes::Target::Parse("cpu-2t");
  const std::string paired = DescribeCompiledStages(*ir::ParseModule(HandScheduled("sched{pair=[0, 0]}", "")), t2, true).schedule;
  EXPECT_NE(paired.find("2 products paired"), std::string::npos) << paired;
  const struct {
    std::string a, c, b_reads, target, error;
  } cases[] = {
      {"sched{pair=[0, 0]}", "", "a", "cpu-avx2-2t", "node #2 (dot_general -> %a) at <hand>:5: sched{pair=...}: this step and the next are not two whole products"},
      {"sched{pair=[5, 0]}", "", "x", "cpu-avx2-2t", "would run past the last step"},
      {"sched{pair=[0, 1]}", "", "x", "cpu-avx2-2t", "node #4 (neg -> %c) at <hand>:7 is not a generated kernel that may run beside the pair"},
      {"sched{pair=1}", "", "x", "cpu-avx2-2t", "sched{pair=...} expects 2 non-negative integers"},
      {"sched{chain=[2, 4]}", "", "a", "cpu-avx2-2t", "a chain starts at a product cut into 4 slices"},
      {"", "sched{group=2}", "x", "cpu-avx2-2t", "cannot run in the group's loop"},
      {"sched{fold=read}", "", "x", "cpu-avx2-2t", "no product reads or writes this copy's values through a view"},
      {"sched{lhs_view=[0, 8, 1]}", "", "x", "cpu-avx2-2t", "sched{lhs_view=[0, 8, 1]}, but the folded copies give this product the view []"},
      {"sched{wobble=1}", "", "x", "cpu-avx2-2t", "unknown schedule entry 'wobble'"},
      {"sched{fold=read, group=2}", "", "x", "cpu-avx2-2t", "sched{fold=read} is its only entry"},
      {"", "", "x", "cpu-avx2-8t", "@hand was scheduled for cpu-avx2-8t, but the compiled backend runs it for cpu-avx2-2t"},
  };
  // Entries without the module's target are refused, not replanned in silence.
  std::string unmarked = HandScheduled("sched{pair=[0, 0]}", "");
  unmarked.replace(unmarked.find(" {schedule=\"cpu-avx2-2t\"}"), 25, "");
  try {
    DescribeCompiledStages(*ir::ParseModule(unmarked, "<hand>"), t2, true);
    ADD_FAILURE() << "no error for:\n" << unmarked;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("<hand>:5: dot_general has sched{...} entries, but module @hand has no "
                                         "schedule=\"TARGET\" attribute"),
              std::string::npos)
        << e.what();
  }
  for (const auto& c : cases) {
    const std::string text = HandScheduled(c.a, c.c, c.b_reads, c.target);
    auto m = ir::ParseModule(text, "<hand>");
    try {
      DescribeCompiledStages(*m, t2, true);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what() << "\nexpected: " << c.error;
    }
  }
}

// Note [Buffers in the schedule]: a file's arena offsets run as written when no two buffers alive
// at once share a byte (a buffer moved to fresh bytes computes the same bits); an offset that
// overlaps a live buffer or is not a cache line's, a changed in-place write, a missing offset,
// and an entry on a step the plan places nothing for are refused, naming the node.
TEST(ScheduleTest, WrittenBuffersAreCheckedAndRun) {
  const std::string file = kDir + "/pairs_and_chains.axir";
  const passes::Target t2 = passes::Target::Parse("cpu-2t");
  const std::string scheduled = DescribeCompiledStages(*ir::ParseModule(ReadFile(file), file), t2, true).ir;
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = scheduled;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from << " not in\n" << scheduled;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  // %p, the chain's softmax rows, at 32768 beside %s at 0: moved past the arena's end, it meets
  // nothing and the arena grows to hold it.
  const std::string moved = edited("sched{at=32768}", "sched{at=262144}");
  const CompiledStages stages = DescribeCompiledStages(*ir::ParseModule(moved, "<moved>"), t2, true);
  EXPECT_NE(stages.buffers.find("arena +262144"), std::string::npos) << stages.buffers;
  EXPECT_NE(stages.buffers.find("arena 294912 bytes"), std::string::npos) << stages.buffers;
  auto as_written = ir::ParseModule(scheduled, "<scheduled>");
  auto moved_module = ir::ParseModule(moved, "<moved>");
  std::vector<ir::Literal> args;
  for (const ir::Node* p : as_written->entry()->Parameters())
    args.push_back(testutil::RandomLiteral(DType::kF32, p->result()->shape(), 90 + args.size()));
  const std::vector<BufferPtr> want = NewCompiledBackend(nullptr, t2)->Compile(*as_written)->Execute(testutil::Buffers(args));
  const std::vector<BufferPtr> got = NewCompiledBackend(nullptr, t2)->Compile(*moved_module)->Execute(testutil::Buffers(args));
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) EXPECT_TRUE(testutil::SameBits(*want[r], *got[r])) << "result " << r;

  const struct {
    std::string from, to, error;
  } cases[] = {
      {"sched{at=32768}", "sched{at=0}", "do not fit: %s (steps 13-15, bytes 0+32768) and %p (steps 13-15, bytes 0+32768) share memory"},
      {"sched{at=32768}", "sched{at=100}", "node #14 (fusion -> %p) at <edited>:17: sched{at=...}: result 0 at 100: an arena offset is a multiple of 64"},
      {"sched{at=32768}", "", "(fusion -> %p) at <edited>:17: no sched{at=[...]}"},
      {"sched{take=0}", "", "(fusion -> %c) at <edited>:15: no sched{take=...}, but the in-place rule of Note [Buffer assignment] gives take=[0]"},
      {"sched{take=0}", "sched{take=1}", "sched{take=[1]}, but the in-place rule"},
      {"{index=0} :", "{index=0} sched{at=0} :", "(parameter -> %x) at <edited>:3: sched{at=...} on a step whose results are an argument"},
  };
  for (const auto& c : cases) {
    const std::string text = edited(c.from, c.to);
    try {
      DescribeCompiledStages(*ir::ParseModule(text, "<edited>"), t2, true);
      ADD_FAILURE() << "no error for " << c.from << " -> " << c.to;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what() << "\nexpected: " << c.error;
    }
  }
}

// The planner's thresholds are the target's (passes::CpuScheduleParams), not file constants: a
// target that asks for larger products pairs none, and one that allows a group 2 pieces' worth of
// grain cuts its 40000 + 4096 elements into 3 pieces instead of 4.
TEST(ScheduleTest, TheTargetsThresholdsDecide) {
  const std::string file = kDir + "/pairs_and_chains.axir";
  auto m = ir::ParseModule(ReadFile(file), file);
  passes::Target target = passes::Target::Parse("cpu-2t");
  const std::string before = DescribeCompiledStages(*m, target, true).schedule;
  EXPECT_NE(before.find("2 products paired"), std::string::npos) << before;
  EXPECT_NE(before.find("group of 2 in 4 pieces"), std::string::npos) << before;
  target.cpu.pair_min_macs = int64_t{1} << 40;
  target.cpu.group_max_pieces = 2;
  const std::string schedule = DescribeCompiledStages(*m, target, true).schedule;
  EXPECT_NE(schedule.find("0 products paired"), std::string::npos) << schedule;
  EXPECT_NE(schedule.find("group of 2 in 3 pieces"), std::string::npos) << schedule;
}

TEST(TargetTest, ParsesItsTextForms) {
  const passes::Target t16 = passes::Target::Parse("cpu-16t");
  EXPECT_EQ(t16.threads, 16);
  EXPECT_EQ(t16.isa, passes::VectorIsa::kAvx2);
  EXPECT_EQ(t16.ToString(), "cpu-avx2-16t");
  EXPECT_EQ(passes::Target::Parse(t16.ToString()), t16);
  const passes::Target bf = passes::Target::Parse("cpu-avx512bf16-64t");
  EXPECT_TRUE(bf.avx512_bf16);
  EXPECT_EQ(bf.vector_bytes(), 64);
  EXPECT_EQ(passes::Target::Parse(bf.ToString()), bf);
  EXPECT_EQ(passes::Target::Parse("host"), passes::Target::Host());
  EXPECT_GE(passes::Target::Host().threads, 1);
  for (const char* bad : {"gpu-2t", "cpu-0t", "cpu-2", "cpu-sse9-2t", "cpu-99999t", "cpu-t", ""}) {
    try {
      passes::Target::Parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cpu-<N>t"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace axle::runtime
