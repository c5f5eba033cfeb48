// Sharding propagation: the rule table covers every op, annotations are checked and never
// changed, every value of the entry function ends annotated, gradients inherit their parameter's
// layout, and conflicts are decided by cost and explained under AXLE_DEBUG. The per-op rules are
// exercised as text in tests/spmd/propagation/*.axir (spmd_text_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autodiff/vjp.h"
#include "core/error.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/passes.h"
#include "spmd/shard_util.h"
#include "spmd/propagation.h"
#include "spmd/sharding_rules.h"
#include "testing/models.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using ir::Sharding;

Sharding S(std::vector<std::vector<std::string>> dims, std::vector<std::string> partial = {}) {
  return Sharding{std::move(dims), std::move(partial)};
}

ir::Value* ValueNamed(const ir::Function& f, const std::string& name) {
  for (const auto& n : f.nodes())
    for (ir::Value* v : n->results())
      if (v->name() == name) return v;
  Fail("no value %{}", name);
}

void ExpectFullyAnnotated(const ir::Function& f) {
  for (const auto& n : f.nodes())
    for (const ir::Value* v : n->results())
      EXPECT_TRUE(v->sharding().has_value()) << ir::PrintNode(*n);
}

// The layout propagation chose must partition to the same results: runs `m` (already propagated)
// globally and partitioned on its mesh, with deterministic arguments (small multiples of 1/16),
// and compares every result within a relative 1e-5 (partitioned sums add in another order).
void ExpectPartitionsToTheGlobalResult(const ir::Module& m) {
  const ir::Function& f = *m.entry();
  const ir::Mesh& mesh = *m.mesh();
  std::vector<ir::Literal> args;
  int64_t k = 0;
  for (const ir::Node* p : f.Parameters()) {
    const ir::TensorType& t = p->result()->type();
    std::vector<double> v(static_cast<size_t>(t.NumElements()));
    for (double& x : v) x = static_cast<double>((k++ * 7) % 33 - 16) / 16.0;
    args.push_back(ir::Literal::FromDoubles(t.dtype, t.shape, v));
  }
  const std::vector<ir::Literal> want = ir::Evaluate(f, args);
  std::unique_ptr<ir::Module> part = spmd::Partition(m);
  std::vector<std::vector<ir::Literal>> per_device(static_cast<size_t>(mesh.size()));
  for (int64_t d = 0; d < mesh.size(); ++d)
    for (size_t i = 0; i < args.size(); ++i)
      per_device[d].push_back(spmd::ShardLiteral(args[i], spmd::ParameterSharding(m, static_cast<int64_t>(i)), mesh, d));
  const std::vector<std::vector<ir::Literal>> got = ir::EvaluateReplicated(*part->entry(), per_device);
  for (size_t r = 0; r < want.size(); ++r) {
    std::vector<ir::Literal> shards;
    for (int64_t d = 0; d < mesh.size(); ++d) shards.push_back(got[d][r]);
    const ir::Literal whole = spmd::AssembleLiteral(shards, spmd::ResultSharding(m, static_cast<int64_t>(r)), mesh,
                                                    f.results()[r]->type());
    ASSERT_EQ(whole.type(), want[r].type());
    for (int64_t i = 0; i < whole.NumElements(); ++i) {
      const double a = want[r].GetDouble(i), g = whole.GetDouble(i);
      if (std::isnan(a) && std::isnan(g)) continue;  // e.g. sqrt of a negative argument, on both sides
      if (a == g) continue;                           // infinities too
      ASSERT_LE(std::abs(a - g), 1e-5 * std::max(1.0, std::abs(a)))
          << "result " << r << " element " << i << "\n--- partitioned:\n" << ir::PrintModule(*part);
    }
  }
}

TEST(ShardingRulesTest, EveryOpHasARuleOrIsReplicatedWithAReason) {
  for (const ir::OpInfo& info : ir::AllOps()) {
    const spmd::ShardingRule* rule = spmd::GetShardingRule(info.kind);
    ASSERT_NE(rule, nullptr) << "op " << info.name << " has no sharding rule and no 'not shardable' entry";
    if (rule->replicated_reason.empty()) {
      EXPECT_NE(rule->forward, nullptr) << info.name;
      EXPECT_NE(rule->backward, nullptr) << info.name;
    } else {
      EXPECT_EQ(rule->forward, nullptr) << info.name;
      EXPECT_EQ(rule->backward, nullptr) << info.name;
    }
  }
}

TEST(ShardingRulesTest, NotShardableOpsEndReplicated) {
  auto m = ir::ParseModule(R"(
module @m {mesh_axes=[tp], mesh_shape=[2]} {
  func @main {
    %x = parameter() {index=0} : f32[8]{[tp]}
    %c = custom_call(%x) {target="axle.test.identity", config=""} : f32[8]
    %y = add(%c, %x) : f32[8]
    return %y
  }
}
)");
  spmd::PropagateShardings(*m);
  EXPECT_EQ(*ValueNamed(*m->entry(), "c")->sharding(), S({{}}));
  EXPECT_EQ(*ValueNamed(*m->entry(), "y")->sharding(), S({{"tp"}}));
}

TEST(PropagationTest, RejectsImpossibleAnnotationsNamingValueAndSpec) {
  struct Case {
    Sharding sharding;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {S({{"dp"}}), "has 1 dimension entries for a value of rank 2"},
           {S({{"dp"}, {"zz"}}), "axis 'zz' is not an axis of the module's mesh"},
           {S({{"dp"}, {"dp"}}), "mesh axis 'dp' is used twice"},
           {S({{"dp"}, {}}, {"dp"}), "mesh axis 'dp' is used twice"},
           {S({{""}, {}}), "empty axis name"},
       }) {
    ir::Module m("m");
    m.set_mesh(ir::Mesh({"dp", "tp"}, {2, 2}));
    ir::Builder b(m.AddFunction("main"));
    ir::Value* x = b.Parameter(0, {DType::kF32, {8, 16}}, "x");
    ir::Value* y = b.Unary(ir::OpKind::kExp, x);
    y->set_name("badval");
    b.Return({y});
    // The parser and verifier refuse these too; set directly, they test the pass's own check.
    y->set_sharding(c.sharding);
    try {
      spmd::PropagateShardings(m);
      ADD_FAILURE() << "no error for " << c.sharding.ToString();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
      EXPECT_NE(msg.find("%badval"), std::string::npos) << msg;
      EXPECT_NE(msg.find(y->sharding()->ToString()), std::string::npos) << msg;
    }
  }
}

TEST(PropagationTest, NeedsAMesh) {
  auto m = ir::ParseModule("module @nomesh { func @main { %x = parameter() {index=0} : f32[4]\n return %x } }");
  EXPECT_THROW(spmd::PropagateShardings(*m), Error);
}

TEST(PropagationTest, RefusesAPartitionedModule) {
  auto m = ir::ParseModule(R"(
module @m {num_replicas=2, mesh_axes=[dp], mesh_shape=[2]} {
  func @main {
    %x = parameter() {index=0} : f32[4]
    return %x
  }
}
)");
  try {
    spmd::PropagateShardings(*m);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already partitioned"), std::string::npos) << e.what();
  }
}

TEST(PropagationTest, UnevenAnnotationIsAllowed) {
  auto m = ir::ParseModule(R"(
module @m {mesh_axes=[tp], mesh_shape=[4]} {
  func @main {
    %x = parameter() {index=0} : f32[6,3]{[tp], []}
    %y = neg(%x) : f32[6,3]
    return %y
  }
}
)");
  spmd::PropagationReport r = spmd::PropagateShardings(*m);
  EXPECT_EQ(*ValueNamed(*m->entry(), "y")->sharding(), S({{"tp"}, {}}));
  ir::Verify(*m);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("%x"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("dim 0 (size 6) is not divisible by its 4 shards"), std::string::npos) << r.notes[0];
}

TEST(PropagationTest, ConflictIsDecidedByCostAndExplainedUnderDebug) {
  const char* text = R"(
module @m {mesh_axes=[tp], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[256,8]{[tp], []}
    %b = parameter() {index=1} : f32[8,2]{[], [tp]}
    %c = dot_general(%a, %b) {lhs_contracting=[1], rhs_contracting=[0]} : f32[256,2]
    return %c
  }
}
)";
  auto m = ir::ParseModule(text);
  flags::set_debug(true);
  ::testing::internal::CaptureStderr();
  spmd::PropagationReport r = spmd::PropagateShardings(*m);
  const std::string err = ::testing::internal::GetCapturedStderr();
  flags::ResetForTesting();
  EXPECT_EQ(*ValueNamed(*m->entry(), "c")->sharding(), S({{"tp"}, {}}));
  EXPECT_EQ(r.conflicts, 1);
  EXPECT_NE(err.find("conflict at %c"), std::string::npos) << err;
  EXPECT_NE(err.find("ignoring it reshards 8192 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("ignoring it reshards 64 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("<- chosen"), std::string::npos) << err;

  // Without the flag: the same decision, silently.
  auto m2 = ir::ParseModule(text);
  ::testing::internal::CaptureStderr();
  spmd::PropagateShardings(*m2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(ir::PrintModule(*m), ir::PrintModule(*m2));
}

TEST(PropagationTest, SecondRunChangesNothing) {
  auto m = ir::ParseModule(R"(
module @m {mesh_axes=[dp], mesh_shape=[2]} {
  func @main {
    %x = parameter() {index=0} : f32[8,16]{[dp], []}
    %y = exp(%x) : f32[8,16]
    %s = reduce(%y) {kind=sum, dims=[0]} : f32[16]
    return %s
  }
}
)");
  EXPECT_TRUE(spmd::PropagateShardings(*m).changed);
  const std::string once = ir::PrintModule(*m);
  EXPECT_FALSE(spmd::PropagateShardings(*m).changed);
  EXPECT_EQ(ir::PrintModule(*m), once);
  // A returned value is complete: the sum over dp is left to the partitioner, not pending.
  EXPECT_EQ(*ValueNamed(*m->entry(), "s")->sharding(), S({{}}));
}

// A training step of a two-layer MLP on a dp x tp mesh: batch over dp, Megatron over tp. The
// gradients (and the updated weights) get their parameter's layout from propagation alone.
TEST(PropagationTest, GradientsInheritTheirParametersSharding) {
  auto loss = testing::MlpLossModule(/*b=*/8, /*i=*/16, /*h=*/32, /*o=*/4);
  auto m = autodiff::GradModule(*loss, 0, {1, 2, 3});  // results: loss, dw1, db1, dw2
  m->set_mesh(ir::Mesh({"dp", "tp"}, {2, 4}));
  ir::Function& f = *m->entry();
  std::vector<ir::Node*> params = f.Parameters();
  params[0]->result()->set_sharding(S({{"dp"}, {}}));       // x
  params[1]->result()->set_sharding(S({{}, {"tp"}}));       // w1 [i, h]: columns
  params[2]->result()->set_sharding(S({{"tp"}}));           // b1 [h]
  params[3]->result()->set_sharding(S({{"tp"}, {}}));       // w2 [h, o]: rows
  params[5]->result()->set_sharding(S({{"dp"}, {}}));       // target
  // The SGD update w - 0.1 * dw for each sharded weight, appended to the step's results.
  ir::Builder b(&f);
  std::vector<ir::Value*> results = f.results();
  for (int k = 1; k <= 3; ++k) {
    ir::Value* w = params[k]->result();
    ir::Value* lr = b.BroadcastInDim(b.Scalar(DType::kF32, 0.1), w->shape(), {});
    results.push_back(b.Sub(w, b.Mul(lr, results[k])));
  }
  f.set_results(results);
  ir::Verify(*m);

  spmd::PropagateShardings(*m);
  ir::Verify(*m);
  ExpectFullyAnnotated(f);
  for (int k = 1; k <= 3; ++k) {
    const Sharding& want = *params[k]->result()->sharding();
    const ir::Value* grad = f.results()[k];
    const ir::Value* updated = f.results()[3 + k];
    SCOPED_TRACE(ir::PrintFunction(f));
    // The gradient is laid out like its weight, complete (a returned value is never partial: the
    // partitioner sums the batch shards' contributions over dp).
    EXPECT_EQ(*grad->sharding(), want) << "gradient of parameter " << k;
    EXPECT_EQ(*updated->sharding(), want) << "updated parameter " << k;
  }
  ExpectPartitionsToTheGlobalResult(*m);
}

// FSDP's layout: parameters and batch split on dim 0 over one axis. The weight gradients contract
// over the split batch (a pending sum over fsdp) but are asked for dim 0 over fsdp by their
// updates: the layout on a dim wins, so the partitioner can reduce_scatter them. The activations
// are larger than the weights (as in training), so where a matmul's operands disagree the
// batch-split activation keeps its layout and the weight is gathered.
TEST(PropagationTest, FsdpGradientsAreShardedLikeTheirParameters) {
  auto loss = testing::MlpLossModule(/*b=*/64, /*i=*/16, /*h=*/32, /*o=*/8);
  auto m = autodiff::GradModule(*loss, 0, {1, 3});  // results: loss, dw1, dw2
  m->set_mesh(ir::Mesh({"fsdp"}, {4}));
  ir::Function& f = *m->entry();
  std::vector<ir::Node*> params = f.Parameters();
  for (int k : {0, 1, 3, 5}) params[k]->result()->set_sharding(S({{"fsdp"}, {}}));  // x, w1, w2, target
  ir::Builder b(&f);
  std::vector<ir::Value*> results = f.results();
  for (int k : {1, 2}) {
    ir::Value* w = params[k == 1 ? 1 : 3]->result();
    ir::Value* lr = b.BroadcastInDim(b.Scalar(DType::kF32, 0.1), w->shape(), {});
    results.push_back(b.Sub(w, b.Mul(lr, results[k])));
  }
  f.set_results(results);
  spmd::PropagateShardings(*m);
  ir::Verify(*m);
  ExpectFullyAnnotated(f);
  SCOPED_TRACE(ir::PrintFunction(f));
  for (int k : {1, 2, 3, 4}) EXPECT_EQ(*f.results()[k]->sharding(), S({{"fsdp"}, {}})) << "result " << k;
  EXPECT_EQ(*f.results()[0]->sharding(), S({})) << "the loss";
  ExpectPartitionsToTheGlobalResult(*m);
}

// Every module of tests/spmd/propagation/*.axir (the Megatron attention layer and MLPs, partial
// sums through linear ops, conflicts, constraints, uneven dims), propagated, partitions to the
// global result.
TEST(PropagationTest, TextModulesPartitionToTheGlobalResult) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(AXLE_SOURCE_DIR) / "tests" / "spmd" / "propagation"))
    if (e.path().extension() == ".axir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u);
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::unique_ptr<ir::Module> m = ir::ParseModule(text.str(), path.string());
    spmd::PropagateShardings(*m);
    ExpectFullyAnnotated(*m->entry());
    ExpectPartitionsToTheGlobalResult(*m);
  }
}

TEST(PropagationTest, PassIsRegisteredOnceAndRunsByName) {
  spmd::RegisterPasses();
  spmd::RegisterPasses();  // idempotent
  int count = 0;
  for (const passes::PassInfo& p : passes::ListPasses()) count += p.name == "sharding-propagation";
  EXPECT_EQ(count, 1);
  auto m = ir::ParseModule(R"(
module @m {mesh_axes=[dp], mesh_shape=[2]} {
  func @main {
    %x = parameter() {index=0} : f32[8]{[dp]}
    %y = neg(%x) : f32[8]
    return %y
  }
}
)");
  passes::RunPasses(*m, {"sharding-propagation"});
  EXPECT_EQ(*ValueNamed(*m->entry(), "y")->sharding(), S({{"dp"}}));
}

// Random modules over a mesh with the generator's random annotations (axes x, y, z, w, partial
// axes included): propagation never changes an annotation, leaves every value of the entry
// function annotated, and the module still verifies.
TEST(PropagationTest, RandomModulesComeOutFullyAnnotated) {
  testing::RandomModuleOptions opts;
  opts.sharding_percent = 20;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    auto m = testing::RandomModule(seed, opts);
    m->set_mesh(ir::Mesh({"x", "y", "z", "w"}, {2, 3, 1, 2}));
    const ir::Function& f = *m->entry();
    std::vector<std::pair<const ir::Value*, Sharding>> annotated;
    for (const auto& n : f.nodes())
      for (const ir::Value* v : n->results())
        if (v->sharding()) annotated.push_back({v, *v->sharding()});
    try {
      spmd::PropagateShardings(*m);
      ir::Verify(*m);
    } catch (const Error& e) {
      FAIL() << e.what() << "\n" << ir::PrintModule(*m);
    }
    ExpectFullyAnnotated(f);
    for (const auto& [v, s] : annotated) EXPECT_EQ(*v->sharding(), s) << ir::PrintNode(*v->node());
  }
}

}  // namespace
}  // namespace axle
