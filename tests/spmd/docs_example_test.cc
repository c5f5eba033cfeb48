// docs/spmd.md's worked example, "A transformer layer, partitioned": one GPT-2 block
// (docs/examples/transformer_layer.axir) on a 2 x 2 fsdp x tp mesh. The test propagates and
// partitions the file, checks the shardings the doc's table shows, the partitioned program the doc
// prints (line for line, in order, where the doc does not elide) and the collectives it counts,
// and runs the per-device program against the global one on random inputs. So the doc cannot
// drift from what the code does without this test failing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"

namespace axle {
namespace {

using ir::Literal;
using ir::Module;

const std::filesystem::path kSource = AXLE_SOURCE_DIR;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Module> LoadLayer() {
  const std::filesystem::path path = kSource / "docs" / "examples" / "transformer_layer.axir";
  std::unique_ptr<Module> m = ir::ParseModule(ReadFile(path), path.string());
  ir::Verify(*m);
  return m;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

// The lines of docs/spmd.md after `marker` (an HTML comment, invisible in the rendered doc): the
// table rows that follow it, or the fenced code block that follows it.
std::vector<std::string> DocLinesAfter(const std::string& marker, bool code_block) {
  const std::string doc = ReadFile(kSource / "docs" / "spmd.md");
  const size_t at = doc.find(marker);
  EXPECT_NE(at, std::string::npos) << "docs/spmd.md lost its marker " << marker;
  if (at == std::string::npos) return {};
  std::vector<std::string> out;
  bool in_block = false;
  for (const std::string& raw : SplitLines(doc.substr(at + marker.size()))) {
    const std::string line = Trim(raw);
    if (code_block) {
      if (line.rfind("```", 0) == 0) {
        if (in_block) break;
        in_block = true;
        continue;
      }
      if (in_block) out.push_back(raw);
    } else {
      if (line.empty() && out.empty()) continue;
      if (line.empty() || line[0] != '|') break;
      out.push_back(line);
    }
  }
  return out;
}

std::vector<std::string> SplitCells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|') {
      cells.push_back(Trim(cell));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

std::map<std::string, int> CountCollectives(const ir::Function& f) {
  std::map<std::string, int> n;
  for (const auto& node : f.nodes())
    if (node->info().traits & ir::kCollective) ++n[std::string(node->name())];
  return n;
}

// Each line of `doc` that is not an elision (`//`) is a line of `text`, in order.
void ExpectLinesInOrder(const std::vector<std::string>& doc, const std::string& text, const std::string& what) {
  const std::vector<std::string> lines = SplitLines(text);
  size_t pos = 0;
  for (const std::string& line : doc) {
    if (Trim(line).rfind("//", 0) == 0) continue;
    size_t found = pos;
    while (found < lines.size() && lines[found] != line) ++found;
    ASSERT_LT(found, lines.size()) << "docs/spmd.md shows a line that " << what
                                   << " does not have (or not in this order):\n"
                                   << line << "\n--- " << what << ":\n"
                                   << text;
    pos = found + 1;
  }
}

TEST(SpmdDocsExampleTest, InputIsTheExampleFile) {
  const std::vector<std::string> doc = DocLinesAfter("<!-- transformer_layer: input -->", true);
  ASSERT_GT(doc.size(), 15u);
  ExpectLinesInOrder(doc, ReadFile(kSource / "docs" / "examples" / "transformer_layer.axir"),
                     "docs/examples/transformer_layer.axir");
}

TEST(SpmdDocsExampleTest, PropagatedShardingsAreTheDocsTable) {
  std::unique_ptr<Module> m = LoadLayer();
  spmd::PropagateShardings(*m);
  std::map<std::string, const ir::Value*> by_name;
  for (const auto& n : m->entry()->nodes())
    for (const ir::Value* v : n->results()) by_name[v->name()] = v;

  // Rows: | %a, %b | type | sharding | why |; the header and the |---| line are skipped.
  int checked = 0;
  for (const std::string& row : DocLinesAfter("<!-- transformer_layer: propagated -->", false)) {
    std::vector<std::string> cells = SplitCells(row);
    if (cells.size() < 3 || cells[0].empty() || cells[0][0] != '%') continue;
    const std::string type = cells[1], sharding = cells[2];
    std::stringstream names(cells[0]);
    for (std::string name; std::getline(names, name, ',');) {
      name = Trim(name);
      ASSERT_EQ(name[0], '%') << row;
      auto it = by_name.find(name.substr(1));
      ASSERT_NE(it, by_name.end()) << "docs/spmd.md names " << name << ", which the example does not define";
      const ir::Value* v = it->second;
      ASSERT_TRUE(v->sharding().has_value()) << name;
      EXPECT_EQ(v->type().ToString(), type) << name;
      EXPECT_EQ(v->sharding()->ToString(), sharding) << name << " (docs/spmd.md row: " << row << ")";
      ++checked;
    }
  }
  EXPECT_GE(checked, 30) << "the docs table shrank or its marker moved";
}

TEST(SpmdDocsExampleTest, PartitionedProgramIsTheDocsPrint) {
  std::unique_ptr<Module> m = LoadLayer();
  spmd::PropagateShardings(*m);
  std::unique_ptr<Module> part = spmd::Partition(*m);
  ir::Verify(*part);

  // Each doc line is a line of the print, in order; a line that starts with `//` marks an elision.
  const std::vector<std::string> doc = DocLinesAfter("<!-- transformer_layer: partitioned -->", true);
  ASSERT_GT(doc.size(), 50u);
  ExpectLinesInOrder(doc, ir::PrintModule(*part), "the partitioned program");
  int doc_collectives = 0;
  for (const std::string& line : doc)
    for (const char* c : {"all_gather(", "all_reduce(", "reduce_scatter(", "all_to_all(", "collective_permute("})
      if (Trim(line).rfind("//", 0) != 0 && line.find(c) != std::string::npos) ++doc_collectives;

  // The counts the doc states: 12 FSDP gathers of parameters over fsdp, 1 gather of c_attn's output
  // over tp (the q/k/v slices cut across the tp split), 2 all_reduces over tp after the row-parallel
  // c_projs. The doc elides none of them.
  std::map<std::string, int> counts = CountCollectives(*part->entry());
  EXPECT_EQ(counts, (std::map<std::string, int>{{"all_gather", 13}, {"all_reduce", 2}}));
  EXPECT_EQ(doc_collectives, 15) << "the doc's print must show every collective";
  const ir::Mesh& mesh = *m->mesh();
  int fsdp_gathers = 0, tp_gathers = 0, tp_reduces = 0;
  for (const auto& n : part->entry()->nodes()) {
    if (n->op() == ir::OpKind::kAllGather) {
      const auto& a = n->attrs_as<ir::AllGatherAttrs>();
      fsdp_gathers += a.groups == mesh.GroupsOver({"fsdp"}) && a.dim == 0 &&
                      n->operand(0)->node()->op() == ir::OpKind::kParameter;
      tp_gathers += a.groups == mesh.GroupsOver({"tp"});
    }
    if (n->op() == ir::OpKind::kAllReduce)
      tp_reduces += n->attrs_as<ir::AllReduceAttrs>().groups == mesh.GroupsOver({"tp"});
  }
  EXPECT_EQ(fsdp_gathers, 12);
  EXPECT_EQ(tp_gathers, 1);
  EXPECT_EQ(tp_reduces, 2);

  // The default pipeline (CSE folds the slices' repeated index constants) keeps the collectives.
  passes::RunDefaultPipeline(*part);
  EXPECT_EQ(CountCollectives(*part->entry()), counts);
}

Literal RandomLiteral(const ir::TensorType& t, std::mt19937& rng) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  std::uniform_real_distribution<double> u(-2, 2);
  for (double& x : v) x = u(rng);
  return Literal::FromDoubles(t.dtype, t.shape, v);
}

// The per-device program under EvaluateReplicated on the shards gives the global program's result
// (within 1e-5 relative: the all_reduces reorder the c_proj sums), before and after the default
// pipeline.
TEST(SpmdDocsExampleTest, PartitionedLayerComputesTheGlobalLayer) {
  std::unique_ptr<Module> m = LoadLayer();
  spmd::PropagateShardings(*m);
  const ir::Mesh& mesh = *m->mesh();
  const ir::Function& f = *m->entry();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<Literal> args;
    for (const ir::Node* p : f.Parameters()) args.push_back(RandomLiteral(p->result()->type(), rng));
    const std::vector<Literal> want = ir::Evaluate(f, args);
    ASSERT_EQ(want.size(), 1u);

    std::unique_ptr<Module> part = spmd::Partition(*m);
    if (trial == 2) passes::RunDefaultPipeline(*part);
    std::vector<std::vector<Literal>> per_device(static_cast<size_t>(mesh.size()));
    for (int64_t d = 0; d < mesh.size(); ++d)
      for (size_t i = 0; i < args.size(); ++i)
        per_device[d].push_back(
            spmd::ShardLiteral(args[i], spmd::ParameterSharding(*m, static_cast<int64_t>(i)), mesh, d));
    std::vector<std::vector<Literal>> got = ir::EvaluateReplicated(*part->entry(), per_device);
    std::vector<Literal> shards;
    for (int64_t d = 0; d < mesh.size(); ++d) shards.push_back(got[d][0]);
    const Literal whole = spmd::AssembleLiteral(shards, spmd::ResultSharding(*m, 0), mesh, f.results()[0]->type());
    ASSERT_EQ(whole.type(), want[0].type());
    for (int64_t i = 0; i < whole.NumElements(); ++i) {
      const double a = want[0].GetDouble(i), b = whole.GetDouble(i);
      ASSERT_TRUE(std::isfinite(a)) << "element " << i;
      ASSERT_LE(std::abs(a - b), 1e-5 * std::max(1.0, std::abs(a))) << "trial " << trial << ", element " << i;
    }
  }
}

}  // namespace
}  // namespace axle
