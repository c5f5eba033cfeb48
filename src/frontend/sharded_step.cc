#include "frontend/sharded_step.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <mutex>

#include "axle/spmd.h"
#include "core/flags.h"
#include "frontend/calibrate.h"
#include "frontend/lazy.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "spmd/passes.h"

#include "runtime/devices.h"
#include "runtime/disk_cache.h"
#include "runtime/world.h"
#include "spmd/auto_shard.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"

namespace axle::detail {
namespace {

std::mutex g_stats_mu;
runtime::CollectiveStats g_last_stats;

class ShardedExecutable final : public ShardedStep {
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

  std::vector<std::shared_ptr<ShardedData>> ExecuteSharded(std::vector<Arg> args) override {
    // This process's devices: all of the mesh, or its share in a run of several processes.
    const auto n = static_cast<size_t>(exe_->num_devices()), first = static_cast<size_t>(exe_->first_device());
    if (args.size() != params_.size())
      Fail("sharded step: {} arguments for {} parameters", args.size(), params_.size());
    std::vector<std::vector<runtime::BufferPtr>> per_device(n);
    for (size_t i = 0; i < args.size(); ++i) {
      std::shared_ptr<ShardedData> data = std::move(args[i].sharded);
      if (data && !(data->mesh == mesh_ && data->sharding == params_[i])) {
        // Another layout: through the host (a step that wants it so, after one that made it).
        args[i].global = AssembleShards(*data);
        data = nullptr;
      }
      if (data == nullptr) {
        if (params_[i].IsReplicated()) {
          for (auto& d : per_device) d.push_back(args[i].global);  // shared: read only on every device
          continue;
        }
        data = SplitIntoShards(args[i].global, params_[i], mesh_);
      }
      args[i].global = nullptr;
      // A sole reference to the shards lets each device reuse its own (donation).
      const bool sole = data.use_count() == 1;
      for (size_t d = 0; d < n; ++d)
        per_device[d].push_back(sole ? std::move(data->shards[first + d]) : data->shards[first + d]);
    }
    args.clear();
    std::vector<std::vector<runtime::BufferPtr>> out = exe_->Execute(std::move(per_device));
    std::vector<std::shared_ptr<ShardedData>> results;
    for (size_t j = 0; j < results_.size(); ++j) {
      auto r = std::make_shared<ShardedData>();
      r->mesh = mesh_;
      r->sharding = results_[j];
      r->global = result_types_[j];
      r->shards.resize(static_cast<size_t>(mesh_.size()));  // other processes' devices: nullptr
      for (size_t d = 0; d < n; ++d) r->shards[first + d] = std::move(out[d][j]);
      if (results_[j].IsReplicated()) r->shards.assign(r->shards.size(), r->shards[first]);
      results.push_back(std::move(r));
    }
    std::lock_guard<std::mutex> lock(g_stats_mu);
    g_last_stats = exe_->total_collective_stats();
    return results;
  }

  std::vector<runtime::BufferPtr> Execute(std::vector<runtime::BufferPtr> args) override {
    std::vector<Arg> sharded_args;
    for (auto& a : args) sharded_args.push_back({std::move(a), nullptr});
    std::vector<runtime::BufferPtr> results;
    for (const auto& r : ExecuteSharded(std::move(sharded_args))) results.push_back(AssembleShards(*r));
    return results;
  }

  const ir::Mesh& mesh() const override { return mesh_; }
  const ir::Sharding& parameter_sharding(size_t index) const override { return params_.at(index); }
  const ir::Sharding& result_sharding(size_t index) const override { return results_.at(index); }

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

runtime::BufferPtr AssembleShards(const ShardedData& data) {
  if (data.sharding.IsReplicated()) return data.shards.at(static_cast<size_t>(runtime::FirstLocalDevice()));
  std::vector<ir::Literal> shards;
  runtime::World* world = runtime::GetWorld();
  if (world != nullptr && world->size() > 1) {
    // Other processes hold the other shards: every process sends its own (each process reads the
    // same values in the same order: the same program).
    std::vector<uint8_t> mine;
    const int64_t first = runtime::FirstLocalDevice(), local = world->local_devices();
    for (int64_t d = first; d < first + local; ++d) {
      const auto& b = data.shards.at(static_cast<size_t>(d));
      AXLE_CHECK(b != nullptr, "a sharded value of {} was read after a step took its shards", data.global.ToString());
      mine.insert(mine.end(), b->bytes().begin(), b->bytes().end());
    }
    const std::vector<std::vector<uint8_t>> all =
        world->AllGatherBytes(mine, fmt::format("the shards of a {} read whole", data.global.ToString()));
    const ir::TensorType block = data.shards[static_cast<size_t>(first)]->type();
    const size_t bytes = static_cast<size_t>(block.ByteSize());
    for (const std::vector<uint8_t>& from : all) {
      AXLE_CHECK(from.size() == bytes * static_cast<size_t>(local), "a process sent {} bytes of shards for {}",
                 from.size(), data.global.ToString());
      for (int64_t d = 0; d < local; ++d) {
        shards.push_back(ir::Literal::Uninitialized(block));
        if (bytes > 0) std::memcpy(shards.back().mutable_bytes().data(), from.data() + bytes * d, bytes);
      }
    }
  } else {
    for (const auto& b : data.shards) {
      AXLE_CHECK(b != nullptr, "a sharded value of {} was read after a step took its shards", data.global.ToString());
      shards.push_back(*b);
    }
  }
  auto out = std::make_shared<ir::Literal>(spmd::AssembleLiteral(shards, data.sharding, data.mesh, data.global));
  CountHostReshard(static_cast<int64_t>(out->bytes().size()));
  return out;
}

std::shared_ptr<ShardedData> SplitIntoShards(const runtime::BufferPtr& global, const ir::Sharding& sharding,
                                             const ir::Mesh& mesh) {
  auto data = std::make_shared<ShardedData>();
  data->mesh = mesh;
  data->sharding = spmd::NormalizeSharding(sharding, global->type().rank(), mesh);
  data->global = global->type();
  if (data->sharding.IsReplicated()) {
    data->shards.assign(static_cast<size_t>(mesh.size()), global);
    return data;
  }
  data->shards.resize(static_cast<size_t>(mesh.size()));  // other processes' devices: nullptr
  for (int64_t d = 0; d < mesh.size(); ++d)
    if (runtime::IsLocalDevice(d))
      data->shards[static_cast<size_t>(d)] =
          std::make_shared<ir::Literal>(spmd::ShardLiteral(*global, data->sharding, mesh, d));
  CountHostReshard(static_cast<int64_t>(global->bytes().size()));
  return data;
}

std::optional<spmd::AutoShardReport>& LastAutoShardReport() {
  static std::optional<spmd::AutoShardReport> r;
  return r;
}

namespace {

// The bytes of an annotated step's parameters on one device.
int64_t ArgumentBytesPerDevice(const ir::Module& annotated) {
  int64_t bytes = 0;
  for (const ir::Node* p : annotated.entry()->Parameters()) {
    const ir::Value* v = p->result();
    const ir::Sharding s = spmd::NormalizeSharding(v->sharding(), v->type().rank(), *annotated.mesh());
    bytes += spmd::LocalShape(v->shape(), s, *annotated.mesh()).NumElements() * DTypeSize(v->dtype());
  }
  return bytes;
}

// Note [Timing the close candidates]
// Where the cost model prices candidate plans within a few percent of each other it cannot tell
// them apart (on 8 virtual devices over 2 cores, Llama small's data-parallel and FSDP plans were
// priced alike while data parallel ran 25-35% faster), so those are compiled and run on the
// devices, as XLA autotunes a GEMM: each on zero arguments (the work does not depend on the
// values), interleaved over three rounds, the best of each kept; the fastest wins. Only in one
// process: a run of several would have to time together, and adopts process 0's plan anyway.
double TimeOnDevices(runtime::ReplicatedExecutable& exe, const ir::Module& partitioned) {
  auto params = partitioned.entry()->Parameters();
  std::sort(params.begin(), params.end(), [](const ir::Node* a, const ir::Node* b) {
    return a->attrs_as<ir::ParameterAttrs>().index < b->attrs_as<ir::ParameterAttrs>().index;
  });
  std::vector<std::vector<runtime::BufferPtr>> args(static_cast<size_t>(exe.num_devices()));
  for (auto& device : args)
    for (const ir::Node* p : params) device.push_back(std::make_shared<ir::Literal>(p->result()->type()));
  const auto t0 = std::chrono::steady_clock::now();
  exe.Execute(std::move(args));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Note [Auto-sharded plans are kept]
// A step's auto-sharded layouts are computed once per build: the annotated module is kept in the
// on-disk cache under the global module's hash, the mesh, the options, the tied pairs and the
// cost model, so a second run neither solves again (tens of seconds on a two-axis mesh) nor, where
// the solver stopped at its time limit, chooses differently (the same program gives the same
// bits). In a run of several processes every process adopts process 0's plan: a solver stopped
// by a clock may differ between processes, and their partitioned programs must not.
std::unique_ptr<ir::Module> AutoShardStep(runtime::Backend& backend, const ir::Module& global,
                                          const std::vector<std::pair<int64_t, int64_t>>& tied) {
  const spmd::AutoShardingOptions* o = spmd::get_auto_shard_options();
  AXLE_CHECK(o != nullptr, "CompileShardedStep: auto-sharded without spmd::auto_shard");
  runtime::World* world = runtime::GetWorld();
  const bool one_process = world == nullptr || world->size() == 1;
  spmd::AutoShardOptions ao;
  ao.memory_bound_bytes = o->memory_bound_bytes;
  ao.time_limit_s = o->time_limit_s;
  ao.use_ilp = o->use_ilp;
  ao.tied = tied;
  ao.alternatives_within = one_process ? o->time_candidates_within : 0;
  const spmd::CostModel model = CalibratedCostModel(global.mesh()->shape(), flags::cpu_devices());
  std::string tied_text;
  for (const auto& [r, p] : tied) tied_text += fmt::format("{}:{},", r, p);
  runtime::DiskCache& cache = runtime::DiskCache::Default();
  const std::string key = runtime::DiskCache::MakeKey(ir::HashModule(global).ToHex() + "_autoshard_" +
                                                      fmt::format("{:016x}", runtime::Fnv1a64(fmt::format(
                                                          "{}|{}|{}|{}|{}|{}|{}", global.mesh()->ToString(),
                                                          ao.memory_bound_bytes, ao.time_limit_s, ao.use_ilp,
                                                          ao.alternatives_within, tied_text,
                                                          model.ToJson().dump()))));
  std::unique_ptr<ir::Module> local;
  bool kept_plan = false;
  if (std::optional<std::string> kept = cache.Get(key)) {
    try {
      local = ir::ParseModule(*kept, "the auto-sharding cache");
      ir::Verify(*local);
      kept_plan = true;
      // Nothing was solved: the report says so (no `chosen`) and what the layouts hold per device.
      spmd::AutoShardReport r;
      r.solver = "kept in the disk cache";
      r.nodes = static_cast<int64_t>(local->entry()->nodes().size());
      r.argument_bytes = ArgumentBytesPerDevice(*local);
      r.memory_bound_met = ao.memory_bound_bytes <= 0 || r.argument_bytes <= ao.memory_bound_bytes;
      LastAutoShardReport() = r;
    } catch (const Error&) {
      local.reset();  // not a module of ours: solve again
    }
  }
  if (!local) {
    local = global.Clone();
    spmd::AutoShardReport r = spmd::AutoShard(*local, model, ao);
    if (!r.alternatives.empty()) {  // Note [Timing the close candidates]
      struct Timed {
        std::string name;
        std::shared_ptr<const ir::Module> annotated;
        std::unique_ptr<runtime::ReplicatedExecutable> exe;
        std::unique_ptr<ir::Module> partitioned;
        double best_s = 1e30;
      };
      std::vector<Timed> timed;
      timed.push_back({r.chosen, std::shared_ptr<const ir::Module>(local->Clone()), nullptr, nullptr});
      for (const auto& a : r.alternatives) timed.push_back({a.name, a.module, nullptr, nullptr});
      for (Timed& t : timed) {
        t.partitioned = t.annotated->Clone();
        passes::BuildPipeline(backend.target(), {.spmd = true}).Through("partition").Run(*t.partitioned);
        t.exe = runtime::ReplicatedExecutable::Compile(backend, *t.partitioned);
        TimeOnDevices(*t.exe, *t.partitioned);  // warm-up
      }
      for (int round = 0; round < 3; ++round)
        for (Timed& t : timed) t.best_s = std::min(t.best_s, TimeOnDevices(*t.exe, *t.partitioned));
      size_t fastest = 0;
      for (size_t i = 1; i < timed.size(); ++i)
        if (timed[i].best_s < timed[fastest].best_s) fastest = i;
      for (const Timed& t : timed) r.candidates.push_back(fmt::format("{} timed at {:.4f} s a step", t.name, t.best_s));
      if (fastest != 0) {
        local = timed[fastest].annotated->Clone();
        r.argument_bytes = ArgumentBytesPerDevice(*local);
        for (const auto& a : r.alternatives)
          if (a.name == timed[fastest].name) r.evaluated_s = a.evaluated_s;
      }
      r.chosen = fmt::format("{} (timed fastest of {})", timed[fastest].name, timed.size());
      r.alternatives.clear();
    }
    if (flags::debug())
      std::cerr << fmt::format("auto-sharding of step @{}: {} in {:.2f} s ({} nodes, {} decisions), chose {} at {:.4f} s "
                               "a step, {:.1f} MB of arguments per device\n",
                               global.name(), r.solver, r.total_s, r.nodes, r.variable_sets, r.chosen, r.evaluated_s,
                               static_cast<double>(r.argument_bytes) / 1e6);
    LastAutoShardReport() = r;
  }
  if (runtime::World* world = runtime::GetWorld(); world != nullptr && world->size() > 1) {
    const std::string mine = ir::PrintModule(*local);
    const auto all = world->AllGatherBytes({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()},
                                           fmt::format("the auto-sharded layouts of step @{}", global.name()));
    if (world->rank() != 0) local = ir::ParseModule(std::string(all[0].begin(), all[0].end()), "process 0's plan");
  }
  if (!kept_plan) cache.Put(key, ir::PrintModule(*local));
  return local;
}

}  // namespace

std::unique_ptr<ShardedStep> CompileShardedStep(runtime::Backend& backend, const ir::Module& global,
                                                bool auto_sharded,
                                                const std::vector<std::pair<int64_t, int64_t>>& tied) {
  if (!global.mesh() || global.mesh()->size() == 1) return nullptr;
  // The compiler's pipeline through partitioning (passes::BuildPipeline); the backend runs the
  // per-device stages after it. The module after propagation is the step's interface: its
  // parameters' and results' shardings.
  spmd::RegisterPasses();
  if (runtime::World* world = runtime::GetWorld(); world != nullptr && world->size() > 1) {
    // Every process compiles the same step (they run one program): a different module means
    // different flags or data-dependent tracing, found here rather than as a hang or wrong values.
    const std::string mine = ir::HashModule(global).ToHex();
    const auto all = world->AllGatherBytes({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()},
                                           fmt::format("the hash of step @{}", global.name()));
    for (size_t r = 0; r < all.size(); ++r)
      if (std::string(all[r].begin(), all[r].end()) != mine)
        Fail("process {} traced another step than process {} (module hash {} there, {} here): every process must "
             "run the same program with the same flags; AXLE_DUMP_DIR=DIR writes each process's step to compare",
             r, world->rank(), std::string(all[r].begin(), all[r].end()).substr(0, 12), mine.substr(0, 12));
  }
  std::unique_ptr<ir::Module> local = global.Clone();
  if (auto_sharded) local = AutoShardStep(backend, global, tied);
  std::unique_ptr<ir::Module> annotated;
  passes::BuildPipeline(backend.target(), {.spmd = true})
      .Through("partition")
      .Run(*local, [&](std::string_view stage, const ir::Module& m) {
        if (stage == "propagate") annotated = m.Clone();
      });
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
