// Collective bandwidth across processes: Axle's Gloo communicator (src/dist/gloo_communicator.cc) against
// Gloo's own algorithms on the same processes, pairs and sockets (bench/README.md, "Collectives
// across processes").
//
//   build/axle launch --nproc 4 -- build/bench_collectives [MAX_BYTES]
//
// For each size from 1 KB to MAX_BYTES (default 256 MB) by 4x, f32 payloads: all_reduce (sum)
// against gloo::allreduce (its ring algorithm), all_gather against gloo::allgather, and
// reduce_scatter alone (Gloo's current API has none). Each cell is the median of several calls
// after one warm-up (the slowest process's), as bus bandwidth (NCCL's convention: what each link
// carries; the payload of one process / time, x 2(n-1)/n for all_reduce, x (n-1)/n for the others)
// and the time of one call; the ratio is Gloo's time / Axle's (above 1: Axle is faster).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "axle/distributed.h"
#include "core/error.h"
#include "dist/gloo_world.h"
#include "ir/literal.h"
#include "runtime/world.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds of `fn` over enough calls to move ~1 GB (at least 3, at most 100), after one.
double Median(size_t bytes, const std::function<void()>& fn) {
  fn();
  const int reps = static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / std::max<size_t>(bytes, 1), 3, 100));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    axle::distributed::barrier("bench");
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  // Every process reports the slowest process's median: a collective ends when its last member does.
  double mine = t[t.size() / 2];
  auto all = axle::runtime::GetWorld()->AllGatherBytes({reinterpret_cast<const uint8_t*>(&mine), sizeof mine},
                                                       "bench medians");
  for (const auto& b : all) {
    double x;
    std::memcpy(&x, b.data(), sizeof x);
    mine = std::max(mine, x);
  }
  return mine;
}

std::string Size(size_t b) {
  if (b >= (1u << 20)) return std::to_string(b >> 20) + " MB";
  return std::to_string(b >> 10) + " KB";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace axle;
  try {
    if (!distributed::Init()) {
      std::fprintf(stderr, "bench_collectives runs in a run of several processes: build/axle launch --nproc 4 -- %s\n",
                   argv[0]);
      return 2;
    }
    const size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{256} << 20;
    runtime::World& world = *runtime::GetWorld();
    if (world.local_devices() != 1) Fail("bench_collectives wants one device per process (AXLE_CPU_DEVICES=1)");
    const int n = world.size(), rank = world.rank();
    runtime::Communicator& comm = world.device_communicator();
    std::shared_ptr<gloo::Context> gloo = dist::HostGlooContext(world);
    if (rank == 0) {
      std::printf("collectives over %d processes (%s), f32: bus GB/s / time of one call\n", n,
                  distributed::describe().c_str());
      std::printf("%8s | %-17s %-17s %6s | %-17s %-17s %6s | %-17s\n", "size", "axle all_reduce", "gloo allreduce",
                  "ratio", "axle all_gather", "gloo allgather", "ratio", "axle red_scatter");
    }
    const double ar_bus = 2.0 * (n - 1) / n, ag_bus = double(n - 1) / n;
    uint32_t tag = 1;
    for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      const int64_t elements = static_cast<int64_t>(bytes / 4);
      const ir::TensorType t(DType::kF32, Shape({elements}));
      ir::Literal in = ir::Literal::Splat(t, 1.0 + rank), out = ir::Literal::Splat(t, 0);
      ir::Literal gathered = ir::Literal::Splat(ir::TensorType(DType::kF32, Shape({elements * n})), 0);
      ir::Literal scattered = ir::Literal::Splat(ir::TensorType(DType::kF32, Shape({elements / n})), 0);
      std::vector<float> g_in(static_cast<size_t>(elements), 1.0f + rank), g_out(g_in.size()),
          g_gathered(g_in.size() * static_cast<size_t>(n));
      comm.Reset();
      const double axle_ar = Median(bytes, [&] { comm.AllReduce(rank, in, out, ir::ReduceKind::kSum, {}); });
      const double gloo_ar = Median(bytes, [&] {
        gloo::AllreduceOptions o(gloo);
        o.setInput(g_in.data(), g_in.size());
        o.setOutput(g_out.data(), g_out.size());
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        o.setTag(tag++);
        gloo::allreduce(o);
      });
      const double axle_ag = Median(bytes, [&] { comm.AllGather(rank, in, gathered, 0, {}); });
      const double gloo_ag = Median(bytes, [&] {
        gloo::AllgatherOptions o(gloo);
        o.setInput(g_in.data(), g_in.size());
        o.setOutput(g_gathered.data(), g_gathered.size());
        o.setTag(tag++);
        gloo::allgather(o);
      });
      double axle_rs = 0;
      if (elements % n == 0)
        axle_rs = Median(bytes, [&] { comm.ReduceScatter(rank, in, scattered, ir::ReduceKind::kSum, 0, {}); });
      if (rank == 0) {
        auto cell = [&](double s, double bus) {
          char buf[48];
          if (s >= 1e-2)
            std::snprintf(buf, sizeof buf, "%.3f / %.0f ms", bytes / s / 1e9 * bus, s * 1e3);
          else
            std::snprintf(buf, sizeof buf, "%.3f / %.0f us", bytes / s / 1e9 * bus, s * 1e6);
          return std::string(buf);
        };
        std::printf("%8s | %-17s %-17s %5.2fx | %-17s %-17s %5.2fx | %-17s\n", Size(bytes).c_str(),
                    cell(axle_ar, ar_bus).c_str(), cell(gloo_ar, ar_bus).c_str(), gloo_ar / axle_ar,
                    cell(axle_ag, ag_bus).c_str(), cell(gloo_ag, ag_bus).c_str(), gloo_ag / axle_ag,
                    axle_rs > 0 ? cell(axle_rs, ag_bus).c_str() : "-");
        std::fflush(stdout);
      }
    }
    distributed::barrier("the end of the benchmark");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
