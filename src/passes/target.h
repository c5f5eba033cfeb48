// What the compiler may know about the machine a module is compiled for (ARCHITECTURE.md,
// invariant 8: the compiler reads a target, never the host).
//
// Every decision that depends on the machine (how many threads a schedule is made for, how wide
// the vector loops are, which products go side by side) reads a Target value. Target::Host()
// detects this machine once; tests and `axle compile --target=cpu-16t` construct any other, so a
// schedule for a 16-core server can be printed and checked on a 2-core laptop. Nothing in the
// compiler reads the runtime's thread pool or a file-scope threshold instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace axle::passes {

// The widest vector instructions generated code and hand kernels may use.
enum class VectorIsa {
  kScalar,   // no SIMD assumed (generic x86-64: SSE2 only, or another architecture)
  kAvx2,     // 256-bit vectors, FMA
  kAvx512,   // 512-bit vectors (AVX-512 F/BW/DQ/VL)
};

// The CPU schedule's thresholds (src/backends/cpu), each measured where its Note says: the same
// for the host and every parsed target today. They are the target's rather than file constants so
// that a schedule is a function of the target alone, and a test can ask for another.
struct CpuScheduleParams {
  // Note [Products side by side] (pairs.cc): products of at least this many multiply-adds, with
  // results of at most this many elements, may run side by side on a two-thread target.
  int64_t pair_min_macs = int64_t{1} << 20;
  int64_t pair_max_result_elements = int64_t{1} << 21;  // 8 MB of f32
  // Note [Kernels beside a pair]: at most max_fillers kernels reading at most
  // filler_max_elements elements join a pair's pool call; reductions of at most
  // tiny_result_elements results move up to the first pair after their inputs.
  int max_fillers = 8;
  int64_t filler_max_elements = int64_t{1} << 18;  // 1 MB of f32
  int64_t tiny_result_elements = 64;
  int max_followers = 8;  // Note [Followers of a pair]
  // Note [Independent kernels as one loop] (groups.cc): the most pieces a group is cut into (a
  // pool call's chunk numbers are 16 bits).
  int64_t group_max_pieces = 4096;

  bool operator==(const CpuScheduleParams&) const = default;
};

struct Target {
  // "cpu" today; "cuda" joins it with the CUDA backend.
  std::string kind = "cpu";
  // Threads a step's loops and products are split over: the size of the pool that runs them.
  int threads = 1;
  VectorIsa isa = VectorIsa::kScalar;
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 products with f32 accumulation
  // Data cache sizes in bytes (per core for L1 and L2, shared for L3); 0 when unknown.
  int64_t l1d_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t l3_bytes = 0;
  CpuScheduleParams cpu;

  // This machine: hardware threads (at least 1, at most 64, as the runtime's pool is sized), the
  // ISA extensions the CPU reports, the cache sizes the C library reports. Detected once.
  static const Target& Host();

  // A target from its text form (ToString() parses back to the same kind, ISA and threads):
  //   host                       this machine (Host())
  //   cpu-<N>t                   N threads (1..1024), AVX2, 32 KiB / 1 MiB / 32 MiB caches
  //   cpu-<isa>-<N>t             the same with isa = scalar | avx2 | avx512 | avx512bf16
  // Fields a spec leaves out take the fixed values above, never the host's, so that a schedule
  // test written for `cpu-16t` reads the same on every machine. Throws axle::Error naming the
  // spec and the accepted forms.
  static Target Parse(std::string_view spec);

  // "cpu-avx512bf16-2t": kind, ISA and threads (the fields a schedule depends on today).
  std::string ToString() const;
  // Every field, for cache keys and `axle compile --emit=target`: "cpu-avx512bf16-2t l1d=48K
  // l2=1M l3=32M".
  std::string Describe() const;

  // Bytes of one vector register of `isa` (16 for scalar: SSE2 is the x86-64 baseline).
  int vector_bytes() const;

  bool operator==(const Target&) const = default;
};

std::string_view VectorIsaName(VectorIsa isa);

}  // namespace axle::passes
