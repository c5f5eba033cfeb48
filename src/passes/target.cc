#include "passes/target.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "core/error.h"

namespace axle::passes {
namespace {

constexpr int kMaxThreads = 1024;
constexpr const char* kForms = "host, cpu-<N>t or cpu-<isa>-<N>t with isa = scalar, avx2, avx512 or avx512bf16";

// The fixed caches of a parsed target (a typical x86-64 server core).
constexpr int64_t kParsedL1 = int64_t{32} << 10, kParsedL2 = int64_t{1} << 20, kParsedL3 = int64_t{32} << 20;

int64_t CacheBytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? static_cast<int64_t>(v) : 0;
}

Target DetectHost() {
  Target t;
  const unsigned hc = std::thread::hardware_concurrency();
  t.threads = static_cast<int>(std::clamp(hc == 0 ? 1u : hc, 1u, 64u));
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    t.isa = VectorIsa::kAvx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    t.isa = VectorIsa::kAvx2;
  t.avx512_bf16 = t.isa == VectorIsa::kAvx512 && __builtin_cpu_supports("avx512bf16");
#endif
  t.l1d_bytes = CacheBytes(_SC_LEVEL1_DCACHE_SIZE);
  t.l2_bytes = CacheBytes(_SC_LEVEL2_CACHE_SIZE);
  t.l3_bytes = CacheBytes(_SC_LEVEL3_CACHE_SIZE);
  return t;
}

std::string Bytes(int64_t b) {
  if (b == 0) return "?";
  if (b % (int64_t{1} << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b % (int64_t{1} << 10) == 0) return fmt::format("{}K", b >> 10);
  return std::to_string(b);
}

}  // namespace

std::string_view VectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kScalar: return "scalar";
    case VectorIsa::kAvx2: return "avx2";
    case VectorIsa::kAvx512: return "avx512";
  }
  return "?";
}

const Target& Target::Host() {
  static const Target host = DetectHost();
  return host;
}

Target Target::Parse(std::string_view spec) {
  if (spec == "host") return Host();
  auto bad = [&](std::string_view why) -> Target {
    Fail("target '{}': {}; expected {}", spec, why, kForms);
  };
  if (spec.substr(0, 4) != "cpu-") return bad("only cpu targets exist");
  std::string_view rest = spec.substr(4);
  Target t;
  t.isa = VectorIsa::kAvx2;
  t.l1d_bytes = kParsedL1, t.l2_bytes = kParsedL2, t.l3_bytes = kParsedL3;
  if (const size_t dash = rest.find('-'); dash != std::string_view::npos) {
    const std::string_view isa = rest.substr(0, dash);
    rest = rest.substr(dash + 1);
    if (isa == "scalar") t.isa = VectorIsa::kScalar;
    else if (isa == "avx2") t.isa = VectorIsa::kAvx2;
    else if (isa == "avx512") t.isa = VectorIsa::kAvx512;
    else if (isa == "avx512bf16") t.isa = VectorIsa::kAvx512, t.avx512_bf16 = true;
    else return bad(fmt::format("unknown ISA '{}'", isa));
  }
  if (rest.size() < 2 || rest.back() != 't') return bad("the thread count must end in 't' (cpu-16t)");
  int n = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size() - 1, n);
  if (ec != std::errc() || end != rest.data() + rest.size() - 1 || n < 1 || n > kMaxThreads)
    return bad(fmt::format("the thread count must be 1..{}", kMaxThreads));
  t.threads = n;
  return t;
}

std::string Target::ToString() const {
  const std::string_view isa_name = avx512_bf16 ? "avx512bf16" : VectorIsaName(isa);
  return fmt::format("{}-{}-{}t", kind, isa_name, threads);
}

std::string Target::Describe() const {
  return fmt::format("{} l1d={} l2={} l3={}", ToString(), Bytes(l1d_bytes), Bytes(l2_bytes), Bytes(l3_bytes));
}

int Target::vector_bytes() const {
  switch (isa) {
    case VectorIsa::kScalar: return 16;
    case VectorIsa::kAvx2: return 32;
    case VectorIsa::kAvx512: return 64;
  }
  return 16;
}

}  // namespace axle::passes
