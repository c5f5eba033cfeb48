// Independent kernels as one loop: consecutive generated loop kernels that read none of each
// other's results run as one pool call (Note [Independent kernels as one loop]); planned when the
// executable is built (MarkGroups), run by RunRegion (region.cc).
#include <algorithm>
#include <chrono>
#include <unordered_set>

#include <fmt/format.h>

#include "backends/cpu/executor_internal.h"
#include "backends/cpu/cpu_flags.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::internal {

// Note [Independent kernels as one loop]
// The optimizer's update is one fused kernel per parameter (AdamW: p, m and v from p, m, v and
// the gradient), back to back at the end of the step, read by nothing else in it: GPT-2 small
// has 7 of 16K-65K elements and 18 of at most 512. Each one was its own pool call: the large ones
// split in 4 chunks a thread and waited for their slower half, the small ones ran on one thread
// at ~1 us of overhead each, and the pool thread sat idle for ~80 us of the ~260 the updates took
// (AXLE_TRACE, vCPUs near). So MarkGroups takes each run of at least two consecutive generated
// loop kernels (no reductions, copies, chain members or pairs' fillers) in which no kernel reads
// another's result, and RunRegion binds all their buffers, cuts every kernel's elements into
// pieces of half a parallel chunk (a kernel under that is one piece) and lets the threads claim
// the pieces as one loop, each its own half first (so each thread keeps updating the same
// parameters' state every step, Note [Chunks stay on their thread]). An element is computed by
// the same code whatever piece it falls in, so the bits do not change. An input that dies in the
// group may become its own kernel's output (in place) only if no other kernel of the group reads
// it. AXLE_GROUPS=0 runs them one call each.
bool Groupable(const Step& st) {
  if (st.kind != Step::kGenerated || st.region >= 0) return false;
  const GeneratedKernel& g = *st.generated;
  return g.fn != nullptr && !g.is_copy && !g.reduction && g.row_blocks == 1 && g.elements > 0;
}

namespace {

bool ReadsAnyOf(const Step& st, const std::unordered_set<int>& slots) {
  return std::any_of(st.operands.begin(), st.operands.end(), [&](int s) { return slots.count(s) > 0; });
}

}  // namespace

void CpuExecutable::MarkGroups(std::vector<Step>& steps) {
  if (target_.threads < 2 || !flags::groups()) return;
  size_t k = 0;
  while (k < steps.size()) {
    const Step& first = steps[k];
    if (!Groupable(first)) {  // (nor is any step in a pair's or a chain's region)
      ++k;
      continue;
    }
    std::unordered_set<int> made(first.results.begin(), first.results.end());
    size_t j = k + 1;
    for (; j < steps.size() && Groupable(steps[j]) && !ReadsAnyOf(steps[j], made); ++j)
      made.insert(steps[j].results.begin(), steps[j].results.end());
    if (j - k >= 2) FinishGroup(steps, k, j);
    k = j;
  }
}

void CpuExecutable::FinishGroup(std::vector<Step>& steps, size_t k, size_t j) {
  Region group{.kind = Region::kGroup, .steps = static_cast<int>(j - k)};
  std::unordered_set<int> seen;
  for (size_t i = k; i < j; ++i)
    for (int s : std::unordered_set<int>(steps[i].operands.begin(), steps[i].operands.end()))
      if (!seen.insert(s).second) group.shared.push_back(s);
  int64_t total = 0;
  for (size_t i = k; i < j; ++i) total += steps[i].generated->elements;
  const int64_t most = target_.cpu.group_max_pieces;
  for (size_t i = k; i < j; ++i) {
    const GeneratedKernel& g = *steps[i].generated;
    const int64_t chunk = g.min_chunk > 0 ? g.min_chunk : kParallelElements;
    const int64_t grain = std::max({int64_t{1}, chunk / 2, (total + most - 1) / most});
    for (int64_t b = 0; b < g.elements; b += grain)
      group.pieces.push_back({static_cast<int>(i - k), b, std::min(g.elements, b + grain)});
  }
  group.parallel = total >= kParallelElements && group.pieces.size() > 1;
  if (profile::Labeling()) {
    std::string label;
    for (size_t i = k; i < j; ++i) label += (i > k ? "; " : "") + steps[i].label;
    group.label = fmt::format("group/{}{{{}}}", j - k, label);
  }
  for (size_t i = k; i < j; ++i) steps[i].region = static_cast<int>(regions_.size());
  regions_.push_back(std::move(group));
}

}  // namespace axle::runtime::internal
