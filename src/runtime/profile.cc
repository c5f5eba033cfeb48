#include "runtime/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/flags.h"

namespace axle::runtime::profile {
namespace {

struct Entry {
  int64_t calls = 0;
  double seconds = 0;
  double serial_seconds = 0;  // of the calls that ran on one thread
  int64_t bytes = 0;
};

std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::map<std::string, Entry>& Table() {
  static auto* t = new std::map<std::string, Entry>;
  return *t;
}

void PrintAtExit() {
  const std::string r = Report();
  if (!r.empty()) std::fputs(r.c_str(), stderr);
}

}  // namespace

bool Enabled() {
  static const bool on = [] {
    const bool v = flags::profile();
    if (v) std::atexit(PrintAtExit);
    return v;
  }();
  return on;
}

void Record(const std::string& label, double seconds, int64_t bytes, bool parallel) {
  std::lock_guard<std::mutex> lock(Mu());
  Entry& e = Table()[label];
  ++e.calls;
  e.seconds += seconds;
  if (!parallel) e.serial_seconds += seconds;
  e.bytes += bytes;
}

std::string Report(int top) {
  std::vector<std::pair<std::string, Entry>> rows;
  {
    std::lock_guard<std::mutex> lock(Mu());
    rows.assign(Table().begin(), Table().end());
  }
  if (rows.empty()) return "";
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0, serial = 0;
  int64_t calls = 0;
  for (const auto& [l, e] : rows) total += e.seconds, serial += e.serial_seconds, calls += e.calls;
  std::string s = fmt::format(
      "axle profile: {} kernel calls, {:.3f} s in {} distinct kernels, {:.3f} s of it on one thread (AXLE_PROFILE)\n",
      calls, total, rows.size(), serial);
  s += fmt::format("{:>9} {:>10} {:>6} {:>7} {:>9}  {}\n", "calls", "total ms", "share", "GB/s", "1-thr ms", "kernel");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < top; ++i) {
    const auto& [label, e] = rows[i];
    s += fmt::format("{:>9} {:>10.1f} {:>5.1f}% {:>7.1f} {:>9.1f}  {}\n", e.calls, e.seconds * 1e3,
                     total > 0 ? 100 * e.seconds / total : 0.0, e.seconds > 0 ? e.bytes / e.seconds / 1e9 : 0.0,
                     e.serial_seconds * 1e3, label);
  }
  return s;
}

std::string NodeLabel(const ir::Node& n) {
  std::vector<std::string> ops, res;
  for (const ir::Value* v : n.operands()) ops.push_back(v->type().ToString());
  for (const ir::Value* v : n.results()) res.push_back(v->type().ToString());
  return fmt::format("{} {} -> {}", n.name(), fmt::join(ops, ", "), fmt::join(res, ", "));
}

void Reset() {
  std::lock_guard<std::mutex> lock(Mu());
  Table().clear();
}

}  // namespace axle::runtime::profile
