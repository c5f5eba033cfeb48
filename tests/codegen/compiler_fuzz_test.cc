// Differential fuzzing of the optimizing compiler (docs/compiler.md, "Differential fuzzing"):
// random programs (testing::RandomModule) run on the "compiled" backend and on the reference
// interpreter, in exact math (bitwise equal) and in fast math (within a few ulp).
//
// The compiled backend runs the host C++ compiler once per module (~0.25 s), so programs are
// checked in batches (testing::BatchModules): one module whose entry function holds ~50 programs
// side by side, one compile per batch and math mode. A mismatch is reported per program (its seed
// and text), re-run alone to tell a compiler bug from a batching effect.
//
//   AXLE_FUZZ_PROGRAMS=N   programs to check (default 1000)
//   AXLE_FUZZ_SEED=S       first program index (default 0): program i has seed kSeedBase + S + i
//   AXLE_FUZZ_BATCH=B      programs per batch (default 50)
// scripts/fuzz_compiler.sh [N] runs a longer opt-in campaign.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../runtime/runtime_test_util.h"
#include "backends/cpu/compiled_backend.h"
#include "backends/cpu/jit.h"
#include "backends/registry.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "random_ops.h"
#include "testing/module_batch.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using ir::Literal;
using ir::OpKind;
using runtime::BufferPtr;
using runtime::testutil::Buffers;

constexpr uint64_t kSeedBase = 5'000'000;  // apart from codegen_test.cc's seeds

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

struct FastMathScope {
  bool saved = flags::fast_math();
  explicit FastMathScope(bool on) { flags::set_fast_math(on); }
  ~FastMathScope() { flags::set_fast_math(saved); }
};

// One compiled backend without a disk cache: every batch really runs the compiler.
runtime::Backend& Compiled() {
  static std::unique_ptr<runtime::Backend> b = runtime::NewCompiledBackend(nullptr);
  return *b;
}

const std::vector<OpKind>& ElementwiseOps() { return testing::ElementwiseHeavyOps(); }

// Program i's configuration: 0 = the generator's defaults (every op and dtype, zero-sized dims);
// 1 = f32/f64 elementwise-heavy (what fusion groups); 2 = the same with larger shapes (up to
// 64^3 elements: kernels over >= 32K elements are split over the thread pool).
int ConfigOf(uint64_t index) { return index % 20 == 19 ? 2 : static_cast<int>(index % 2); }

testing::RandomModuleOptions Options(int config) {
  testing::RandomModuleOptions opts;
  if (config == 0) return opts;
  opts.dtypes = {DType::kF32, DType::kF64};
  opts.num_nodes = 12;
  opts.max_functions = 1;
  opts.ops = ElementwiseOps();
  if (config == 2) {
    opts.max_dim = 64;
    opts.num_nodes = 10;
  }
  return opts;
}

// Whether fast math approximates `n`: an f32 exp/log/log1p/tanh/logistic/erf/sin/cos, an f32
// sum (a row sum accumulates in 8 double lanes, a column sum in blocks of rows, a large full sum
// in two levels: reassociated),
// or an f32 scatter_add (scatter-accumulate may fold an add into it: reassociated).
bool Approximated(const ir::Node& n) {
  switch (n.op()) {
    case OpKind::kScatterAdd:
      return n.result(0)->dtype() == DType::kF32;
    case OpKind::kReduce:
      return n.attrs_as<ir::ReduceAttrs>().kind == ir::ReduceKind::kSum && n.result(0)->dtype() == DType::kF32;
    case OpKind::kExp: case OpKind::kLog: case OpKind::kLog1p: case OpKind::kTanh:
    case OpKind::kLogistic: case OpKind::kErf:
    case OpKind::kSin: case OpKind::kCos:  // ax_fsin / ax_fcos (Note [Checked sin and cos], emit_cpp.cc)
      return n.result(0)->dtype() == DType::kF32;
    default:
      return false;
  }
}

// Whether fast math may change a result of `m`.
bool UsesApproximations(const ir::Module& m) {
  for (const auto& n : m.entry()->nodes())
    if (Approximated(*n)) return true;
  return false;
}

// `m`'s entry function (as the entry of a new module) with the result y of every approximated
// node replaced by y * factor: what a relative error of factor - 1 in each approximation does.
std::unique_ptr<ir::Module> Perturbed(const ir::Module& m, double factor) {
  auto out = std::make_unique<ir::Module>(m.name());
  ir::Function* g = out->AddFunction("main");
  ir::Builder b(g);
  std::unordered_map<const ir::Value*, ir::Value*> map;
  const ir::Function& f = *m.entry();
  for (const auto& n : f.nodes()) {
    std::vector<ir::Value*> operands;
    for (ir::Value* v : n->operands()) operands.push_back(map.at(v));
    std::vector<ir::TensorType> types;
    for (ir::Value* r : n->results()) types.push_back(r->type());
    ir::Node* c = g->AddNode(n->op(), std::move(operands), n->attrs(), types);
    for (size_t i = 0; i < n->num_results(); ++i) map[n->result(i)] = c->result(i);
    if (Approximated(*n)) {
      ir::Value* y = c->result(0);
      map[n->result(0)] = b.Mul(y, b.BroadcastInDim(b.Scalar(DType::kF32, factor), y->shape(), {}));
    }
  }
  std::vector<ir::Value*> results;
  for (ir::Value* r : f.results()) results.push_back(map.at(r));
  g->set_results(std::move(results));
  return out;
}

bool HasDot(const ir::Module& m) {
  for (const auto& n : m.entry()->nodes())
    if (n->op() == OpKind::kDotGeneral) return true;
  return false;
}

double MaxFiniteAbs(const Literal& l) {
  double s = 0;
  if (!IsFloat(l.dtype())) return s;
  for (int64_t k = 0; k < l.NumElements(); ++k) {
    const double v = std::fabs(l.GetDouble(k));
    if (std::isfinite(v)) s = std::max(s, v);
  }
  return s;
}

struct Program {
  uint64_t index = 0;
  uint64_t seed = 0;
  int config = 0;
  std::unique_ptr<ir::Module> module;
  std::vector<Literal> args;
  std::vector<BufferPtr> want;  // the interpreter's results
  // The interpreter's results of Perturbed(module, 1 +- kPerturbation), computed on demand.
  mutable std::vector<std::vector<BufferPtr>> perturbed;
  mutable bool perturbed_done = false;
};

// 2^-19: 8 to 16 ulp of f32, above the documented error of every fast-math approximation
// (docs/compiler.md; at most 8 ulp for erf).
constexpr double kPerturbation = 1.0 / (1 << 19);

bool CloseEnough(double a, double b, double rel, double scale) {
  if (std::isnan(a) && std::isnan(b)) return true;
  if (a == b) return true;
  return std::isfinite(a) && std::isfinite(b) &&
         std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), scale});
}

// Whether element `e` of result `i` is ill-conditioned with respect to the approximations: the
// interpreter's own result moves beyond the tolerance when every approximated value is off by
// kPerturbation (cos of a huge multiple of erf(x), a compare or floor next to a boundary, ...).
bool IllConditioned(const Program& p, size_t i, int64_t e, double scale) {
  if (!p.perturbed_done) {
    p.perturbed_done = true;
    for (const double factor : {1 + kPerturbation, 1 - kPerturbation}) {
      try {
        p.perturbed.push_back(
            runtime::GetBackend("interpreter").Compile(*Perturbed(*p.module, factor))->Execute(Buffers(p.args)));
      } catch (const Error&) {
      }
    }
  }
  const double want = p.want[i]->GetDouble(e);
  for (const auto& r : p.perturbed)
    if (!CloseEnough(want, r[i]->GetDouble(e), 1e-5, scale)) return true;
  return false;
}

std::string Describe(const Program& p) {
  return "program " + std::to_string(p.index) + " (seed " + std::to_string(p.seed) + ", config " +
         std::to_string(p.config) + ")";
}

// Empty when `got` matches `want` under the rule of the math mode, else why not.
//  exact: bitwise (NaN payloads aside; runtime::testutil::SameBits), except that a program with
//         a dot_general may differ by BLAS's reassociation: within 1e-5 of the result's largest
//         magnitude, as CompiledBackendTest.MlpTrainingStepMatchesTheInterpreter allows.
//  fast:  bitwise unless the program has an f32 approximated function; then each element within
//         1e-5 of max(1, the result's largest finite magnitude), NaN and inf at the same
//         positions, except ill-conditioned elements (IllConditioned), which are counted.
// *inexact (optional) is set when some result matched only within the tolerance.
std::string Compare(const Program& p, bool fast, const std::vector<BufferPtr>& got,
                    bool* inexact = nullptr, int64_t* ill_conditioned = nullptr) {
  if (got.size() != p.want.size())
    return std::to_string(got.size()) + " results, want " + std::to_string(p.want.size());
  const bool dot = HasDot(*p.module);
  const bool approx = fast && UsesApproximations(*p.module);
  for (size_t i = 0; i < got.size(); ++i) {
    const Literal& w = *p.want[i];
    const Literal& g = *got[i];
    if (runtime::testutil::SameBits(w, g)) continue;
    std::string where = "not bitwise equal";
    if (approx && w.type() == g.type()) {
      // Within the tolerance, or an element that the approximations' error may move this far.
      const double scale = std::max(1.0, MaxFiniteAbs(w));
      int64_t bad = -1, ill = 0;
      for (int64_t e = 0; e < w.NumElements() && bad < 0; ++e) {
        if (CloseEnough(w.GetDouble(e), g.GetDouble(e), 1e-5, scale)) continue;
        if (IllConditioned(p, i, e, scale)) {
          ++ill;
          continue;
        }
        bad = e;
      }
      if (bad < 0) {
        if (inexact) *inexact = true;
        if (ill_conditioned) *ill_conditioned += ill;
        continue;
      }
      where = "element " + std::to_string(bad) + ": want " + std::to_string(w.GetDouble(bad)) +
              " got " + std::to_string(g.GetDouble(bad)) + " (beyond 1e-5 x " + std::to_string(scale) +
              "; the interpreter with every approximated value off by 2^-19 stays within it)";
    } else if (w.type() == g.type() && IsFloat(w.dtype()) && dot) {
      if (runtime::testutil::Near(w, g, 1e-5, MaxFiniteAbs(w), &where)) {
        if (inexact) *inexact = true;
        continue;
      }
    }
    return "result " + std::to_string(i) + " " + w.type().ToString() + ": " + where +
           "\nwant " + w.ToString(64) + "\ngot  " + g.ToString(64);
  }
  return "";
}

struct Totals {
  int programs = 0, batches = 0, skipped_collective = 0, interpreter_errors = 0;
  int failures = 0;
  int inexact[2] = {0, 0};      // programs equal only within tolerance: exact math, fast math
  int64_t result_elements = 0;  // elements compared per math mode
  int threaded = 0;             // programs with a value of >= 32K elements (threaded kernels)
  int64_t ill_conditioned = 0;  // fast-math elements excused as ill-conditioned
  int64_t compiles = 0;
  double interpreter_s = 0, compiled_s = 0;
};

constexpr int kMaxReported = 10;

void ReportFailure(Totals& t, const Program& p, const std::string& mode, const std::string& why) {
  ++t.failures;
  if (t.failures > kMaxReported) return;
  // Re-run the program alone: a mismatch there too is a compiler bug in this one program.
  std::string alone;
  try {
    FastMathScope scope(mode == "fast");
    std::vector<BufferPtr> got = Compiled().Compile(*p.module)->Execute(Buffers(p.args));
    const std::string w = Compare(p, mode == "fast", got);
    alone = w.empty() ? "alone it matches (the mismatch needs the batch)" : "alone: " + w;
  } catch (const Error& e) {
    alone = std::string("alone the compiled backend throws: ") + e.what();
  }
  ADD_FAILURE() << Describe(p) << ", " << mode << " math, in a batch: " << why << "\n"
                << alone << "\n" << ir::PrintModule(*p.module);
}

// Runs one batch of programs in both math modes.
void RunBatch(Totals& t, std::vector<Program>& programs) {
  if (programs.empty()) return;
  std::vector<const ir::Module*> mods;
  std::vector<std::vector<Literal>> args;
  for (const Program& p : programs) {
    mods.push_back(p.module.get());
    args.push_back(p.args);
  }
  testing::ModuleBatch batch = testing::BatchModules(mods);
  ir::Verify(*batch.module);
  const std::vector<Literal> batch_args = batch.ConcatArguments(args);
  ++t.batches;
  for (const bool fast : {false, true}) {
    const std::string mode = fast ? "fast" : "exact";
    FastMathScope scope(fast);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<BufferPtr> out;
    std::string error;
    try {
      out = Compiled().Compile(*batch.module)->Execute(Buffers(batch_args));
    } catch (const Error& e) {
      error = e.what();
    }
    t.compiled_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!error.empty()) {
      // Find the program(s) that fail alone.
      for (const Program& p : programs) {
        try {
          const std::string w = Compare(p, fast, Compiled().Compile(*p.module)->Execute(Buffers(p.args)));
          if (!w.empty()) ReportFailure(t, p, mode, w);
        } catch (const Error& e) {
          ReportFailure(t, p, mode, std::string("compiled backend throws: ") + e.what());
        }
      }
      ADD_FAILURE() << "batch of " << programs.size() << " programs from " << Describe(programs[0])
                    << " throws in " << mode << " math: " << error;
      continue;
    }
    std::vector<std::vector<BufferPtr>> per = batch.SplitResults(out);
    for (size_t k = 0; k < programs.size(); ++k) {
      bool inexact = false;
      const std::string why = Compare(programs[k], fast, per[k], &inexact, &t.ill_conditioned);
      if (!why.empty()) ReportFailure(t, programs[k], mode, why);
      t.inexact[fast] += inexact;
      if (!fast)
        for (const BufferPtr& r : per[k]) t.result_elements += r->NumElements();
    }
  }
}

// Generates programs [first, first + count) and checks them batch by batch.
Totals Fuzz(uint64_t first, uint64_t count, size_t batch_size) {
  testing::RegisterTestCustomCalls();
  Totals t;
  const auto jit0 = codegen::GetJitStats();
  std::vector<Program> pending;
  for (uint64_t index = first; index < first + count; ++index) {
    Program p;
    p.index = index;
    p.seed = kSeedBase + index;
    p.config = ConfigOf(index);
    p.module = testing::RandomModule(p.seed, Options(p.config));
    if (!testing::BatchableModule(*p.module)) {
      ++t.skipped_collective;
      continue;
    }
    p.args = testing::RandomArguments(*p.module->entry(), p.seed);
    const auto t0 = std::chrono::steady_clock::now();
    bool interp_failed = false;
    try {
      p.want = runtime::GetBackend("interpreter").Compile(*p.module)->Execute(Buffers(p.args));
    } catch (const Error&) {
      interp_failed = true;
    }
    t.interpreter_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++t.programs;
    if (interp_failed) {
      // The interpreter refuses the program: the compiled backend must refuse it too (alone).
      ++t.interpreter_errors;
      FastMathScope exact(false);
      EXPECT_THROW(Compiled().Compile(*p.module)->Execute(Buffers(p.args)), Error) << Describe(p);
      continue;
    }
    bool large = false;
    for (const auto& n : p.module->entry()->nodes())
      for (const ir::Value* v : n->results()) large |= v->shape().NumElements() >= (int64_t{1} << 15);
    t.threaded += large;
    pending.push_back(std::move(p));
    if (pending.size() >= batch_size) {
      RunBatch(t, pending);
      pending.clear();
    }
  }
  RunBatch(t, pending);
  t.compiles = codegen::GetJitStats().compiles - jit0.compiles;
  return t;
}

// ----- BatchModules ------------------------------------------------------------------------------

// A batch computes, per program, exactly what the program computes alone (on the interpreter).
TEST(ModuleBatchTest, BatchOnTheInterpreterEqualsProgramsAlone) {
  testing::RegisterTestCustomCalls();
  std::vector<std::unique_ptr<ir::Module>> owned;
  std::vector<const ir::Module*> mods;
  std::vector<std::vector<Literal>> args;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto m = testing::RandomModule(kSeedBase - 100 + seed, Options(static_cast<int>(seed % 2)));
    if (!testing::BatchableModule(*m)) continue;
    args.push_back(testing::RandomArguments(*m->entry(), kSeedBase - 100 + seed));
    mods.push_back(m.get());
    owned.push_back(std::move(m));
  }
  testing::ModuleBatch batch = testing::BatchModules(mods);
  ir::Verify(*batch.module);
  ASSERT_EQ(batch.parts.size(), mods.size());
  size_t params = 0, results = 0;
  for (size_t k = 0; k < mods.size(); ++k) {
    EXPECT_EQ(batch.parts[k].first_parameter, params);
    EXPECT_EQ(batch.parts[k].first_result, results);
    params += mods[k]->entry()->Parameters().size();
    results += mods[k]->entry()->results().size();
  }
  EXPECT_EQ(batch.module->entry()->Parameters().size(), params);
  EXPECT_EQ(batch.module->entry()->results().size(), results);
  std::vector<BufferPtr> out;
  try {
    out = runtime::GetBackend("interpreter").Compile(*batch.module)->Execute(Buffers(batch.ConcatArguments(args)));
  } catch (const Error& e) {
    GTEST_SKIP() << "a program of this batch is refused by the interpreter: " << e.what();
  }
  auto per = batch.SplitResults(out);
  for (size_t k = 0; k < mods.size(); ++k) {
    auto want = runtime::GetBackend("interpreter").Compile(*mods[k])->Execute(Buffers(args[k]));
    ASSERT_EQ(per[k].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(runtime::testutil::SameBits(*want[i], *per[k][i])) << "program " << k << " result " << i;
  }
}

TEST(ModuleBatchTest, RefusesCollectivesAndReplicas) {
  testing::RandomModuleOptions opts;
  opts.collectives = true;
  opts.num_replicas = 1;
  opts.max_functions = 1;
  opts.dtypes = {DType::kF32};
  opts.ops = {OpKind::kAllReduce, OpKind::kAdd};
  bool found = false;
  for (uint64_t seed = 0; seed < 50 && !found; ++seed) {
    auto m = testing::RandomModule(seed, opts);
    for (const auto& n : m->entry()->nodes()) found |= n->op() == OpKind::kAllReduce;
    if (!found) continue;
    EXPECT_FALSE(testing::BatchableModule(*m)) << ir::PrintModule(*m);
    EXPECT_THROW(testing::BatchModules({m.get()}), Error);
  }
  EXPECT_TRUE(found);
  ir::Module two("two_replicas");
  two.set_num_replicas(2);
  ir::Builder b(two.AddFunction("main"));
  b.Return({b.Parameter(0, ir::TensorType(DType::kF32, Shape{4}), "x")});
  EXPECT_FALSE(testing::BatchableModule(two));
}

// ----- the fuzz test -----------------------------------------------------------------------------

// At least 1,000 random programs (AXLE_FUZZ_PROGRAMS), compiled backend against the interpreter,
// in exact and in fast math.
TEST(CompilerFuzzTest, RandomProgramsMatchTheInterpreter) {
  const uint64_t count = EnvOr("AXLE_FUZZ_PROGRAMS", 1000);
  const uint64_t first = EnvOr("AXLE_FUZZ_SEED", 0);
  const size_t batch_size = std::max<uint64_t>(1, EnvOr("AXLE_FUZZ_BATCH", 50));
  const auto t0 = std::chrono::steady_clock::now();
  const Totals t = Fuzz(first, count, batch_size);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[fuzz] programs %llu..%llu: %d checked (%d refused by the interpreter, %d skipped "
              "for collectives), %d batches x 2 math modes, %lld compiles, %.1f s (interpreter "
              "%.1f s, compiled %.1f s), %lld result elements, %d programs with >= 32K-element "
              "values, equal only within tolerance: %d exact / %d fast math (%lld ill-conditioned elements), "
              "%d mismatches\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(first + count - 1),
              t.programs, t.interpreter_errors, t.skipped_collective, t.batches,
              static_cast<long long>(t.compiles), secs, t.interpreter_s, t.compiled_s,
              static_cast<long long>(t.result_elements), t.threaded, t.inexact[0], t.inexact[1],
              static_cast<long long>(t.ill_conditioned), t.failures);
  EXPECT_EQ(t.failures, 0) << "(only the first " << kMaxReported << " are reported)";
  EXPECT_GE(t.programs + t.skipped_collective, static_cast<int>(count));
}

}  // namespace
}  // namespace axle
