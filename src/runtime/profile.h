// AXLE_PROFILE=1: wall time of every kernel the cpu and compiled backends run, summed per label
// ("dot_general f32[256,768] x f32[768,3072]", "fused{sub,mul,exp}[786432]"), printed to stderr
// at exit as a table of the top kernels (calls, total ms, share, GB/s of the bytes they touch, ms
// of the calls that ran on one thread).
// The executors label their steps at compile time only when the flag is on; off, a step costs
// one branch.
//
// AXLE_TRACE=FILE: a timeline of the run, written to FILE at exit in the Chrome trace event format
// (open it in Perfetto, ui.perfetto.dev, or chrome://tracing): one span per kernel on the thread
// that ran it (a pair of products, Note [Products side by side], on the two threads), one per
// chunk a pool worker ran (named after the call's kernel), one per executable run on the
// executing thread and one per sync() on the host. The table says how long each kernel took; the
// timeline says when, on which thread, and where a thread waited (a pool worker with no chunk
// spans, a host still tracing while the step runs inline). Spans past kMaxTraceEvents are counted
// and dropped. Same labels as the table.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/module.h"

namespace axle::runtime::profile {

bool Enabled();

// Adds one call of `label` taking `seconds` and touching `bytes` (operands + results); `parallel`:
// it split work over the thread pool (the report shows the time of the calls that ran on one
// thread, while the pool's other threads waited). Thread safe.
void Record(const std::string& label, double seconds, int64_t bytes, bool parallel = true);

// The table (the `top` labels by total time) and the total; empty when nothing was recorded.
std::string Report(int top = 30);

// "dot_general f32[256,768], f32[768,3072] -> f32[256,3072]".
std::string NodeLabel(const ir::Node& n);

// Forgets everything recorded (tests).
void Reset();

// --- AXLE_TRACE ---
using Clock = std::chrono::steady_clock;
inline constexpr int64_t kMaxTraceEvents = 4'000'000;

// True when AXLE_TRACE names a file (read once; the file is written at exit).
bool TraceEnabled();
// Whether the executors make kernel labels: for the table, the timeline or both.
inline bool Labeling() { return Enabled() || TraceEnabled(); }

// A span named `name` on the calling thread. Thread safe; a no-op when tracing is off.
void TraceSpan(std::string_view name, Clock::time_point begin, Clock::time_point end);

// Records a span from construction to destruction (nothing when tracing is off, or `name` empty).
class TraceScope {
 public:
  explicit TraceScope(std::string_view name) : on_(TraceEnabled() && !name.empty()), name_(name) {
    if (on_) begin_ = Clock::now();
  }
  ~TraceScope() {
    if (on_) TraceSpan(name_, begin_, Clock::now());
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool on_;
  std::string_view name_;
  Clock::time_point begin_;
};

// The spans recorded so far as Chrome trace JSON ({"traceEvents": [...]}: "X" events in
// microseconds since the first span, thread-name metadata, dropped spans in "otherData").
std::string TraceJson();
// Forgets the recorded spans (tests).
void ResetTrace();
// Turns recording on or off regardless of AXLE_TRACE (tests; nothing is written at exit).
void SetTraceForTesting(bool on);

}  // namespace axle::runtime::profile
