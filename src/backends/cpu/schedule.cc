// The CPU executor's plan as text: `axle compile --emit=schedule`, AXLE_DUMP_DIR's
// <module>-<hash>.schedule.txt, and the schedule tests (tests/runtime/schedule_test.cc).
//
//   schedule @m for cpu-avx2-2t: 18 steps, 2 products paired, 3 chained, 2 grouped, 0 copies folded
//       0 parameter  %x f32[256,256]
//      10 product    %a = dot_general(%x, %w1)    pair with 11 (fillers 0, followers 0); free %w1
//      11 product    %b = dot_general(%x, %w2)    paired with 10; free %x, %w2
//      12 loop       %c = fused{add}[65536](%a, %b)    free %a, %b
//      13 product    %s = dot_general(%q, %k)    chain of 3 in 8 slices; free %q, %k
//
// One line a step, in the order the executor runs them: what it computes (the node, or the fused
// kernel of codegen::DescribeKernel), the values it reads, then the decisions the plan made
// (pairs, chains, groups, views) and the values whose last use it is.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_map>

#include "backends/cpu/executor_internal.h"

namespace axle::runtime::internal {
namespace {

std::string ViewText(const cpu::View& v) {
  return v.plain() ? "" : fmt::format("+{}[{}]", v.offset, fmt::join(v.strides, ","));
}

}  // namespace

std::string CpuExecutable::DescribeSchedule() const {
  // Each slot's value, for names: a step's results are its node's (or kernel's outputs), in order.
  std::vector<const Value*> value_of(slot_bytes_.size(), nullptr);
  for (const Step& st : steps_) {
    std::vector<const Value*> results;
    if (st.kind == Step::kGenerated) results = st.generated->outputs;
    else for (const Value* v : st.node->results()) results.push_back(v);
    for (size_t r = 0; r < results.size() && r < st.results.size(); ++r)
      if (value_of[static_cast<size_t>(st.results[r])] == nullptr) value_of[static_cast<size_t>(st.results[r])] = results[r];
    if (st.into != nullptr) value_of[static_cast<size_t>(st.results[0])] = st.into;  // written through a view
  }
  auto name = [&](int s) {
    const Value* v = value_of[static_cast<size_t>(s)];
    return v != nullptr && !v->name().empty() ? "%" + std::string(v->name()) : fmt::format("s{}", s);
  };
  auto names = [&](const std::vector<int>& slots) {
    std::vector<std::string> out;
    for (int s : slots) out.push_back(name(s));
    return fmt::format("{}", fmt::join(out, ", "));
  };

  // The steps that run as part of a pair's, chain's or group's pool call, marked on its first.
  std::vector<std::string> part_of(steps_.size());
  int paired = 0, chained = 0, grouped = 0;
  for (const Region& r : regions_) {
    const size_t p = r.first;
    auto mark = [&](size_t from, size_t count, const std::string& what) {
      for (size_t q = from; q < from + count && q < steps_.size(); ++q) part_of[q] = what;
    };
    switch (r.kind) {
      case Region::kPair:
        paired += 2;
        mark(p + 1, 1, fmt::format("paired with {}", p));
        mark(p + 2, static_cast<size_t>(r.fillers), fmt::format("beside the pair at {}", p));
        mark(p + 2 + static_cast<size_t>(r.fillers), static_cast<size_t>(r.followers),
             fmt::format("after {} on its thread", p));
        break;
      case Region::kChain:
        mark(p + 1, static_cast<size_t>(r.steps - 1), fmt::format("in the chain at {}", p));
        chained += r.steps;
        break;
      case Region::kGroup:
        mark(p + 1, static_cast<size_t>(r.steps - 1), fmt::format("in the group at {}", p));
        grouped += r.steps;
        break;
    }
  }
  std::string out = fmt::format(
      "schedule @{} for {}: {} steps, {} products paired, {} chained, {} grouped, {} copies folded\n",
      module_->name(), target_.ToString(), steps_.size(), paired, chained, grouped, copies_folded_);
  for (size_t p = 0; p < steps_.size(); ++p) {
    const Step& st = steps_[p];
    std::string kind, what;
    switch (st.kind) {
      case Step::kParameter:
        kind = "parameter";
        what = fmt::format("{} {}", name(st.results[0]), st.node->result()->type().ToString());
        break;
      case Step::kConstant:
        kind = "constant";
        what = fmt::format("{} {}", name(st.results[0]), st.node->result()->type().ToString());
        break;
      case Step::kGenerated:
        kind = st.generated->reduction ? "reduction" : "loop";
        what = fmt::format("{} = {}({})", names(st.results), st.generated->name, names(st.operands));
        break;
      case Step::kForward:
      case Step::kCollective:
      case Step::kKernel:
        kind = st.kind == Step::kCollective                ? "collective"
               : st.kind == Step::kForward                 ? "forward"
               : st.node->op() == OpKind::kDotGeneral      ? "product"
                                                           : "kernel";
        what = fmt::format("{} = {}({})", names(st.results), st.node->name(), names(st.operands));
        if (st.kind == Step::kKernel && !st.kernel.fn) what += " [interpreter]";
        break;
    }
    std::vector<std::string> notes;
    const Region* r = st.region >= 0 ? &regions_[static_cast<size_t>(st.region)] : nullptr;
    const bool first = r != nullptr && r->first == p;
    const bool by_rows = r != nullptr && r->kind == Region::kChain && r->cuts[p - r->first] == Cut::kRows;
    if (first && r->kind == Region::kPair)
      notes.push_back(fmt::format("pair with {} (fillers {}, followers {})", p + 1, r->fillers, r->followers));
    if (first && r->kind == Region::kChain)
      notes.push_back(fmt::format("chain of {} in {} slices{}", r->steps, r->slices, by_rows ? " by rows" : ""));
    if (!part_of[p].empty()) notes.push_back(part_of[p] + (!first && by_rows ? " by rows" : ""));
    if (first && r->kind == Region::kGroup)
      notes.push_back(fmt::format("group of {} in {} pieces{}", r->steps, r->pieces.size(), r->parallel ? "" : ", one thread"));
    if (!st.views.plain())
      notes.push_back(fmt::format("views a{} b{} c{}", ViewText(st.views.lhs), ViewText(st.views.rhs),
                                  ViewText(st.views.out)));
    if (st.into != nullptr) notes.push_back(fmt::format("into %{}", st.into->name()));
    if (!st.release.empty()) notes.push_back("free " + names(st.release));
    out += fmt::format("{:>6} {:<10} {}", p, kind, what);
    if (!notes.empty()) out += fmt::format("    {}", fmt::join(notes, "; "));
    out += "\n";
  }
  return out;
}

}  // namespace axle::runtime::internal
