// Note [Buffer assignment] (buffer_assignment.h): liveness, in-place reuse and static arena
// offsets for a scheduled program.
#include "passes/buffer_assignment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace axle::passes {
namespace {

std::string Bytes(int64_t n) {
  if (n >= int64_t{1} << 20) return fmt::format("{:.2f} MiB", static_cast<double>(n) / (1 << 20));
  if (n >= int64_t{1} << 10) return fmt::format("{:.1f} KiB", static_cast<double>(n) / (1 << 10));
  return fmt::format("{} B", n);
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  }
};

}  // namespace

BufferPlan AssignBuffers(const BufferProblem& problem) {
  const int nv = static_cast<int>(problem.values.size());
  const int ns = static_cast<int>(problem.steps.size());
  using Kind = BufferProblem::Value::Kind;
  auto value = [&](int v, int t, const char* what) {
    if (v < 0 || v >= nv)
      Fail("buffer assignment{}: step {} {} value {} out of range 0..{}",
           problem.title.empty() ? "" : " of " + problem.title, t, what, v, nv - 1);
    return v;
  };

  // Regions: each step's first and last step of the region it runs in.
  std::vector<int> unit_begin(ns), unit_end(ns);
  for (int t = 0; t < ns;) {
    const int n = std::max(1, problem.steps[t].region);
    if (t + n > ns)
      Fail("buffer assignment of {}: the region at step {} has {} steps, past the last step {}", problem.title, t, n,
           ns - 1);
    for (int k = t; k < t + n; ++k) {
      unit_begin[k] = t;
      unit_end[k] = t + n - 1;
    }
    t += n;
  }

  // Liveness: the first writer, the last step that reads or writes (results: never released).
  std::vector<int> first(nv, -1), last(nv, -1);
  for (int t = 0; t < ns; ++t) {
    const BufferProblem::Step& st = problem.steps[t];
    for (int v : st.operands) {
      const size_t u = value(v, t, "reads");
      if (first[u] < 0)
        Fail("buffer assignment of {}: step {} reads value {} ({}) before any step writes it", problem.title, t, v,
             problem.values[u].name);
      last[u] = t;
    }
    for (int v : st.results) {
      const size_t u = value(v, t, "writes");
      if (first[u] < 0) first[u] = t;
      last[u] = t;
    }
    if (st.forward && st.operands.size() != st.results.size())
      Fail("buffer assignment of {}: forwarding step {} has {} operands and {} results", problem.title, t,
           st.operands.size(), st.results.size());
    if (!st.in_place.empty() && st.in_place.size() != st.results.size())
      Fail("buffer assignment of {}: step {} has in-place candidates for {} of its {} results", problem.title, t,
           st.in_place.size(), st.results.size());
  }
  constexpr int kForever = 1 << 30;
  std::vector<int> dies(nv);  // the step of the last use; kForever for results
  for (int v = 0; v < nv; ++v) dies[v] = problem.values[v].kind == Kind::kResult ? kForever : last[v];

  BufferPlan plan;
  plan.values.resize(nv);
  plan.takes.resize(ns);
  UnionFind uf(nv);
  std::vector<int> class_dies = dies;  // per root: the last use of any member
  std::vector<int> class_kind(nv);     // per root: the strongest kind of a member
  auto rank = [](Kind k) { return k == Kind::kResult ? 3 : k == Kind::kArgument ? 2 : k == Kind::kConstant ? 1 : 0; };
  for (int v = 0; v < nv; ++v) class_kind[v] = rank(problem.values[v].kind);
  auto unite = [&](int a, int b) {
    a = uf.Find(a);
    b = uf.Find(b);
    if (a == b) return;
    uf.parent[b] = a;
    class_dies[a] = std::max(class_dies[a], class_dies[b]);
    class_kind[a] = std::max(class_kind[a], class_kind[b]);
  };

  for (int t = 0; t < ns; ++t) {
    const BufferProblem::Step& st = problem.steps[t];
    plan.takes[t].resize(st.results.size());
    if (st.forward) {
      for (size_t j = 0; j < st.results.size(); ++j) unite(st.operands[j], st.results[j]);
      continue;
    }
    std::vector<bool> taken(st.operands.size(), false);
    for (size_t r = 0; r < st.in_place.size(); ++r) {
      const int res = st.results[r];
      if (first[res] != t) continue;  // a later writer of a value (views)
      for (int j : st.in_place[r]) {
        if (j < 0 || j >= static_cast<int>(st.operands.size()))
          Fail("buffer assignment of {}: step {} names operand {} of {} for in place", problem.title, t, j,
               st.operands.size());
        const int u = st.operands[j];
        if (problem.values[u].bytes != problem.values[res].bytes)
          Fail("buffer assignment of {}: step {} would write {} ({} bytes) in place of {} ({} bytes)", problem.title, t,
               problem.values[res].name, problem.values[res].bytes, problem.values[u].name, problem.values[u].bytes);
        const int root = uf.Find(u);
        // The operand dies here, and with it every value sharing its storage; one result each.
        if (taken[j] || dies[u] != t || class_dies[root] != t) continue;
        const int kind = class_kind[root];
        if (kind == rank(Kind::kConstant) || kind == rank(Kind::kResult)) continue;
        taken[j] = true;
        BufferPlan::Take& take = plan.takes[t][r];
        take.operand = j;
        if (kind == rank(Kind::kArgument)) {
          take.if_donated = true;  // decided when it runs; the result keeps storage of its own
          ++plan.num_if_donated;
        } else {
          unite(u, res);
          ++plan.num_in_place;
        }
        break;
      }
    }
  }

  // Buffers: each class, its storage and its (region-widened) life.
  std::vector<int> buffer_of_root(nv, -1);
  struct Buffer {
    int root;
    int64_t bytes = 0;
    int begin = kForever, end = -1;
    BufferPlan::Storage storage;
  };
  std::vector<Buffer> buffers;
  for (int v = 0; v < nv; ++v) {
    BufferPlan::Value& pv = plan.values[v];
    if (first[v] < 0) continue;  // never written: no storage
    const int root = uf.Find(v);
    int& b = buffer_of_root[root];
    if (b < 0) {
      b = static_cast<int>(buffers.size());
      const int kind = class_kind[root];
      buffers.push_back({root, 0, kForever, -1,
                         kind == rank(Kind::kResult)     ? BufferPlan::Storage::kOwn
                         : kind == rank(Kind::kArgument) ? BufferPlan::Storage::kArgument
                         : kind == rank(Kind::kConstant) ? BufferPlan::Storage::kConstant
                                                         : BufferPlan::Storage::kArena});
    }
    Buffer& buf = buffers[b];
    pv.buffer = b;
    pv.storage = buf.storage;
    pv.begin = unit_begin[first[v]];
    pv.end = dies[v] == kForever ? ns - 1 : unit_end[last[v]];
    buf.bytes = std::max(buf.bytes, problem.values[v].bytes);
    buf.begin = std::min(buf.begin, pv.begin);
    buf.end = std::max(buf.end, pv.end);
  }
  plan.num_buffers = static_cast<int>(buffers.size());

  // Arena offsets: the largest buffers first, each at the lowest offset free over its life.
  std::vector<int> order;
  for (int b = 0; b < static_cast<int>(buffers.size()); ++b) {
    if (buffers[b].storage == BufferPlan::Storage::kArena) order.push_back(b);
    if (buffers[b].storage == BufferPlan::Storage::kOwn) plan.own_bytes += buffers[b].bytes;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Buffer &x = buffers[a], &y = buffers[b];
    return x.bytes != y.bytes ? x.bytes > y.bytes : x.begin < y.begin;
  });
  std::vector<int64_t> offset(buffers.size(), -1);
  std::vector<int> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset + bytes) of placed buffers alive at once
  for (int b : order) {
    const Buffer& x = buffers[b];
    busy.clear();
    for (int p : placed) {
      const Buffer& y = buffers[p];
      if (y.begin <= x.end && x.begin <= y.end) busy.push_back({offset[p], offset[p] + ArenaAligned(y.bytes)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    const int64_t need = ArenaAligned(x.bytes);
    for (const auto& [lo, hi] : busy) {
      if (lo >= at + need) break;
      at = std::max(at, hi);
    }
    offset[b] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + need);
    placed.push_back(b);
  }
  for (BufferPlan::Value& pv : plan.values)
    if (pv.buffer >= 0) pv.offset = offset[pv.buffer];

  // The arena's lower bound: the most aligned arena bytes alive at one step.
  {
    std::vector<int64_t> delta(ns + 1, 0);
    for (int b : order) {
      const Buffer& x = buffers[b];
      delta[x.begin] += ArenaAligned(x.bytes);
      delta[x.end + 1] -= ArenaAligned(x.bytes);
    }
    int64_t live = 0;
    for (int t = 0; t < ns; ++t) plan.temp_peak_bytes = std::max(plan.temp_peak_bytes, live += delta[t]);
  }

  // The executor's count of live bytes: each value from the step (or region) that writes it until
  // it is released after its last use; a forwarded value is not counted again.
  {
    std::vector<char> counted(nv, 0);
    std::vector<std::vector<int>> release(ns);
    for (int v = 0; v < nv; ++v)
      if (first[v] >= 0 && dies[v] != kForever) release[unit_end[last[v]]].push_back(v);
    int64_t live = 0;
    for (int t = 0; t < ns;) {
      const int end = unit_end[t];
      for (int k = t; k <= end; ++k) {
        const BufferProblem::Step& st = problem.steps[k];
        if (st.forward || st.binds) continue;
        for (int v : st.results)
          if (!counted[v]) {
            counted[v] = 1;
            live += problem.values[v].bytes;
          }
      }
      plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
      for (int v : release[end])
        if (counted[v]) live -= problem.values[v].bytes;
      t = end + 1;
    }
  }
  return plan;
}

std::string CheckBufferPlan(const BufferProblem& problem, const BufferPlan& plan) {
  if (plan.values.size() != problem.values.size()) return "the plan has another number of values";
  // Two values of different buffers, both in the arena, alive at a common step: disjoint bytes.
  for (size_t a = 0; a < plan.values.size(); ++a) {
    const BufferPlan::Value& x = plan.values[a];
    if (x.storage != BufferPlan::Storage::kArena || x.buffer < 0) continue;
    if (x.offset < 0 || x.offset % kArenaAlign != 0 || x.offset + problem.values[a].bytes > plan.arena_bytes)
      return fmt::format("{} is at offset {} of an arena of {} bytes", problem.values[a].name, x.offset,
                         plan.arena_bytes);
    for (size_t b = a + 1; b < plan.values.size(); ++b) {
      const BufferPlan::Value& y = plan.values[b];
      if (y.storage != BufferPlan::Storage::kArena || y.buffer < 0 || y.buffer == x.buffer) continue;
      const bool together = x.begin <= y.end && y.begin <= x.end;
      const bool overlap =
          x.offset < y.offset + problem.values[b].bytes && y.offset < x.offset + problem.values[a].bytes;
      if (together && overlap)
        return fmt::format("{} (steps {}-{}, bytes {}+{}) and {} (steps {}-{}, bytes {}+{}) share memory",
                           problem.values[a].name, x.begin, x.end, x.offset, problem.values[a].bytes,
                           problem.values[b].name, y.begin, y.end, y.offset, problem.values[b].bytes);
    }
  }
  // A take: the operand and the result one buffer, or the operand an argument (if donated).
  for (size_t t = 0; t < plan.takes.size(); ++t)
    for (size_t r = 0; r < plan.takes[t].size(); ++r) {
      const BufferPlan::Take& take = plan.takes[t][r];
      if (take.operand < 0) continue;
      const BufferProblem::Step& st = problem.steps[t];
      const BufferPlan::Value &u = plan.values[st.operands[take.operand]], &v = plan.values[st.results[r]];
      const bool ok =
          take.if_donated ? u.storage == BufferPlan::Storage::kArgument && u.buffer != v.buffer : u.buffer == v.buffer;
      if (!ok)
        return fmt::format("step {} writes {} in place of {} ({}), but their storage does not allow it", t,
                           problem.values[st.results[r]].name, problem.values[st.operands[take.operand]].name,
                           take.if_donated ? "if donated" : "static");
    }
  return "";
}

std::string BufferPlan::ToString(const BufferProblem& problem) const {
  std::string out = fmt::format(
      "buffers {}: arena {} bytes (live at once at most {}), own {}, peak live {}; {} buffers, {} in place, {} if "
      "donated\n",
      problem.title, arena_bytes, Bytes(temp_peak_bytes), Bytes(own_bytes), Bytes(peak_live_bytes), num_buffers,
      num_in_place, num_if_donated);
  // In place "if donated": the operand each such result may take, by result value.
  std::vector<std::string> donor(values.size());
  for (size_t t = 0; t < takes.size(); ++t)
    for (size_t r = 0; r < takes[t].size(); ++r)
      if (takes[t][r].if_donated)
        donor[problem.steps[t].results[r]] = problem.values[problem.steps[t].operands[takes[t][r].operand]].name;
  std::vector<std::vector<int>> members(num_buffers);
  for (size_t v = 0; v < values.size(); ++v)
    if (values[v].buffer >= 0) members[values[v].buffer].push_back(static_cast<int>(v));
  for (const std::vector<int>& m : members) {
    if (m.empty()) continue;
    const Value& head = values[m[0]];
    int begin = head.begin, end = head.end;
    int64_t bytes = 0;
    std::vector<std::string> names, donated;
    for (int v : m) {
      begin = std::min(begin, values[v].begin);
      end = std::max(end, values[v].end);
      bytes = std::max(bytes, problem.values[v].bytes);
      names.push_back(problem.values[v].name);
      if (!donor[v].empty()) donated.push_back(fmt::format("{} into {} if donated", problem.values[v].name, donor[v]));
    }
    std::string where;
    switch (head.storage) {
      case Storage::kArena:
        where = fmt::format("arena +{}", head.offset);
        break;
      case Storage::kOwn:
        where = "own";
        break;
      case Storage::kArgument:
        for (int v : m)
          if (problem.values[v].param >= 0) where = fmt::format("argument {}", problem.values[v].param);
        if (where.empty()) where = "argument";
        break;
      case Storage::kConstant:
        where = "constant";
        break;
    }
    out += fmt::format("  {:<14} {:>10}  steps {}-{}  {}{}\n", where, bytes, begin, end, fmt::join(names, " -> "),
                       donated.empty() ? "" : fmt::format("  ({})", fmt::join(donated, "; ")));
  }
  return out;
}

}  // namespace axle::passes
