#include "frontend/calibrate.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "axle/tensor.h"
#include "core/error.h"
#include "ir/builder.h"
#include "backends/registry.h"
#include "runtime/backend.h"
#include "core/flags.h"
#include "runtime/devices.h"
#include "runtime/disk_cache.h"
#include "runtime/world.h"

namespace axle::detail {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Best of three runs of a one-op module `make` builds over parameters of `in` types.
double TimeModule(const std::vector<ir::TensorType>& in,
                  const std::function<ir::Value*(ir::Builder&, const std::vector<ir::Value*>&)>& make) {
  ir::Module m("calibrate");
  ir::Function* f = m.AddFunction("main");
  ir::Builder b(f);
  std::vector<ir::Value*> params;
  std::vector<runtime::BufferPtr> args;
  for (size_t i = 0; i < in.size(); ++i) {
    params.push_back(b.Parameter(static_cast<int64_t>(i), in[i]));
    auto lit = std::make_shared<ir::Literal>(in[i]);
    float* p = lit->mutable_data<float>();
    for (int64_t k = 0; k < lit->NumElements(); ++k) p[k] = static_cast<float>(k % 7) * 0.25f;
    args.push_back(std::move(lit));
  }
  f->set_results({make(b, params)});
  std::unique_ptr<runtime::Executable> exe = runtime::GetBackend(backend()).Compile(m);
  exe->Execute(args);  // warm-up
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const Clock::time_point t0 = Clock::now();
    exe->Execute(args);
    best = std::min(best, Seconds(t0));
  }
  return best;
}

// Seconds of one collective of `kind` in groups of `g` of `n` virtual devices (n / g groups at
// once, as a step's groups along one axis run), each device contributing `elements` f32 (an
// all-gather's result is g times that), measured as a step runs it: a partitioned module of a
// chain of kCalls collectives, each of x * c_i where c_i depends on the collective before (the
// work between collectives), executed on the devices, less the same chain without the
// collectives, per call; the better of two runs. On
// this transport the devices share the cores, so a collective costs the scheduler's round trips
// through all of them, which a benchmark of bare calls does not see.
double TimeCollective(spmd::Collective kind, int64_t g, int64_t n, int64_t elements) {
  n -= n % g;  // whole groups
  constexpr int kCalls = 8;
  ir::ReplicaGroups groups, pairs;
  for (int64_t first = 0; first < n; first += g) {
    groups.emplace_back();
    for (int64_t d = first; d < first + g; ++d) {
      groups.back().push_back(d);
      pairs.push_back({d, first + (d - first + 1) % g});
    }
  }
  const ir::TensorType type(DType::kF32, Shape({elements}));
  auto run = [&](bool with_collectives) {
    ir::Module m("calibrate");
    m.set_num_replicas(n);
    ir::Function* f = m.AddFunction("main");
    ir::Builder b(f, ir::ShapeContext{n});
    ir::Value* x = b.Parameter(0, type);
    std::vector<ir::Value*> results;
    // A chain, as in a step: each collective's operand waits for the one before (through a sum
    // of its result, times zero), so the devices meet kCalls times in turn.
    ir::Value* carry = b.Scalar(DType::kF32, 0.0);
    for (int i = 0; i < kCalls; ++i) {
      ir::Value* factor = b.Add(b.Scalar(DType::kF32, 1.0 + 0.125 * i), carry);
      ir::Value* xi = b.Binary(ir::OpKind::kMul, x, b.BroadcastInDim(factor, type.shape, {}));
      ir::Value* ci = xi;
      if (with_collectives) switch (kind) {
          case spmd::Collective::kAllReduce:
            ci = b.Build1(ir::OpKind::kAllReduce, {xi}, ir::AllReduceAttrs{ir::ReduceKind::kSum, groups});
            break;
          case spmd::Collective::kAllGather:
            ci = b.Build1(ir::OpKind::kAllGather, {xi}, ir::AllGatherAttrs{0, groups});
            break;
          case spmd::Collective::kReduceScatter:
            ci = b.Build1(ir::OpKind::kReduceScatter, {xi}, ir::ReduceScatterAttrs{ir::ReduceKind::kSum, 0, groups});
            break;
          case spmd::Collective::kAllToAll:
            ci = b.Build1(ir::OpKind::kAllToAll, {xi}, ir::AllToAllAttrs{0, 0, groups});
            break;
          case spmd::Collective::kCollectivePermute:
            ci = b.Build1(ir::OpKind::kCollectivePermute, {xi}, ir::CollectivePermuteAttrs{pairs});
            break;
        }
      results.push_back(ci);
      carry = b.Binary(ir::OpKind::kMul, b.Reduce(ci, ir::ReduceKind::kSum, {0}), b.Scalar(DType::kF32, 0.0));
    }
    results.push_back(carry);
    f->set_results(results);
    // The per-op executor: the collectives are the runtime's whatever the backend, and it
    // compiles nothing natively (sixty modules).
    std::unique_ptr<runtime::ReplicatedExecutable> exe =
        runtime::ReplicatedExecutable::Compile(runtime::GetBackend("cpu"), m);
    auto args = [&] {  // this process's devices (all n but in a run of several processes)
      std::vector<std::vector<runtime::BufferPtr>> a(static_cast<size_t>(exe->num_devices()));
      for (auto& d : a) d.push_back(std::make_shared<ir::Literal>(type));
      return a;
    };
    exe->Execute(args());  // warm-up
    double best = 1e30;
    for (int r = 0; r < 2; ++r) {
      auto a = args();
      const Clock::time_point t0 = Clock::now();
      exe->Execute(std::move(a));
      best = std::min(best, Seconds(t0));
    }
    return best;
  };
  return std::max(0.0, run(true) - run(false)) / kCalls;
}

spmd::CostModel Measure(const std::set<int64_t>& group_sizes, int64_t devices, int64_t sharing) {
  spmd::CostModel m;
  runtime::World* world = runtime::GetWorld();
  const bool processes = world != nullptr && world->size() > 1;
  m.source = processes ? fmt::format("measured across {} processes of {} devices over Gloo ({} backend)",
                                     world->size(), sharing, backend())
                       : fmt::format("measured on this machine, {} virtual devices sharing its cores ({} backend)",
                                     sharing, backend());
  if (processes) world->Barrier("the cost model's calibration");  // the products timed together, as they run
  const ir::TensorType sq(DType::kF32, Shape({1024, 1024}));
  const double dot_s = TimeModule({sq, sq}, [](ir::Builder& b, const std::vector<ir::Value*>& p) {
    ir::DotGeneralAttrs a;
    a.lhs_contracting = {1};
    a.rhs_contracting = {0};
    return b.DotGeneral(p[0], p[1], a);
  });
  m.product_flops_per_s = 2.0 * 1024 * 1024 * 1024 / dot_s / static_cast<double>(sharing);
  const ir::TensorType big(DType::kF32, Shape({int64_t{8} << 20}));
  const double add_s = TimeModule({big, big}, [](ir::Builder& b, const std::vector<ir::Value*>& p) {
    return b.Add(p[0], p[1]);
  });
  m.memory_bytes_per_s = static_cast<double>(big.ByteSize()) / add_s / static_cast<double>(sharing);
  constexpr spmd::Collective kinds[] = {spmd::Collective::kAllReduce, spmd::Collective::kAllGather,
                                        spmd::Collective::kReduceScatter, spmd::Collective::kAllToAll,
                                        spmd::Collective::kCollectivePermute};
  for (int64_t g : group_sizes) {
    for (spmd::Collective kind : kinds) {
      // n: the bytes the formula is in (an all-gather's result; the others' operand).
      const int64_t small = int64_t{64} << 10, large = int64_t{1} << 20;  // f32 elements: 256 KB, 4 MB
      const double t1 = TimeCollective(kind, g, devices, small);
      const double t2 = TimeCollective(kind, g, devices, large);
      const int64_t scale = kind == spmd::Collective::kAllGather ? g : 1;
      const double n1 = static_cast<double>(small * 4 * scale), n2 = static_cast<double>(large * 4 * scale);
      const auto [a, b] = spmd::CollectiveTerms(kind, g);
      spmd::AlphaBeta ab;
      ab.beta_s_per_byte = std::max(0.0, (t2 - t1) / (b * (n2 - n1)));
      ab.alpha_s = (t1 - b * n1 * ab.beta_s_per_byte) / a;
      if (ab.alpha_s < 0) {  // noise: the line through the large point and the origin
        ab.alpha_s = 0;
        ab.beta_s_per_byte = t2 / (b * n2);
      }
      m.fits[{kind, g}] = ab;
    }
  }
  return m;
}

}  // namespace

spmd::CostModel CalibratedCostModel(const std::vector<int64_t>& mesh_shape, int64_t devices_sharing_cores) {
  AXLE_CHECK(devices_sharing_cores >= 1, "CalibratedCostModel: devices_sharing_cores {}", devices_sharing_cores);
  // The group sizes a plan on this mesh uses: each axis, pairs of axes, and all devices, measured
  // on as many devices as the mesh has, at most kMaxThreads in one process (a larger group takes
  // the fit of the largest measured one; the formulas carry the rest). In a run of several
  // processes, on the run's devices over its transport (Gloo), every process measuring with the
  // others.
  constexpr int64_t kMaxThreads = 16;
  runtime::World* world = runtime::GetWorld();
  const bool processes = world != nullptr && world->size() > 1;
  int64_t devices = 1;
  std::set<int64_t> sizes;
  for (size_t i = 0; i < mesh_shape.size(); ++i) {
    devices *= mesh_shape[i];
    sizes.insert(mesh_shape[i]);
    for (size_t j = i + 1; j < mesh_shape.size(); ++j) sizes.insert(mesh_shape[i] * mesh_shape[j]);
  }
  sizes.insert(devices);
  int64_t threads = std::clamp<int64_t>(devices, 2, kMaxThreads);
  if (processes) {
    threads = static_cast<int64_t>(world->size()) * world->local_devices();
    if (devices != threads)
      Fail("auto-sharding: a mesh of {} devices in a run of {} ({} processes of {}): the mesh takes every device "
           "of the run", devices, threads, world->size(), world->local_devices());
  } else if (flags::cpu_devices() < threads) {
    flags::set_cpu_devices(threads);
  }
  std::set<int64_t> measured;
  for (int64_t g : sizes)
    if (g >= 2) measured.insert(std::min(g, threads));
  if (measured.empty()) measured.insert(2);
  runtime::DiskCache& cache = runtime::DiskCache::Default();
  const std::string transport = processes ? fmt::format("gloo{}x{}", world->size(), world->local_devices()) : "local";
  const std::string key =
      runtime::DiskCache::MakeKey(fmt::format("costmodel_{}_{}_{}_{}_{}", backend(), transport, threads,
                                              devices_sharing_cores, fmt::join(measured, "_")));
  std::optional<spmd::CostModel> kept;
  if (std::optional<std::string> blob = cache.Get(key)) {
    try {
      kept = spmd::CostModel::FromJson(nlohmann::json::parse(*blob));
    } catch (const std::exception&) {
      // Not a cost model (a foreign or damaged entry): measure again and overwrite it.
    }
  }
  if (processes) {
    // Process 0 decides: its kept model for all, or all measure together (a collective needs
    // every process), and all take process 0's figures (each process's clock differs a little;
    // the plan must not).
    const std::string mine = kept ? kept->ToJson().dump() : std::string();
    auto all = world->AllGatherBytes({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()},
                                     "the kept cost model");
    if (all[0].empty()) {
      const std::string measured_json = Measure(measured, threads, devices_sharing_cores).ToJson().dump();
      all = world->AllGatherBytes({reinterpret_cast<const uint8_t*>(measured_json.data()), measured_json.size()},
                                  "the measured cost model");
      if (world->rank() == 0) cache.Put(key, measured_json);
    }
    return spmd::CostModel::FromJson(nlohmann::json::parse(std::string(all[0].begin(), all[0].end())));
  }
  if (kept) return *kept;
  spmd::CostModel m = Measure(measured, threads, devices_sharing_cores);
  cache.Put(key, m.ToJson().dump());
  return m;
}

}  // namespace axle::detail
