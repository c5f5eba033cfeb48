// Running a traced step whose values carry shardings (include/axle/spmd.h) on the process's
// virtual devices: sharding propagation, the partitioner, one compile of the per-device program,
// one ReplicatedExecutable step per Execute (docs/spmd.md, "Sharded steps").
//
// Values stay on their devices between steps: a step returns each result as its devices' shards
// (ShardedData), and a later step that wants the same layout takes the shards as they are. Only a
// value read whole (item(), to_vector) or passed in another layout is assembled or split on the
// host, and Metrics::host_reshards counts those.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ir/module.h"
#include "runtime/backend.h"
#include "runtime/collectives.h"
#include "spmd/auto_shard.h"

namespace axle::detail {

// A value held as its devices' shards: shards[d] is device d's local block (padded where the
// layout does not divide a dimension evenly). A replicated value shares one buffer.
struct ShardedData {
  ir::Mesh mesh;
  ir::Sharding sharding;  // normalized for `global` (spmd::NormalizeSharding)
  ir::TensorType global;
  std::vector<runtime::BufferPtr> shards;
};

// The global value of `data` (a copy, counted in Metrics::host_reshards unless it is replicated).
runtime::BufferPtr AssembleShards(const ShardedData& data);
// `global` split into the shards of `sharding` over `mesh` (counted likewise).
std::shared_ptr<ShardedData> SplitIntoShards(const runtime::BufferPtr& global, const ir::Sharding& sharding,
                                             const ir::Mesh& mesh);

// The report of the last step spmd::auto_shard compiled (what `axle train --mesh auto` prints); for
// layouts kept in the disk cache, one without `chosen` that gives their argument bytes per device.
std::optional<spmd::AutoShardReport>& LastAutoShardReport();

// The executable of a partitioned step.
class ShardedStep : public runtime::Executable {
 public:
  // An argument: whole (`global`) or as shards (`sharded`). Shards in the parameter's layout are
  // used as they are (and donated when the caller held the only reference); others are
  // re-laid out on the host.
  struct Arg {
    runtime::BufferPtr global;
    std::shared_ptr<ShardedData> sharded;
  };
  virtual std::vector<std::shared_ptr<ShardedData>> ExecuteSharded(std::vector<Arg> args) = 0;

  virtual const ir::Mesh& mesh() const = 0;
  // The layouts of the step's parameters and results (normalized).
  virtual const ir::Sharding& parameter_sharding(size_t index) const = 0;
  virtual const ir::Sharding& result_sharding(size_t index) const = 0;
};

// When `global` has a mesh of more than one device: propagates its shardings (a copy), partitions
// it and compiles the per-device program with `backend`. The executable takes and returns global
// buffers to Execute (split into shards and assembled on the host) and shards to ExecuteSharded.
// Returns nullptr when `global` needs no partitioning (no mesh, or a mesh of one device).
// `auto_sharded`: first every value's layout is chosen by spmd::AutoShard (annotations kept) with
// the cost model calibrated for the mesh and spmd::auto_shard's options; `tied` (result, parameter)
// pairs keep their layouts equal.
std::unique_ptr<ShardedStep> CompileShardedStep(runtime::Backend& backend, const ir::Module& global,
                                                bool auto_sharded = false,
                                                const std::vector<std::pair<int64_t, int64_t>>& tied = {});

// The collective counters of the last sharded step run by this process (summed over devices),
// and its per-device parameter bytes (for the training log).
runtime::CollectiveStats LastCollectiveStats();

}  // namespace axle::detail
