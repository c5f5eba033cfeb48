// End-to-end tests of the `axle` binary: exit codes, messages, and `axle run` against NumPy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ir/npy.h"
#include "run_axle.h"

namespace axle {
namespace {

namespace fs = std::filesystem;

using testing::RunAxle;
using testing::RunResult;

std::string Src(const std::string& rel) { return std::string(AXLE_SOURCE_DIR) + "/" + rel; }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("axle_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string MlpInputs() {
    std::string s;
    for (const char* n : {"x", "w1", "b1", "w2", "b2"})
      s += std::string(" --input ") + n + "=" + Src("examples/mlp/") + n + ".npy";
    return s;
  }
  fs::path dir_;
};

TEST_F(CliTest, RunMlpMatchesNumPy) {
  RunResult r = RunAxle("run " + Src("examples/mlp.axir") + MlpInputs() + " --output-dir " + dir_.string());
  ASSERT_EQ(r.status, 0) << r.output;
  ir::Literal got = ir::ReadNpy((dir_ / "output_0.npy").string());
  ir::Literal want = ir::ReadNpy(Src("examples/mlp/expected.npy"));
  ASSERT_EQ(got.type(), want.type());
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    double g = got.GetDouble(i), w = want.GetDouble(i);
    EXPECT_LE(std::abs(g - w), 1e-6 * std::max(1.0, std::abs(w))) << "element " << i;
  }
}

// axle compile shows each stage of the compiled backend (the docs/compiler.md walk-through).
TEST_F(CliTest, CompileShowsIrKernelsAndCpp) {
  const std::string file = Src("docs/examples/layer_norm_backward.axir");
  RunResult all = RunAxle("compile " + file);
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_NE(all.output.find("// ---- IR after the pipeline\nmodule @layer_norm_backward"), std::string::npos);
  EXPECT_NE(all.output.find("// ---- pipeline for cpu-"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("fast-math: split-reductions, scatter-accumulate, dce"), std::string::npos);
  EXPECT_NE(all.output.find("// ---- schedule (the executor's steps"), std::string::npos);
  EXPECT_NE(all.output.find("schedule @layer_norm_backward for cpu-"), std::string::npos);
  EXPECT_NE(all.output.find("// ---- buffers (each value's storage"), std::string::npos);
  EXPECT_NE(all.output.find("buffers @layer_norm_backward for cpu-"), std::string::npos);
  EXPECT_NE(all.output.find("12 kernels: reduce[4], fused{broadcast_in_dim,div}[4]"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("extern \"C\" void k11("), std::string::npos);
  RunResult kernels = RunAxle("compile --emit=kernels " + file);
  ASSERT_EQ(kernels.status, 0) << kernels.output;
  EXPECT_EQ(kernels.output.rfind("12 kernels:", 0), 0u) << kernels.output;
  RunResult bad = RunAxle("compile --emit=asm " + file);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("--emit: asm not in {all,pipeline,ir,kernels,cpp,schedule,buffers,target}"), std::string::npos)
      << bad.output;
  // Another machine's schedule, and the pipeline without fast math.
  RunResult sixteen = RunAxle("compile --emit=schedule --target=cpu-avx512-16t " + file);
  ASSERT_EQ(sixteen.status, 0) << sixteen.output;
  EXPECT_EQ(sixteen.output.rfind("schedule @layer_norm_backward for cpu-avx512-16t: ", 0), 0u) << sixteen.output;
  RunResult exact = RunAxle("compile --emit=pipeline --exact-math " + file);
  ASSERT_EQ(exact.status, 0) << exact.output;
  EXPECT_EQ(exact.output,
            "simplify x8: simplify, dot-transpose-fold, fold, cse, dce\nwiden-half-products: widen-half-products\n"
            "fuse: fuse, dce\nschedule: schedule\n");
  RunResult bad_target = RunAxle("compile --target=gpu-4t " + file);
  EXPECT_EQ(bad_target.status, 1);
  EXPECT_NE(bad_target.output.find("target 'gpu-4t': only cpu targets exist"), std::string::npos) << bad_target.output;
}

// axle opt --pipeline runs what the compiled backend runs; --print-pipeline lists it.
TEST_F(CliTest, OptRunsTheCompilersPipeline) {
  const std::string file = Src("docs/examples/layer_norm_backward.axir");
  RunResult stages = RunAxle("opt --print-pipeline " + file);
  ASSERT_EQ(stages.status, 0) << stages.output;
  EXPECT_EQ(stages.output,
            "simplify x8: simplify, dot-transpose-fold, fold, cse, dce\n"
            "widen-half-products: widen-half-products\n"
            "fast-math: split-reductions, scatter-accumulate, dce\n"
            "fuse: fuse, dce\n"
            "schedule: schedule\n");
  RunResult piped = RunAxle("opt --pipeline " + file);
  RunResult compiled = RunAxle("compile --emit=ir " + file);
  ASSERT_EQ(piped.status, 0) << piped.output;
  EXPECT_EQ(piped.output, compiled.output);
  RunResult both = RunAxle("opt --pipeline --passes=dce " + file);
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.output.find("--passes and --pipeline exclude each other"), std::string::npos) << both.output;
  // Note [Reading a schedule]: the schedule written by `axle opt` is the one `axle compile` runs,
  // and a file scheduled for one target is refused for another.
  const std::string scheduled = (dir_ / "scheduled.axir").string();
  const std::string pc = Src("tests/runtime/schedules/pairs_and_chains.axir");
  ASSERT_EQ(RunAxle("opt --passes=fuse,schedule --target=cpu-2t " + pc + " -o " + scheduled).status, 0);
  RunResult planned = RunAxle("compile --emit=schedule --target=cpu-2t " + pc);
  RunResult read = RunAxle("compile --emit=schedule --target=cpu-2t " + scheduled);
  ASSERT_EQ(read.status, 0) << read.output;
  EXPECT_EQ(read.output, planned.output);
  EXPECT_NE(read.output.find("pair with"), std::string::npos) << read.output;
  EXPECT_EQ(RunAxle("compile --emit=pipeline --target=cpu-2t " + scheduled).output,
            "none: @m is scheduled for cpu-avx2-2t already and compiles as written\n");
  RunResult other = RunAxle("compile --emit=schedule --target=cpu-8t " + scheduled);
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.output.find("was scheduled for cpu-avx2-2t, but the compiled backend runs it for cpu-avx2-8t"),
            std::string::npos)
      << other.output;
}

TEST_F(CliTest, RunErrorsExitOne) {
  std::string mlp = Src("examples/mlp.axir");
  RunResult missing = RunAxle("run " + mlp);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("missing --input for parameter 0 (%x: f32[4,8])"), std::string::npos)
      << missing.output;
  RunResult unknown = RunAxle("run " + mlp + MlpInputs() + " --input nope=x.npy");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("has no parameter named 'nope'"), std::string::npos) << unknown.output;
  // An input of the wrong type: w1 given for x.
  std::string bad = "run " + mlp + " --input x=" + Src("examples/mlp/w1.npy");
  for (const char* n : {"w1", "b1", "w2", "b2"})
    bad += std::string(" --input ") + n + "=" + Src("examples/mlp/") + n + ".npy";
  RunResult wrong = RunAxle(bad + " --output-dir " + dir_.string());
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.output.find("holds f32[8,16], but parameter %x expects f32[4,8]"), std::string::npos)
      << wrong.output;
  RunResult nofile = RunAxle("run " + (dir_ / "absent.axir").string());
  EXPECT_EQ(nofile.status, 1);
  EXPECT_NE(nofile.output.find("cannot open"), std::string::npos) << nofile.output;
}

TEST_F(CliTest, BadFlagsExitOne) {
  EXPECT_EQ(RunAxle("").status, 1);
  EXPECT_EQ(RunAxle("frobnicate").status, 1);
  EXPECT_EQ(RunAxle("opt --no-such-flag x.axir").status, 1);
  RunResult pass = RunAxle("opt --passes=nonsense " + Src("examples/mlp.axir"));
  EXPECT_EQ(pass.status, 1);
  EXPECT_NE(pass.output.find("unknown pass 'nonsense'"), std::string::npos) << pass.output;
  EXPECT_EQ(RunAxle("--help").status, 0);
  // Numeric ranges read as sentences (CLI11's own printed the largest double, 309 digits).
  const struct {
    const char* args;
    const char* says;
  } ranges[] = {
      {"train --lr 0", "--lr: 0 is not a positive number (it must be greater than 0)"},
      {"train --warmup -1", "--warmup: -1 is negative (it must be 0 or more)"},
      {"train --dropout 1.5", "--dropout: 1.5 is outside [0, 0.99]"},
      {"train --steps many", "--steps: many is not a number"},
      {"launch --nproc 0 -- true", "--nproc: 0 is outside [1, 4096]"},
  };
  for (const auto& r : ranges) {
    RunResult out = RunAxle(r.args);
    EXPECT_EQ(out.status, 1) << r.args;
    EXPECT_NE(out.output.find(r.says), std::string::npos) << r.args << ": " << out.output;
    EXPECT_LT(out.output.size(), 200u) << r.args << ": " << out.output;
  }
}

TEST_F(CliTest, MalformedModuleNamesLineAndColumn) {
  std::string path = Write("bad.axir", "module @m {\n  func @main {\n    %x = frob() : f32[]\n    return %x\n  }\n}\n");
  RunResult r = RunAxle("opt " + path);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find(path + ":3:10: error:"), std::string::npos) << r.output;
  std::string bad_types = Write("types.axir",
      "module @m {\n  func @main {\n    %x = parameter() {index=0} : f32[4]\n"
      "    %y = add(%x, %x) : f32[5]\n    return %y\n  }\n}\n");
  RunResult v = RunAxle("opt " + bad_types);
  EXPECT_EQ(v.status, 1);
  EXPECT_NE(v.output.find(bad_types + ":4:5: error: add: result types (f32[5]) differ"), std::string::npos)
      << v.output;
}

TEST_F(CliTest, OptPrintsAndHashIgnoresNames) {
  RunResult a = RunAxle("opt " + Src("examples/mlp.axir"));
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("%h = dot_general(%x, %w1)"), std::string::npos) << a.output;
  RunResult c = RunAxle("opt --passes=verify,canonicalize " + Src("examples/mlp.axir"));
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_EQ(c.output.find("%w1"), std::string::npos) << c.output;
  std::string canonical = Write("canonical.axir", c.output);
  RunResult h1 = RunAxle("hash " + Src("examples/mlp.axir"));
  RunResult h2 = RunAxle("hash " + canonical);
  ASSERT_EQ(h1.status, 0) << h1.output;
  EXPECT_EQ(h1.output, h2.output);
  EXPECT_EQ(h1.output.size(), 33u) << h1.output;  // 32 hex digits and a newline
  RunResult list = RunAxle("opt --list-passes");
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.output.find("canonicalize"), std::string::npos);
  EXPECT_EQ(RunAxle("flags").status, 0);
}

}  // namespace
}  // namespace axle
