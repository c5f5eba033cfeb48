#include "runtime/profile.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/file.h"
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
  double products = 0;  // BLAS's share against the generated kernels'
  for (const auto& [l, e] : rows) {
    total += e.seconds, serial += e.serial_seconds, calls += e.calls;
    if (l.rfind("dot_general", 0) == 0) products += e.seconds;
  }
  std::string s = fmt::format(
      "axle profile: {} kernel calls, {:.3f} s in {} distinct kernels, {:.3f} s of it on one thread, "
      "{:.3f} s in dot_general (AXLE_PROFILE)\n",
      calls, total, rows.size(), serial, products);
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

// --- AXLE_TRACE ---
namespace {

struct Span {
  int name;
  int thread;
  int64_t begin_ns, dur_ns;
};

struct Trace {
  std::mutex mu;
  std::vector<Span> spans;
  std::vector<std::string> names;
  std::unordered_map<std::string, int> name_index;
  std::vector<std::string> threads;  // index: the thread's number in the trace
  int64_t dropped = 0;
};
Trace& GetTrace() {
  static auto* t = new Trace;  // never destroyed: threads may record during static destruction
  return *t;
}
std::atomic<bool> g_trace_on{false};
thread_local int tls_thread = -1;

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void WriteTraceAtExit() {
  const std::string path = flags::trace();
  try {
    WriteFileAtomically(path, TraceJson(), "AXLE_TRACE's timeline");
  } catch (const Error& e) {
    std::fprintf(stderr, "axle: %s (check that the directory exists and is writable)\n", e.what());
    return;
  }
  std::fprintf(stderr, "axle trace: %s (open it in ui.perfetto.dev or chrome://tracing)\n", path.c_str());
}

}  // namespace

bool TraceEnabled() {
  static const bool from_flag = [] {
    const bool v = !flags::trace().empty();
    if (v) {
      g_trace_on.store(true, std::memory_order_relaxed);
      std::atexit(WriteTraceAtExit);
    }
    return v;
  }();
  (void)from_flag;
  return g_trace_on.load(std::memory_order_relaxed);
}

void SetTraceForTesting(bool on) {
  (void)TraceEnabled();
  g_trace_on.store(on, std::memory_order_relaxed);
}

void TraceSpan(std::string_view name, Clock::time_point begin, Clock::time_point end) {
  if (!TraceEnabled()) return;
  Trace& t = GetTrace();
  std::lock_guard<std::mutex> lock(t.mu);
  if (static_cast<int64_t>(t.spans.size()) >= kMaxTraceEvents) {
    ++t.dropped;
    return;
  }
  if (tls_thread < 0) {
    char buf[32] = {0};
    if (pthread_getname_np(pthread_self(), buf, sizeof buf) != 0 || buf[0] == 0)
      std::snprintf(buf, sizeof buf, "thread %zu", t.threads.size());
    tls_thread = static_cast<int>(t.threads.size());
    t.threads.emplace_back(buf);
  }
  auto [it, fresh] = t.name_index.try_emplace(std::string(name), static_cast<int>(t.names.size()));
  if (fresh) t.names.emplace_back(name);
  t.spans.push_back({it->second, tls_thread, Nanos(begin), Nanos(end) - Nanos(begin)});
}

std::string TraceJson() {
  Trace& t = GetTrace();
  std::lock_guard<std::mutex> lock(t.mu);
  int64_t origin = t.spans.empty() ? 0 : t.spans[0].begin_ns;
  for (const Span& s : t.spans) origin = std::min(origin, s.begin_ns);
  // Written event by event (a full trace is millions of them); only the strings go through
  // nlohmann's escaping, each once.
  std::vector<std::string> names;
  names.reserve(t.names.size());
  for (const std::string& n : t.names) names.push_back(nlohmann::json(n).dump());
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ',';
    first = false;
  };
  for (size_t k = 0; k < t.threads.size(); ++k) {
    sep();
    out += fmt::format(R"({{"name":"thread_name","ph":"M","pid":0,"tid":{},"args":{{"name":{}}}}})", k,
                       nlohmann::json(t.threads[k]).dump());
  }
  for (const Span& s : t.spans) {
    sep();
    out += fmt::format(R"({{"name":{},"ph":"X","pid":0,"tid":{},"ts":{:.3f},"dur":{:.3f}}})",
                       names[static_cast<size_t>(s.name)], s.thread, static_cast<double>(s.begin_ns - origin) / 1e3,
                       static_cast<double>(s.dur_ns) / 1e3);
  }
  out += fmt::format(
      R"J(],"displayTimeUnit":"ms","otherData":{{"producer":"axle (AXLE_TRACE)","dropped_spans":{}}}}})J", t.dropped);
  return out;
}

void ResetTrace() {
  Trace& t = GetTrace();
  std::lock_guard<std::mutex> lock(t.mu);
  t.spans.clear();
  t.dropped = 0;
}

}  // namespace axle::runtime::profile
