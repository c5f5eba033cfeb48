#include "frontend/sharded_step.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/flags.h"
#include "ir/hash.h"
#include "ir/printer.h"

#include "runtime/devices.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"

namespace axle::detail {
namespace {

std::mutex g_stats_mu;
runtime::CollectiveStats g_last_stats;

bool Replicated(const ir::Sharding& s) {
  for (const auto& d : s.dims)
    if (!d.empty()) return false;
  return s.partial.empty();
}

// Global buffers in, global buffers out; the devices see their shards. Sharding and assembling
// copy every argument and result once per step: simple and exact, and the next step is to keep
// shards resident on their devices between steps (docs/spmd.md, "Status").
class ShardedExecutable final : public runtime::Executable {
 public:
  ShardedExecutable(const ir::Module& global, std::unique_ptr<runtime::ReplicatedExecutable> exe)
      : mesh_(*global.mesh()), exe_(std::move(exe)) {
    const ir::Function& f = *global.entry();
    for (const ir::Node* p : f.Parameters()) {
      const int64_t index = p->attrs_as<ir::ParameterAttrs>().index;
      if (static_cast<int64_t>(params_.size()) <= index) params_.resize(static_cast<size_t>(index) + 1);
      params_[static_cast<size_t>(index)] = spmd::ParameterSharding(global, index);
    }
    for (size_t j = 0; j < f.results().size(); ++j) {
      results_.push_back(spmd::ResultSharding(global, static_cast<int64_t>(j)));
      result_types_.push_back(f.results()[j]->type());
    }
  }

  std::vector<runtime::BufferPtr> Execute(std::vector<runtime::BufferPtr> args) override {
    const int64_t n = mesh_.size();
    if (args.size() != params_.size())
      Fail("sharded step: {} arguments for {} parameters", args.size(), params_.size());
    std::vector<std::vector<runtime::BufferPtr>> per_device(static_cast<size_t>(n));
    for (size_t i = 0; i < args.size(); ++i) {
      if (Replicated(params_[i])) {
        for (auto& d : per_device) d.push_back(args[i]);  // shared: read only on every device
        continue;
      }
      for (int64_t d = 0; d < n; ++d)
        per_device[static_cast<size_t>(d)].push_back(
            std::make_shared<ir::Literal>(spmd::ShardLiteral(*args[i], params_[i], mesh_, d)));
    }
    args.clear();
    std::vector<std::vector<runtime::BufferPtr>> out = exe_->Execute(std::move(per_device));
    std::vector<runtime::BufferPtr> results;
    for (size_t j = 0; j < results_.size(); ++j) {
      if (Replicated(results_[j])) {
        results.push_back(out[0][j]);
        continue;
      }
      std::vector<ir::Literal> shards;
      for (int64_t d = 0; d < n; ++d) shards.push_back(std::move(*out[static_cast<size_t>(d)][j]));
      results.push_back(
          std::make_shared<ir::Literal>(spmd::AssembleLiteral(shards, results_[j], mesh_, result_types_[j])));
    }
    std::lock_guard<std::mutex> lock(g_stats_mu);
    g_last_stats = exe_->total_collective_stats();
    return results;
  }

  runtime::ExecuteStats last_stats() const override {
    runtime::ExecuteStats total;
    for (const auto& s : exe_->last_stats()) {
      total.kernels_run += s.kernels_run;
      total.donated_reused += s.donated_reused;
      total.peak_bytes = std::max(total.peak_bytes, s.peak_bytes);
      total.fallback_kernels += s.fallback_kernels;
    }
    return total;
  }

 private:
  ir::Mesh mesh_;
  std::unique_ptr<runtime::ReplicatedExecutable> exe_;
  std::vector<ir::Sharding> params_, results_;
  std::vector<ir::TensorType> result_types_;
};

}  // namespace

std::unique_ptr<runtime::Executable> CompileShardedStep(runtime::Backend& backend, const ir::Module& global) {
  if (!global.mesh() || global.mesh()->size() == 1) return nullptr;
  std::unique_ptr<ir::Module> annotated = global.Clone();
  spmd::PropagateShardings(*annotated);
  std::unique_ptr<ir::Module> local = spmd::Partition(*annotated);
  if (const std::string dir = flags::dump_dir(); !dir.empty()) {
    // AXLE_DUMP_DIR: the step after propagation and after partitioning, next to the passes' dumps.
    std::filesystem::create_directories(dir);
    const std::string base = fmt::format("{}/{}-{}", dir, global.name(), ir::HashModule(global).ToHex().substr(0, 12));
    std::ofstream(base + ".propagated.axir", std::ios::binary) << ir::PrintModule(*annotated);
    std::ofstream(base + ".partitioned.axir", std::ios::binary) << ir::PrintModule(*local);
  }
  auto exe = runtime::ReplicatedExecutable::Compile(backend, *local);
  const runtime::CompileInfo info = exe->executable().compile_info();
  auto out = std::make_unique<ShardedExecutable>(*annotated, std::move(exe));
  out->set_compile_info(info);
  return out;
}

runtime::CollectiveStats LastCollectiveStats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_last_stats;
}

}  // namespace axle::detail
