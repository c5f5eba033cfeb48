// Differential property test of the optimizing passes against the reference interpreter (the
// oracle): on random modules (testing/random_module.h) the default pipeline, and each pass
// alone, must keep the module valid, never add nodes, and give bitwise the same results as the
// unoptimized module (NaNs compare as "both NaN": payloads are not pinned). Also: AXLE_DUMP_DIR.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/flags.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using testing::RandomModule;
using testing::RandomModuleOptions;

constexpr uint64_t kSeeds = 400;

RandomModuleOptions OptionsFor(uint64_t seed) {
  RandomModuleOptions o;
  switch (seed % 4) {
    case 1:
      o.collectives = true;
      o.num_replicas = 2 + static_cast<int64_t>(seed / 4 % 3);
      break;
    case 2:
      o.allow_zero_sized = false;
      o.num_nodes = 24;
      break;
    case 3:
      o.dtypes = {DType::kF32, DType::kBF16, DType::kI32, DType::kBool};
      o.num_nodes = 30;
      break;
    default: break;
  }
  return o;
}

int64_t CountNodes(const ir::Module& m) {
  int64_t n = 0;
  for (const auto& f : m.functions()) n += static_cast<int64_t>(f->nodes().size());
  return n;
}

// Empty when a and b agree bit for bit (NaN == NaN whatever its payload); else what differs.
std::string Difference(const ir::Literal& a, const ir::Literal& b) {
  if (a.type() != b.type()) return "type " + a.type().ToString() + " vs " + b.type().ToString();
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    if (ir::ElementBits(a, i) == ir::ElementBits(b, i)) continue;
    if (IsFloat(a.dtype()) && std::isnan(a.GetDouble(i)) && std::isnan(b.GetDouble(i))) continue;
    return fmt::format("element {}: {} vs {}", i, ir::FormatElement(a, i), ir::FormatElement(b, i));
  }
  return "";
}

// Every function's results on every replica; nullopt when the interpreter refuses the module.
std::optional<std::vector<std::vector<std::vector<ir::Literal>>>> EvaluateAll(const ir::Module& m,
                                                                              uint64_t seed) {
  std::vector<std::vector<std::vector<ir::Literal>>> out;
  try {
    for (const auto& f : m.functions()) {
      std::vector<std::vector<ir::Literal>> args;
      for (int64_t r = 0; r < m.num_replicas(); ++r)
        args.push_back(testing::RandomArguments(*f, seed * 16 + static_cast<uint64_t>(r)));
      out.push_back(ir::EvaluateReplicated(*f, args));
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

// Makes every value of every function a result, so that the oracle sees each rewritten value and
// not only what the random functions happen to return (most random nodes are dead).
void ObserveAll(ir::Module& m) {
  for (const auto& f : m.functions()) {
    std::vector<ir::Value*> results = f->results();
    for (const auto& n : f->nodes())
      for (ir::Value* v : n->results()) results.push_back(v);
    f->set_results(std::move(results));
  }
}

void CheckPasses(const std::vector<std::string>& passes, uint64_t seeds, int64_t* evaluated,
                 bool observe_all = false) {
  testing::RegisterTestCustomCalls();
  int64_t total_before = 0, total_after = 0, changed = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    std::unique_ptr<ir::Module> m = RandomModule(seed, OptionsFor(seed));
    if (observe_all) ObserveAll(*m);
    const std::string before = ir::PrintModule(*m);
    auto expected = EvaluateAll(*m, seed);
    const int64_t nodes_before = CountNodes(*m);
    try {
      passes::RunPasses(*m, passes);  // verifies after every pass
    } catch (const Error& e) {
      ADD_FAILURE() << "seed " << seed << ": " << e.what() << "\n" << before;
      continue;
    }
    total_before += nodes_before;
    total_after += CountNodes(*m);
    changed += ir::PrintModule(*m) != before;
    EXPECT_LE(CountNodes(*m), nodes_before) << "seed " << seed << "\n" << before << "\n--- after:\n"
                                            << ir::PrintModule(*m);
    // The result prints and parses back (text in, text out).
    EXPECT_EQ(ir::PrintModule(*ir::ParseModule(ir::PrintModule(*m))), ir::PrintModule(*m));
    if (!expected) continue;
    auto actual = EvaluateAll(*m, seed);
    ASSERT_TRUE(actual.has_value()) << "seed " << seed << ": optimized module fails to evaluate\n"
                                    << ir::PrintModule(*m);
    ++*evaluated;
    for (size_t f = 0; f < expected->size(); ++f)
      for (size_t r = 0; r < (*expected)[f].size(); ++r)
        for (size_t k = 0; k < (*expected)[f][r].size(); ++k) {
          std::string d = Difference((*expected)[f][r][k], (*actual)[f][r][k]);
          if (!d.empty()) {
            ADD_FAILURE() << "seed " << seed << ", function " << f << ", replica " << r
                          << ", result " << k << ": " << d << "\n--- before:\n" << before
                          << "\n--- after:\n" << ir::PrintModule(*m);
            return;
          }
        }
  }
  std::fprintf(stderr, "%s%s: %d modules, %d changed, %lld nodes -> %lld, %lld evaluated\n",
               fmt::format("{}", fmt::join(passes, ",")).c_str(), observe_all ? " (all observed)" : "",
               static_cast<int>(seeds),
               static_cast<int>(changed), static_cast<long long>(total_before),
               static_cast<long long>(total_after), static_cast<long long>(*evaluated));
}

TEST(PipelineRandom, DefaultPipelineKeepsResultsBitwise) {
  int64_t evaluated = 0;
  CheckPasses({"default"}, kSeeds, &evaluated);
  EXPECT_GE(evaluated, static_cast<int64_t>(kSeeds * 9 / 10));
}

TEST(PipelineRandom, DefaultPipelineKeepsEveryValueBitwise) {
  int64_t evaluated = 0;
  CheckPasses({"default"}, kSeeds, &evaluated, /*observe_all=*/true);
  EXPECT_GE(evaluated, static_cast<int64_t>(kSeeds * 9 / 10));
}

TEST(PipelineRandom, EachPassAloneKeepsResultsBitwise) {
  for (const char* pass : {"dce", "cse", "simplify", "fold"}) {
    SCOPED_TRACE(pass);
    int64_t evaluated = 0;
    CheckPasses({pass}, 150, &evaluated);
    CheckPasses({pass}, 150, &evaluated, /*observe_all=*/true);
    EXPECT_GE(evaluated, 260);
  }
}

// Simplify-heavy random programs: only the ops the rules look at, on float and integer types,
// with zeros, ones and -0 among the constants the generator draws.
TEST(PipelineRandom, SimplifyRulesOnAlgebraHeavyPrograms) {
  testing::RegisterTestCustomCalls();
  int64_t evaluated = 0, nodes_before = 0, nodes_after = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    RandomModuleOptions o;
    o.ops = {ir::OpKind::kAdd,       ir::OpKind::kSub,     ir::OpKind::kMul,
             ir::OpKind::kDiv,       ir::OpKind::kNeg,     ir::OpKind::kConvert,
             ir::OpKind::kTranspose, ir::OpKind::kReshape, ir::OpKind::kBroadcastInDim,
             ir::OpKind::kSelect,    ir::OpKind::kSlice,   ir::OpKind::kConstant,
             ir::OpKind::kMax,       ir::OpKind::kMin,     ir::OpKind::kNot,
             ir::OpKind::kReverse,   ir::OpKind::kPad,     ir::OpKind::kReduce,
             ir::OpKind::kDynamicSlice, ir::OpKind::kDynamicUpdateSlice, ir::OpKind::kConcatenate};
    o.num_nodes = 20;
    std::unique_ptr<ir::Module> m = RandomModule(seed * 7919 + 1, o);
    ObserveAll(*m);
    const std::string before = ir::PrintModule(*m);
    nodes_before += CountNodes(*m);
    auto expected = EvaluateAll(*m, seed);
    passes::RunPasses(*m, {"default"});
    nodes_after += CountNodes(*m);
    if (!expected) continue;
    ++evaluated;
    auto actual = EvaluateAll(*m, seed);
    ASSERT_TRUE(actual.has_value());
    for (size_t f = 0; f < expected->size(); ++f)
      for (size_t k = 0; k < (*expected)[f][0].size(); ++k) {
        std::string d = Difference((*expected)[f][0][k], (*actual)[f][0][k]);
        ASSERT_TRUE(d.empty()) << "seed " << seed << ": " << d << "\n" << before << "\n--- after:\n"
                               << ir::PrintModule(*m);
      }
  }
  EXPECT_GE(evaluated, 250);
  EXPECT_LT(nodes_after, nodes_before);  // every value is a result: only rewrites remove nodes
  std::fprintf(stderr, "algebra-heavy (all observed): %lld nodes -> %lld\n",
               static_cast<long long>(nodes_before), static_cast<long long>(nodes_after));
}

// The default pipeline reaches its fixed point: running it again changes nothing.
TEST(PipelineRandom, DefaultPipelineIsIdempotent) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::unique_ptr<ir::Module> m = RandomModule(seed, OptionsFor(seed));
    passes::RunPasses(*m, {"default"});
    const std::string once = ir::PrintModule(*m);
    EXPECT_FALSE(passes::RunDefaultPipeline(*m)) << "seed " << seed << "\n" << once;
    EXPECT_EQ(ir::PrintModule(*m), once) << "seed " << seed;
  }
}

// Every simplify rule is documented in docs/passes.md's rule table.
TEST(Passes, EverySimplifyRuleIsDocumented) {
  std::ifstream in(std::filesystem::path(AXLE_SOURCE_DIR) / "docs" / "passes.md");
  std::stringstream doc;
  doc << in.rdbuf();
  for (std::string_view rule : passes::SimplifyRuleNames())
    EXPECT_NE(doc.str().find("| " + std::string(rule) + " |"), std::string::npos) << rule;
}

TEST(Passes, ListPassesHasEveryPassWithASummary) {
  std::set<std::string> names;
  for (const passes::PassInfo& p : passes::ListPasses()) {
    names.insert(std::string(p.name));
    EXPECT_FALSE(p.summary.empty()) << p.name;
  }
  for (const char* n : {"verify", "canonicalize", "dce", "cse", "simplify", "fold", "default"})
    EXPECT_TRUE(names.count(n)) << n;
  for (const std::string& n : passes::DefaultPipeline()) EXPECT_TRUE(names.count(n)) << n;
}

TEST(Passes, DumpDirWritesTheModuleBeforeAndAfterEachPass) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("axle_dump_test_{}", ::getpid());
  fs::remove_all(dir);
  flags::set_dump_dir(dir.string());
  std::unique_ptr<ir::Module> m = ir::ParseModule(R"(module @m {
  func @main {
    %x = parameter() {index=0} : f32[4]
    %e = exp(%x) : f32[4]
    %n = neg(%x) : f32[4]
    %nn = neg(%n) : f32[4]
    return %nn
  }
})");
  passes::RunPasses(*m, {"dce", "simplify", "dce"});
  flags::set_dump_dir("");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"000-input.axir", "001-dce.axir", "002-simplify.axir",
                                             "003-dce.axir"}));
  std::ifstream in(dir / "000-input.axir");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("exp(%x)"), std::string::npos) << text.str();
  std::ifstream last(dir / "003-dce.axir");
  std::stringstream last_text;
  last_text << last.rdbuf();
  EXPECT_EQ(last_text.str(), ir::PrintModule(*m));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace axle
