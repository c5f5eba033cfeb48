// The random module generator: it covers every op of ops.def, honours its options, is a pure
// function of the seed, and its helpers (arguments, shuffling, renaming) keep modules valid.
#include "testing/random_module.h"

#include <gtest/gtest.h>

#include <set>

#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "testing/random_module_internal.h"

namespace axle::testing {
namespace {

using ir::Module;
using ir::OpKind;

std::vector<const ir::Value*> AllValues(const Module& m) {
  std::vector<const ir::Value*> values;
  for (const auto& f : m.functions())
    for (const auto& n : f->nodes())
      for (const ir::Value* v : n->results()) values.push_back(v);
  return values;
}

TEST(RandomModule, EveryOpAppearsWithin2000Seeds) {
  RandomModuleOptions options;
  options.collectives = true;
  options.fusions = true;
  options.num_replicas = 4;
  std::vector<int> count(ir::kNumOps, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed, options);
    for (const auto& f : m->functions())
      for (const auto& n : f->nodes()) ++count[static_cast<size_t>(n->op())];
  }
  for (const ir::OpInfo& info : ir::AllOps())
    EXPECT_GE(count[static_cast<size_t>(info.kind)], 20)
        << "op " << info.name << " is (almost) never generated";
}

TEST(RandomModule, IsAPureFunctionOfTheSeed) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(ir::PrintModule(*RandomModule(seed)), ir::PrintModule(*RandomModule(seed)));
  }
  EXPECT_NE(ir::PrintModule(*RandomModule(1)), ir::PrintModule(*RandomModule(2)));
}

TEST(RandomModule, HonoursShapeAndTypeOptions) {
  RandomModuleOptions options;
  options.allow_zero_sized = false;
  options.max_rank = 2;
  options.max_dim = 3;
  options.dtypes = {DType::kF16, DType::kI8};
  options.max_parameters = 1;
  options.max_results = 1;
  const std::set<DType> allowed = {DType::kF16, DType::kI8,  DType::kBool, DType::kU8,
                                   DType::kI32, DType::kI64, DType::kU32};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed, options);
    ASSERT_NO_THROW(ir::Verify(*m)) << ir::PrintModule(*m);
    for (const auto& f : m->functions()) {
      EXPECT_LE(f->Parameters().size(), 1u);
      EXPECT_LE(f->results().size(), 1u);
    }
    for (const ir::Value* v : AllValues(*m)) {
      EXPECT_LE(v->type().rank(), 2);
      EXPECT_TRUE(allowed.count(v->dtype())) << v->type().ToString();
      for (int64_t d : v->shape().dims()) {
        EXPECT_GE(d, 1) << "seed " << seed << ": " << v->type().ToString();
        EXPECT_LE(d, 6) << "seed " << seed << ": " << v->type().ToString();
      }
    }
  }
}

TEST(RandomModule, AnyOptionsGiveValidModules) {
  for (uint64_t seed = 0; seed < 500; ++seed) {
    internal::Rng rng(seed);
    RandomModuleOptions options;
    options.num_nodes = static_cast<int>(rng.Uniform(0, 30));
    options.max_rank = static_cast<int>(rng.Uniform(0, 4));
    options.max_dim = rng.Uniform(1, 5);
    options.allow_zero_sized = rng.Coin();
    options.dtypes.clear();
    for (DType t : AllDTypes())
      if (rng.Percent(40)) options.dtypes.push_back(t);
    if (options.dtypes.empty()) options.dtypes.push_back(DType::kBool);
    options.collectives = rng.Coin();
    options.num_replicas = rng.Uniform(1, 9);
    options.max_functions = static_cast<int>(rng.Uniform(1, 3));
    options.max_parameters = static_cast<int>(rng.Uniform(0, 3));
    options.max_results = static_cast<int>(rng.Uniform(0, 3));
    std::unique_ptr<Module> m;
    ASSERT_NO_THROW(m = RandomModule(seed, options)) << "seed " << seed;
    ASSERT_NO_THROW(ir::Verify(*m)) << "seed " << seed << ":\n" << ir::PrintModule(*m);
    for (const ir::Value* v : AllValues(*m)) {
      EXPECT_LE(v->type().rank(), options.max_rank);
      for (int64_t d : v->shape().dims()) {
        EXPECT_LE(d, 2 * options.max_dim) << "seed " << seed;
        if (!options.allow_zero_sized) EXPECT_GT(d, 0) << "seed " << seed;
      }
    }
  }
}

TEST(RandomModule, RestrictedOpListAndCollectives) {
  RandomModuleOptions options;
  options.ops = {OpKind::kReduceScatter, OpKind::kAllToAll, OpKind::kAllGather};
  options.collectives = true;
  for (int64_t replicas : {1, 2, 3, 5, 8}) {
    options.num_replicas = replicas;
    for (uint64_t seed = 0; seed < 100; ++seed) {
      std::unique_ptr<Module> m = RandomModule(seed, options);
      EXPECT_EQ(m->num_replicas(), replicas);
      ASSERT_NO_THROW(ir::Verify(*m)) << ir::PrintModule(*m);
    }
  }
}

TEST(RandomModule, FailsLoudlyWhenNothingCanBeGenerated) {
  RandomModuleOptions options;
  options.ops = {OpKind::kExp};
  options.dtypes = {DType::kI32};
  EXPECT_THROW(RandomModule(1, options), Error);
}

TEST(RandomModule, ArgumentsMatchTheParameters) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed);
    for (const auto& f : m->functions()) {
      std::vector<ir::Node*> params = f->Parameters();
      std::vector<ir::Literal> args = RandomArguments(*f, seed);
      ASSERT_EQ(args.size(), params.size());
      for (size_t i = 0; i < args.size(); ++i)
        EXPECT_EQ(args[i].type(), params[i]->result()->type());
      std::vector<ir::Literal> again = RandomArguments(*f, seed);
      EXPECT_EQ(args, again);
    }
  }
}

// The modules are meant for differential testing against the reference interpreter: they must
// evaluate, on one replica or (with collectives) on num_replicas.
TEST(RandomModule, EvaluatesInTheInterpreter) {
  RegisterTestCustomCalls();
  for (uint64_t seed = 0; seed < 300; ++seed) {
    RandomModuleOptions options;
    options.collectives = seed % 2 == 1;
    options.fusions = seed % 3 == 0;
    options.num_replicas = options.collectives ? 1 + static_cast<int64_t>(seed % 4) : 1;
    std::unique_ptr<Module> m = RandomModule(seed, options);
    for (const auto& f : m->functions()) {
      std::vector<std::vector<ir::Literal>> args;
      for (int64_t r = 0; r < options.num_replicas; ++r)
        args.push_back(RandomArguments(*f, seed + 1000 * r));
      std::vector<std::vector<ir::Literal>> out;
      ASSERT_NO_THROW(out = ir::EvaluateReplicated(*f, args)) << "seed " << seed << ":\n"
                                                              << ir::PrintModule(*m);
      ASSERT_EQ(out.size(), args.size());
      for (const auto& replica : out) {
        ASSERT_EQ(replica.size(), f->results().size());
        for (size_t i = 0; i < replica.size(); ++i)
          EXPECT_EQ(replica[i].type(), f->results()[i]->type());
      }
    }
  }
}

TEST(RandomModule, ShuffleAndRenameKeepModulesValid) {
  int renamed = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed);
    std::unique_ptr<Module> shuffled = ShuffleIndependentNodes(*m, seed);
    ASSERT_NO_THROW(ir::Verify(*shuffled)) << ir::PrintModule(*shuffled);
    ASSERT_EQ(shuffled->functions().size(), m->functions().size());
    for (size_t i = 0; i < m->functions().size(); ++i)
      EXPECT_EQ(shuffled->functions()[i]->nodes().size(), m->functions()[i]->nodes().size());
    const std::string before = ir::PrintModule(*shuffled);
    RenameValues(*shuffled, seed);
    ASSERT_NO_THROW(ir::Verify(*shuffled));
    renamed += ir::PrintModule(*shuffled) != before;
  }
  EXPECT_GT(renamed, 150);
}

}  // namespace
}  // namespace axle::testing
