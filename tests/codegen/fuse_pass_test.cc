// The fuse pass (Note [Fusion in the IR], src/codegen/fuse_pass.cc): the fused module computes
// what the module computed (the interpreter runs a fusion by evaluating its function), its text
// reads back into the kernels fusion made, and a fused function the emitter cannot write is an
// error that names it. The decisions themselves are .axir tests in tests/passes/fuse_*.axir.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "codegen/fusion.h"
#include "codegen/passes.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "testing/op_samples.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using testing::RandomModule;
using testing::RandomModuleOptions;

std::unique_ptr<ir::Module> Fused(const ir::Module& m) {
  codegen::RegisterPasses();
  std::unique_ptr<ir::Module> f = m.Clone();
  passes::RunPasses(*f, {"fuse"});  // verifies the result
  return f;
}

// Random programs of every op: each function of the fused module returns bitwise what it returned
// before (any NaN matching any NaN), and the printed fused module parses back into the kernels
// FuseFunction made, kernel for kernel (after dce, as in the pipeline: fuse drops dead fused
// kernels, and FuseFunction lists them).
TEST(FusePassTest, RandomProgramsKeepTheirValuesAndReadBack) {
  testing::RegisterTestCustomCalls();
  int fusions = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    RandomModuleOptions options;
    options.num_nodes = 16;
    options.dtypes = seed % 2 ? std::vector<DType>{DType::kF32} : testing::AllDTypes();
    // Dead code is fused too (the dead kernels dropped): compared on the values.
    std::unique_ptr<ir::Module> raw = RandomModule(seed, options);
    std::unique_ptr<ir::Module> raw_fused = Fused(*raw);
    for (const auto& g : raw->functions()) {
      const std::vector<ir::Literal> args = testing::RandomArguments(*g, seed);
      const std::vector<ir::Literal> want = ir::Evaluate(*g, args);
      const std::vector<ir::Literal> got = ir::Evaluate(*raw_fused->FindFunction(g->name()), args);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(ir::samples::CompareLiterals(got[i], want[i], 0).empty()) << "seed " << seed << " (no dce)";
    }
    std::unique_ptr<ir::Module> m = raw->Clone();
    passes::RunPasses(*m, {"dce"});
    std::unique_ptr<ir::Module> f = Fused(*m);
    std::unique_ptr<ir::Module> parsed = ir::ParseModule(ir::PrintModule(*f), "<fused>");
    ir::Verify(*parsed);
    for (const auto& g : m->functions()) {
      const ir::Function* h = f->FindFunction(g->name());
      ASSERT_NE(h, nullptr) << g->name();
      const std::vector<ir::Literal> args = testing::RandomArguments(*g, seed);
      const std::vector<ir::Literal> want = ir::Evaluate(*g, args), got = ir::Evaluate(*h, args);
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const std::string diff = ir::samples::CompareLiterals(got[i], want[i], 0);
        EXPECT_TRUE(diff.empty()) << "seed " << seed << " @" << g->name() << " result " << i << ": " << diff << "\n"
                                  << ir::PrintModule(*f);
      }
      const std::vector<codegen::Kernel> read = codegen::KernelsOf(*parsed->FindFunction(g->name()));
      EXPECT_EQ(codegen::DescribeKernels(read), codegen::DescribeKernels(codegen::FuseFunction(*g)))
          << "seed " << seed << "\n" << ir::PrintModule(*f);
      for (const auto& n : h->nodes()) fusions += n->op() == ir::OpKind::kFusion;
    }
  }
  EXPECT_GT(fusions, 300);  // the programs do fuse
}

// exp(x) * x over f32[n]: one loop kernel.
std::unique_ptr<ir::Module> ExpTimesX(int n) {
  return ir::ParseModule(fmt::format(R"(module @m {{
  func @main {{
    %x = parameter() {{index=0}} : f32[{0}]
    %a = exp(%x) : f32[{0}]
    %b = mul(%a, %x) : f32[{0}]
    return %b
  }}
}})",
                                     n));
}

TEST(FusePassTest, RunsOnceAndTheSecondRunChangesNothing) {
  std::unique_ptr<ir::Module> m = ExpTimesX(8);
  std::unique_ptr<ir::Module> f = Fused(*m);
  const std::string once = ir::PrintModule(*f);
  EXPECT_EQ(f->functions().size(), 2u) << once;
  EXPECT_FALSE(passes::CreatePass("fuse")->Run(*f));
  EXPECT_EQ(ir::PrintModule(*f), once);
}

// A module moved into another object (the partition pass assigns its result so) keeps its
// functions' module pointers right: a fusion still finds what it calls.
TEST(FusePassTest, AMovedModuleStillEvaluatesItsFusions) {
  std::unique_ptr<ir::Module> m = ExpTimesX(4);
  std::unique_ptr<ir::Module> f = Fused(*m);
  ir::Module moved("other");
  moved = std::move(*f);
  f.reset();
  ASSERT_EQ(moved.entry()->module(), &moved);
  const std::vector<ir::Literal> args = {ir::Literal::FromVector<float>(DType::kF32, {4}, {0, 1, -2, 0.5})};
  EXPECT_EQ(ir::Evaluate(*moved.entry(), args), ir::Evaluate(*m->entry(), args));
  ir::Module constructed(std::move(moved));
  EXPECT_EQ(constructed.entry()->module(), &constructed);
}

// The fused module `text`'s kernels, or the error KernelsOf raises.
std::string ReadBack(const std::string& text) {
  try {
    std::unique_ptr<ir::Module> m = ir::ParseModule(text, "bad.axir");
    ir::Verify(*m);
    return codegen::DescribeKernels(codegen::KernelsOf(*m->entry()));
  } catch (const Error& e) {
    return e.what();
  }
}

std::string Module(const std::string& kind, const std::string& result_type, const std::string& body) {
  return "module @m {\n  func @main {\n    %x = parameter() {index=0} : f32[4,8]\n    %y = fusion(%x) {kind=\"" +
         kind + "\", calls=\"k\"} : " + result_type + "\n    return %y\n  }\n  func @k {\n" +
         "    %p = parameter() {index=0} : f32[4,8]\n" + body + "  }\n}\n";
}

TEST(FusePassTest, AFusionTheEmitterCannotWriteIsAnErrorNamingIt) {
  // Fine as written.
  EXPECT_EQ(ReadBack(Module("loop", "f32[4,8]", "    %e = exp(%p) : f32[4,8]\n    return %e\n")),
            "1 kernels: fused{exp}[32]");
  EXPECT_EQ(ReadBack(Module("rows", "f32[4,8]",
                            "    %m = reduce(%p) {kind=max, dims=[1]} : f32[4]\n"
                            "    %b = broadcast_in_dim(%m) {dims=[0]} : f32[4,8]\n"
                            "    %d = sub(%p, %b) : f32[4,8]\n    return %d\n")),
            "1 kernels: rows{reduce,broadcast_in_dim,sub}[4]");
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {Module("loop", "f32[4,4]",
              "    %t = transpose(%p) {perm=[1,0]} : f32[8,4]\n"
              "    %d = dot_general(%p, %t) {lhs_contracting=[1], rhs_contracting=[0]} : f32[4,4]\n    return %d\n"),
       "%d dot_general (f32[4,4]) cannot be evaluated by a fused loop"},
      {Module("loop", "f32[4]", "    %r = reduce(%p) {kind=sum, dims=[1]} : f32[4]\n    return %r\n"),
       "a loop kernel holds %r reduce"},
      {Module("reduce", "f32[4,8]", "    %e = exp(%p) : f32[4,8]\n    return %e\n"),
       "a reduce kernel ends with its one reduce"},
      {Module("reduce", "f32[8]", "    %r = reduce(%p) {kind=prod, dims=[0]} : f32[8]\n    return %r\n"),
       "is not a row or column sum, max or min"},
      {Module("rows", "f32[8]", "    %r = reduce(%p) {kind=sum, dims=[0]} : f32[8]\n    return %r\n"),
       "is not a row reduction"},
      {Module("loop", "f32[4,8]", "    return %p\n"), "returns a parameter"},
      {Module("loop", "f32[4,8]", "    %c = constant() {value=2} : f32[]\n    %b = broadcast_in_dim(%c) {dims=[]} : f32[4,8]\n"
                                  "    %m = mul(%p, %b) : f32[4,8]\n    return %m\n"),
       "is a constant; a fused function reads constants through its parameters"},
  };
  for (const Case& c : cases) {
    const std::string got = ReadBack(c.text);
    EXPECT_NE(got.find(c.error), std::string::npos) << got << "\n" << c.text;
    EXPECT_NE(got.find("fusion {kind="), std::string::npos) << got;
  }
}

// The verifier checks the call: the function exists and takes and returns the node's types.
TEST(FusePassTest, TheVerifierChecksTheCall) {
  const std::string wrong_type = Module("loop", "f32[4,4]", "    %e = exp(%p) : f32[4,8]\n    return %e\n");
  std::string missing = Module("loop", "f32[4,8]", "    %e = exp(%p) : f32[4,8]\n    return %e\n");
  missing.replace(missing.find("calls=\"k\""), 9, "calls=\"nope\"");
  EXPECT_NE(ReadBack(wrong_type).find("@k returns (f32[4,8]) but the fusion declares (f32[4,4])"), std::string::npos)
      << ReadBack(wrong_type);
  EXPECT_NE(ReadBack(missing).find("calls @nope, which the module does not define"), std::string::npos)
      << ReadBack(missing);
}

}  // namespace
}  // namespace axle
