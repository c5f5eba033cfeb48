// What the lazy runtime did, for users who want to see their recompilations (PyTorch/XLA's
// metrics_report, with the counters as a struct too).
//
//   std::cout << axle::metrics_report();
//
// With AXLE_DEBUG=1 every cache miss after the first also prints, to stderr, one paragraph saying
// how the new graph differs from the closest cached one (an input's shape or dtype, or the first
// differing node and the user call or module that built it).
#pragma once
#include <cstdint>
#include <string>

namespace axle {

struct Metrics {
  int64_t syncs = 0;             // sync() calls that launched a step
  int64_t compiles = 0;          // graphs compiled (missed the in-memory and the on-disk cache)
  int64_t disk_hits = 0;         // graphs whose compiled code came from the on-disk cache
  int64_t cache_hits = 0;        // graphs found in the in-memory executable cache
  int64_t replays = 0;           // of those, steps a CompiledFunction launched without tracing
  double compile_s = 0;          // total seconds getting executables (compiles + disk loads; tracing excluded)
  int64_t passes_run = 0;        // compiler passes run (0 on a warm start: optimized modules come from the disk cache)
  double execute_s = 0;          // total seconds of step execution (on the execution thread)
  double trace_cut_s = 0;        // total seconds cutting and hashing graphs
  int64_t to_device = 0;         // host -> device transfers and their bytes
  int64_t to_device_bytes = 0;
  int64_t to_host = 0;           // device -> host transfers (item, to_vector, printing)
  int64_t to_host_bytes = 0;
  int64_t donated = 0;           // argument buffers donated to steps
  int64_t host_reshards = 0;     // sharded values split or assembled on the host (read whole, or
  int64_t host_reshard_bytes = 0;  // passed to a step in another layout); 0 in a steady sharded loop
  int64_t last_graph_nodes = 0;  // nodes of the last launched graph
  int64_t max_graph_nodes = 0;
  int64_t last_graph_inputs = 0;
  int64_t last_graph_outputs = 0;
};

Metrics metrics();
std::string metrics_report();
void reset_metrics();

}  // namespace axle
