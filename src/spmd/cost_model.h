// The cost model that prices a sharding plan (docs/spmd.md, "The cost model"): the alpha-beta
// model of collectives (Hockney's; the one XLA's auto-sharding and Alpa use), products at a
// measured throughput, every other op at a measured memory bandwidth.
//
//   CostModel m = CostModel::Default();                        // or one calibrated on this machine
//   m.CollectiveSeconds(Collective::kAllReduce, 8, 4 << 20);    // an all-reduce of 4 MiB over 8
//
// A collective over a group of g devices moving n bytes (the whole value: an all-reduce's
// operand, an all-gather's result, a reduce-scatter's or all-to-all's operand) costs what the
// bandwidth-optimal ring algorithms cost:
//   all_reduce              2 (g-1) alpha + 2 (g-1)/g n beta
//   all_gather, reduce_scatter, all_to_all
//                             (g-1) alpha +   (g-1)/g n beta
//   collective_permute            alpha   +           n beta
// alpha (seconds per message) and beta (seconds per byte) are fitted per collective kind and
// group size on the transport that will run the step (frontend/calibrate.h measures them;
// virtual devices, Gloo and NCCL differ by orders of magnitude) and cached. A group size that was
// not measured (a plan for 256 simulated devices) takes the fit of the nearest measured size: the
// formula carries the growth in g.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json_fwd.hpp>

namespace axle::spmd {

enum class Collective : uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kCollectivePermute };

// "all_reduce", ... (the IR op names).
std::string_view CollectiveName(Collective kind);

struct AlphaBeta {
  double alpha_s = 0;          // seconds per message (latency)
  double beta_s_per_byte = 0;  // seconds per byte (inverse bandwidth)
};

// The coefficients of alpha and of n * beta in the formula above for a group of g devices.
std::pair<double, double> CollectiveTerms(Collective kind, int64_t group_size);

struct CostModel {
  // What the figures describe: "virtual devices (8 in one process)", "default (not measured)".
  std::string source = "default (not measured)";
  // One device's throughput: f32 products (flop/s), and the bytes other ops read and write per
  // second. Devices that share cores (virtual devices in one process) each get their share.
  double product_flops_per_s = 25e9;
  double memory_bytes_per_s = 5e9;
  // By (kind, group size).
  std::map<std::pair<Collective, int64_t>, AlphaBeta> fits;

  // Seconds for one collective of `kind` over `group_size` devices moving `bytes` (see above);
  // 0 for a group of one. Without a fit for the kind: alpha 20 us, beta 1 / (1 GB/s).
  double CollectiveSeconds(Collective kind, int64_t group_size, int64_t bytes) const;

  // Fixed round figures, no machine's: what a plan is priced with when nothing was measured;
  // their ratios, not their values, decide between plans.
  static CostModel Default();

  nlohmann::json ToJson() const;
  // Throws axle::Error naming the field when `j` is not a cost model ToJson wrote.
  static CostModel FromJson(const nlohmann::json& j);
  // A few lines for `axle shard-plan`: the throughputs and each fit.
  std::string Describe() const;
};

}  // namespace axle::spmd
