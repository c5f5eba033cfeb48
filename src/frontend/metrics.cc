// The lazy runtime's metrics (include/axle/metrics.h): one struct under a mutex, written by the
// tracing thread and the execution thread.
#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "axle/metrics.h"
#include "frontend/lazy.h"
#include "frontend/ops_internal.h"
#include "passes/pass.h"

namespace axle::detail {
namespace {
std::mutex g_metrics_mu;
Metrics g_metrics;
}  // namespace

void UpdateMetrics(const std::function<void(Metrics&)>& f) {
  std::lock_guard<std::mutex> lock(g_metrics_mu);
  f(g_metrics);
}

void CountHostReshard(int64_t bytes) {
  UpdateMetrics([&](Metrics& m) {
    ++m.host_reshards;
    m.host_reshard_bytes += bytes;
  });
}

void CountTransferToDevice(int64_t bytes) {
  UpdateMetrics([&](Metrics& m) {
    ++m.to_device;
    m.to_device_bytes += bytes;
  });
}

int64_t CountSync() {
  int64_t number = 0;
  UpdateMetrics([&](Metrics& m) { number = ++m.syncs; });
  return number;
}

}  // namespace axle::detail

namespace axle {

namespace {
// passes::PassesRun() at the last reset_metrics(): the passes counter is the compiler's own.
std::atomic<int64_t> g_passes_at_reset{0};
}  // namespace

Metrics metrics() {
  Metrics copy;
  detail::UpdateMetrics([&](Metrics& m) { copy = m; });
  copy.passes_run = passes::PassesRun() - g_passes_at_reset.load();
  return copy;
}

void reset_metrics() {
  detail::UpdateMetrics([](Metrics& m) { m = Metrics{}; });
  g_passes_at_reset.store(passes::PassesRun());
}

std::string metrics_report() {
  const Metrics m = metrics();
  std::string s;
  s += fmt::format("Metric: syncs              {}\n", m.syncs);
  s += fmt::format("Metric: compiles           {}\n", m.compiles);
  s += fmt::format("Metric: disk cache hits    {}\n", m.disk_hits);
  s += fmt::format("Metric: memory cache hits  {}\n", m.cache_hits);
  s += fmt::format("Metric: replayed steps     {} (compiled functions, not traced)\n", m.replays);
  s += fmt::format("Metric: compile time       {:.3f} s (compiles and disk loads)\n", m.compile_s);
  s += fmt::format("Metric: passes run         {}\n", m.passes_run);
  s += fmt::format("Metric: execute time       {:.3f} s\n", m.execute_s);
  s += fmt::format("Metric: trace cut + hash   {:.3f} s\n", m.trace_cut_s);
  s += fmt::format("Metric: to device          {} transfers, {} bytes\n", m.to_device,
                   m.to_device_bytes);
  s += fmt::format("Metric: to host            {} transfers, {} bytes\n", m.to_host,
                   m.to_host_bytes);
  s += fmt::format("Metric: donated buffers    {}\n", m.donated);
  s += fmt::format("Metric: host reshards      {} ({} bytes split into or assembled from shards)\n",
                   m.host_reshards, m.host_reshard_bytes);
  s += fmt::format("Metric: graph size         last {} nodes ({} inputs, {} outputs), max {}\n",
                   m.last_graph_nodes, m.last_graph_inputs, m.last_graph_outputs,
                   m.max_graph_nodes);
  return s;
}

}  // namespace axle
