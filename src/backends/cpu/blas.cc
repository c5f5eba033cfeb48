// Note [Which BLAS]
// dot_general's large products are ~85% of a GPT-2 124M training step on this 2-core machine, so
// the BLAS sets most of the step time. Both libraries run single-threaded from our pool (Note [BLAS
// threads], dot.cc), each thread computing whole tiles of C. Which is faster depends on the CPU:
//   - Intel (Sapphire Rapids; the step's own products, M = 256 tokens, C programs calling each
//     library the way dot.cc does, 2 threads, best of 5, alternated): OpenBLAS 0.3.21 1.38-1.44
//     s a step, MKL 2026.2 (sequential) 1.07-1.24 s; `axle train --config 124m` 129-141 -> 171-185
//     tokens/s.
//   - AMD (EPYC, Zen 4, AVX-512; OpenBLAS runs its Cooperlake kernels there): MKL takes its generic
//     code path on a CPU that is not Intel's, and OpenBLAS is the faster. `axle train`, interleaved
//     runs: --config small 36.4K / 39.9K tokens/s with MKL against 42.8K / 43.3K with OpenBLAS;
//     --config 124m 191.6 / 204.5 against 215.6 / 216.8. (PyTorch with MKL preloaded trains small
//     at 7.9K there, against 22-24K on OpenBLAS.)
// So auto takes MKL when it is installed and the CPU's vendor is GenuineIntel (cpuid leaf 0), and
// OpenBLAS (Debian's, linked) otherwise, with oneDNN beside it when that loads (Note [Products
// through oneDNN]); AXLE_BLAS=openblas|onednn|mkl forces one.
//
// MKL is dlopen'ed, not linked: it comes from PyPI (`pip install --no-deps mkl` puts libmkl_rt in
// the Python prefix's lib/) or Debian's non-free libmkl-rt, and a build without it must work. Before
// its first product it is set to
//   - the LP64 interface (32-bit ints, the CBLAS ABI of cblas.h) and the sequential threading
//     layer: no OpenMP runtime of its own to fight our pool;
//   - conditional numerical reproducibility AUTO (MKL_CBWR_Set): the same inputs give the same bits
//     on this machine whatever the operands' alignment (StridedCopy's operand copies are only
//     16-byte aligned); it cost nothing measurable on the GPT-2 products.
// Both libraries multiply every pair of a product (neither skips zeros), which Note [BLAS and
// non-finite values] (dot.cc) relies on; the dot tests with inf / NaN operands run on both.

// Note [Products through oneDNN]
// GPT-2 small's products are small: 512 x 128 x 128 to 512 x 512 x 128, and the attention's
// 64 x 64 x 32 (32 of them a batch). OpenBLAS packs both panels of every call and runs them at
// 52-74 GFLOP/s on one Zen 3 thread, the attention's at 38-62; oneDNN's sgemm (its JIT AVX2 / AVX-512
// kernels) runs most of them faster. A C harness calling each library as dot.cc does (one
// thread, OpenBLAS with C cleared and beta = 1 as in Note [Zeroing C ourselves], oneDNN with
// beta = 0, operands rotating over 16 sets; best of 5, two runs, GFLOP/s OpenBLAS -> oneDNN):
//   - the attention's (64 x 64 x 32 and 64 x 32 x 64, every transpose): 41-63 -> 56-78;
//   - op(A) = A, the forward products and the dx = dy w^T ones: 512 x 128 x 128 53-54 -> 65-81,
//     512 x 384 x 128 59-69 -> 66-81, 512 x 128 x 384 59-65 -> 69, 512 x 512 x 128 64-73 -> 67-82
//     (one shape either way: 512 x 512 x 128 NN 64-72 -> 60-67);
//   - op(A) = A^T, the weight gradients dw = x^T dy (K = the tokens): OpenBLAS is the faster,
//     65-81 against 59-78; in `axle train --config small` too (AXLE_PROFILE, 200 steps, all
//     products on oneDNN): [512, 128] 790-886 ms against 693, [128, 512] 551-600 against 438.
//   - one exception among those: B not transposed with its rows a multiple of 512 floats apart
//     (GPT-2 small's MLP up-projection, [512, 128] x [128, 512], cut in two halves of 256 rows).
//     For it oneDNN's AVX2 path picks its no-copy kernel (1/m + 1/n is above its threshold), which
//     reads B in place, and B's 2 KB rows land in few cache sets: page-aligned operands, two
//     threads, medians of 400 calls, 0.59-0.61 ms a half against OpenBLAS's 0.52-0.56 (oneDNN was
//     0.50 with B 16 bytes off a 32-byte boundary, which is no layout to depend on); in the step
//     (AXLE_PROFILE, 150 steps, 3 alternated pairs of runs) 0.73-0.91 -> 0.61-0.75 ms a call.
// On AVX-512 hosts the weight gradients turn the other way (session 27, a Zen 4 EPYC: OpenBLAS's
// Cooperlake kernels against oneDNN's avx512_core ones; AXLE_PROFILE, 300 steps, ms a call, one
// thread): [512, 128] 0.74 -> 0.61, [128, 384] 0.54 -> 0.47, [128, 128] 0.20 -> 0.17, [128, 512]
// 0.71 either way; the step, 4 alternated pairs of 300-step runs: 10.89 / 10.27 / 10.53 / 9.87 ->
// 10.01 / 10.03 / 9.74 / 9.59 ms. So there oneDNN takes them too,
// also the [128, 512] one whose B rows are 2 KB apart (0.71 -> 0.65 ms a call; the step, 6 pairs
// alternated near: 9.84 / 10.05 / 9.66 / 9.88 / 9.64 / 9.47 -> 9.68 / 9.88 / 9.57 / 9.68 / 9.47 /
// 9.47 ms). The untransposed-A halves with such B (the MLP's forward) first stayed on OpenBLAS,
// but session 28 found oneDNN faster on them too with page-aligned operands on this host (two
// threads, a half each, 1000 calls: 0.299-0.300 ms whether B's rows are 512, 520 or 528 floats
// apart, OpenBLAS 0.331-0.336 with C cleared first; in the step 0.40 ms a call on OpenBLAS). Its
// AVX-512 path does not show the AVX2 no-copy kernel's cache-set conflicts. So on AVX-512 hosts
// oneDNN takes every product up to kDnnlMaxMacs (BlasLibrary::dnnl_avx512). The step, 8
// alternated pairs of 300-step runs, those with both probes near: 10.04 / 9.77 / 9.72 / 9.47 ->
// 9.39 / 9.57 / 9.65 / 9.30 ms.
// So with AXLE_BLAS=onednn (auto's choice off Intel when libdnnl loads) a product goes to oneDNN
// when DnnlTakes(): at most kDnnlAnyMacs multiply-adds whatever the transposes, or at most
// kDnnlMaxMacs with A not transposed and B transposed or ldb not a multiple of kDnnlBadLdb, or
// (on AVX-512) any at most kDnnlMaxMacs;
// everything else (the large products of GPT-2 124M, which this was not measured on, and every
// dgemm) stays with OpenBLAS. The rule reads only the product's shape and layout, so which library
// computes a product, and so its bits, never depends on the schedule.
// libdnnl is dlopen'ed like MKL (a build without it works unchanged). Debian's is built on OpenMP:
// dnnl_sgemm takes omp_get_max_threads() threads, so each thread that calls it first sets its own
// OpenMP thread count to 1 (omp_set_num_threads is per thread in libgomp): the pool, not OpenMP,
// parallelizes (Note [BLAS threads], dot.cc). A libdnnl on TBB or a threadpool runtime is not
// used. oneDNN multiplies every pair as the BLAS do (Note [BLAS and non-finite values]; the dot
// tests with inf / NaN operands run on it too).
#include "backends/cpu/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <strings.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "backends/cpu/cpu_flags.h"

namespace axle::runtime::cpu {
namespace {

extern "C" char* openblas_get_config() __attribute__((weak));
extern "C" char* openblas_get_corename() __attribute__((weak));

// Whether the CPU and the OS run AVX-512 (F, CD, BW, DQ, VL: what OpenBLAS's SkylakeX kernels use):
// cpuid leaf 7 and the OS saving the opmask and ZMM state (XCR0 bits 1, 2, 5, 6, 7).
bool CpuRunsAvx512() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // no OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE6u) != 0xE6u) return false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned need = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);  // F DQ CD BW VL
  return (ebx & need) == need;
#else
  return false;
#endif
}

// Note [OpenBLAS's kernels]
// Debian's OpenBLAS is built for every x86 core and picks its kernels when it loads: by the CPU's
// family and model, or by OPENBLAS_CORETYPE when that is set. The AMD EPYC of session 16 (family
// 0x1a, Zen 5, with a full-width AVX-512 unit) gets its Cooperlake (AVX-512) kernels; its
// environment set OPENBLAS_CORETYPE=Haswell, the AVX2 kernels, at half the rate: numpy's 2048^3
// sgemm 206 GFLOP/s on two threads and 110 on one, against 405 and 207 (`axle train --config
// 124m`: 216 against 356 tokens/s). Axle leaves the variable alone, like every program on the
// machine (PyTorch and numpy take the same kernels from it), and says which kernels run on its
// `blas:` line, with a hint when the variable holds back a CPU that runs AVX-512. The benchmark
// (bench/train_tokens_per_s.sh) runs every side with OpenBLAS's own choice unless told otherwise.
std::string OpenBlasKernels() {
  if (openblas_get_corename == nullptr) return "";
  const std::string core = openblas_get_corename();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced == nullptr) return fmt::format("{} kernels", core);
  bool avx512_core = false;
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
    avx512_core = avx512_core || strcasecmp(core.c_str(), name) == 0;
  if (avx512_core || !CpuRunsAvx512()) return fmt::format("{} kernels (OPENBLAS_CORETYPE={})", core, forced);
  return fmt::format("{} kernels (OPENBLAS_CORETYPE={} holds back this CPU, which runs AVX-512: unset it, or set "
                     "SkylakeX, for up to twice the sgemm rate)",
                     core, forced);
}

// OpenBLAS's cblas.h declares the enums as enum types; these take ints like MKL's entry points.
void OpenBlasSgemm(int o, int ta, int tb, int M, int N, int K, float alpha, const float* a, int lda, const float* b,
                   int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(static_cast<CBLAS_ORDER>(o), static_cast<CBLAS_TRANSPOSE>(ta), static_cast<CBLAS_TRANSPOSE>(tb), M, N,
              K, alpha, a, lda, b, ldb, beta, c, ldc);
}
void OpenBlasDgemm(int o, int ta, int tb, int M, int N, int K, double alpha, const double* a, int lda,
                   const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(static_cast<CBLAS_ORDER>(o), static_cast<CBLAS_TRANSPOSE>(ta), static_cast<CBLAS_TRANSPOSE>(tb), M, N,
              K, alpha, a, lda, b, ldb, beta, c, ldc);
}

struct Mkl {
  CblasSgemm sgemm = nullptr;
  CblasDgemm dgemm = nullptr;
  std::string detail;  // version and path when loaded
  std::string error;   // why not, when not
};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The first of `candidates` that dlopen loads (its path in `path`), or null with the loader's
// message for the first one in `error`. The handle is never closed.
void* DlopenFirst(const std::vector<std::string>& candidates, std::string& path, std::string& error) {
  for (const std::string& c : candidates) {
    if (void* handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = c;
      return handle;
    }
    if (error.empty()) error = ::dlerror();
  }
  return nullptr;
}

// Loaded once; the handle is never closed (MKL keeps per-thread state until exit).
const Mkl& LoadMkl() {
  static const Mkl mkl = [] {
    Mkl m;
    std::vector<std::string> candidates;
    if (const std::string path = flags::mkl_library(); !path.empty()) {
      candidates.push_back(path);
    } else {
#ifdef AXLE_MKL_BUILD_PATH
      candidates.push_back(AXLE_MKL_BUILD_PATH);
#endif
      candidates.insert(candidates.end(), {"libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"});
    }
    // LeakSanitizer's exit-time scan crashed in 2 of 3 ASan runs of `axle train` with MKL loaded
    // ("Tracer caught signal 11" at an address in MKL's mappings; none of 3 with OpenBLAS), so a
    // sanitizer build keeps to OpenBLAS.
    if (kSanitized) {
      m.error = fmt::format("{}: not loaded in a sanitizer build (LeakSanitizer's exit scan crashes in MKL's memory)",
                            candidates.front());
      return m;
    }
    std::string path;
    void* handle = DlopenFirst(candidates, path, m.error);
    if (handle == nullptr) return m;
    auto sym = [&](const char* name) { return ::dlsym(handle, name); };
    auto set_interface = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Interface_Layer"));
    auto set_threading = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Threading_Layer"));
    auto cbwr_set = reinterpret_cast<int (*)(int)>(sym("MKL_CBWR_Set"));
    auto version = reinterpret_cast<void (*)(char*, int)>(sym("MKL_Get_Version_String"));
    auto sgemm = reinterpret_cast<CblasSgemm>(sym("cblas_sgemm"));
    auto dgemm = reinterpret_cast<CblasDgemm>(sym("cblas_dgemm"));
    if (!set_interface || !set_threading || !cbwr_set || !sgemm || !dgemm) {
      m.error = fmt::format("{} lacks MKL's runtime-dispatch entry points (is it libmkl_rt?)", path);
      return m;
    }
    constexpr int kLp64 = 0, kSequential = 1, kCbwrAuto = 2, kCbwrSuccess = 0;
    set_interface(kLp64);
    if (set_threading(kSequential) != kSequential) {
      m.error = fmt::format("{} refused its sequential threading layer (libmkl_sequential missing beside it?)", path);
      return m;
    }
    if (cbwr_set(kCbwrAuto) != kCbwrSuccess) {
      m.error = fmt::format("{} refused conditional numerical reproducibility (MKL_CBWR_Set AUTO)", path);
      return m;
    }
    char buf[256] = {};
    if (version) version(buf, sizeof(buf) - 1);
    m.sgemm = sgemm;
    m.dgemm = dgemm;
    // "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product Build ..." -> "MKL 2026.2".
    std::string v = buf;
    if (const size_t at = v.find("Version "); at != std::string::npos)
      v = v.substr(at + 8, v.find_first_of("- ", at + 8) - at - 8);
    m.detail = fmt::format("MKL {} (sequential), {}", v, path);
    return m;
  }();
  return mkl;
}

struct Dnnl {
  DnnlSgemm sgemm = nullptr;
  DnnlGemmBf16 gemm_bf16 = nullptr;  // when it computes a probe product right on this CPU
  void (*threads)(int) = nullptr;  // omp_set_num_threads; null for a sequential build
  std::string detail;              // version and path when loaded
  std::string error;               // why not, when not
};

// Loaded once; the handle is never closed. dnnl_version_t's layout (oneDNN 2 and 3).
struct DnnlVersion {
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
};
constexpr unsigned kDnnlRuntimeSeq = 1, kDnnlRuntimeOmp = 2;

// Whether the CPU has AVX512-BF16 (vdpbf16ps).
bool HostHasAvx512Bf16() {
#if defined(__x86_64__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

const Dnnl& LoadDnnl() {
  static const Dnnl dnnl = [] {
    Dnnl d;
    std::vector<std::string> candidates;
    if (const std::string path = flags::dnnl_library(); !path.empty())
      candidates.push_back(path);
    else
      candidates = {"libdnnl.so.3", "libdnnl.so.2"};
    // Its JIT code and OpenMP runtime are not instrumented, and it was never run under the
    // sanitizers: a sanitizer build keeps to OpenBLAS, as with MKL.
    if (kSanitized) {
      d.error = fmt::format("{}: not loaded in a sanitizer build", candidates.front());
      return d;
    }
    std::string path;
    void* handle = DlopenFirst(candidates, path, d.error);
    if (handle == nullptr) return d;
    auto sgemm = reinterpret_cast<DnnlSgemm>(::dlsym(handle, "dnnl_sgemm"));
    auto version = reinterpret_cast<const DnnlVersion* (*)()>(::dlsym(handle, "dnnl_version"));
    if (!sgemm || !version) {
      d.error = fmt::format("{} lacks dnnl_sgemm or dnnl_version (is it oneDNN's libdnnl?)", path);
      return d;
    }
    const DnnlVersion& v = *version();
    if (v.cpu_runtime == kDnnlRuntimeOmp) {
      // libgomp is among libdnnl's own dependencies: dlsym on its handle finds it there.
      d.threads = reinterpret_cast<void (*)(int)>(::dlsym(handle, "omp_set_num_threads"));
      if (!d.threads) {
        d.error = fmt::format("{} runs on OpenMP, but omp_set_num_threads is not among its libraries", path);
        return d;
      }
    } else if (v.cpu_runtime != kDnnlRuntimeSeq) {
      d.error = fmt::format("{} runs on a CPU runtime other than OpenMP or sequential ({:#x}), which would start "
                            "threads of its own beside Axle's pool",
                            path, v.cpu_runtime);
      return d;
    }
    d.sgemm = sgemm;
    // bf16 products: only where the CPU multiplies bf16 itself (AVX512-BF16's vdpbf16ps: twice
    // the f32 rate). oneDNN also runs them on plain AVX-512 by converting to f32 inside its
    // kernels, which cannot beat its own sgemm, so there the products are widened as everywhere
    // else (Note [Products of halves], dot.cc). It answers dnnl_unimplemented where it has no
    // kernel, so one small product decides too. The probe runs on this thread, which then keeps
    // OpenMP to one thread as every caller does.
    auto bf16 = reinterpret_cast<DnnlGemmBf16>(::dlsym(handle, "dnnl_gemm_bf16bf16f32"));
    if (bf16 != nullptr && HostHasAvx512Bf16()) {
      if (d.threads != nullptr) d.threads(1);
      const uint16_t a[2] = {0x3f80, 0x4000}, b[2] = {0x4040, 0xbf80};  // 1, 2 and 3, -1
      float c[1] = {-1.0f};
      if (bf16('N', 'N', 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, c, 1) == 0 && c[0] == 1.0f) d.gemm_bf16 = bf16;
    }
    d.detail = fmt::format("oneDNN {}.{}.{} ({}), {}", v.major, v.minor, v.patch,
                           v.cpu_runtime == kDnnlRuntimeOmp ? "OpenMP, one thread a caller" : "sequential", path);
    return d;
  }();
  return dnnl;
}

BlasLibrary MakeOpenBlas(const std::string& why_not_mkl) {
  BlasLibrary b;
  b.name = "openblas";
  std::string config = openblas_get_config ? openblas_get_config() : "a CBLAS";
  if (const size_t cut = config.find(' ', config.find(' ') + 1); cut != std::string::npos) config.resize(cut);
  if (const std::string kernels = OpenBlasKernels(); !kernels.empty()) config += ", " + kernels;
  b.detail = why_not_mkl.empty() ? config : fmt::format("{} (MKL not loaded: {})", config, why_not_mkl);
  b.sgemm = OpenBlasSgemm;
  b.dgemm = OpenBlasDgemm;
  b.zero_c_first = true;
  return b;
}

BlasLibrary MakeMkl() {
  const Mkl& m = LoadMkl();
  BlasLibrary b;
  b.name = "mkl";
  b.detail = m.detail;
  b.sgemm = m.sgemm;
  b.dgemm = m.dgemm;
  return b;
}

// Whether the CPU has the AVX-512 subsets oneDNN's avx512_core kernels need (F, BW, VL, DQ).
bool HostHasAvx512() {
#if defined(__x86_64__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// oneDNN's sgemm for the products DnnlTakes() (Note [Products through oneDNN]), OpenBLAS for the rest.
BlasLibrary MakeOnednn(const std::string& why_not_mkl) {
  const Dnnl& d = LoadDnnl();
  BlasLibrary b = MakeOpenBlas("");
  b.name = "onednn";
  b.dnnl_avx512 = HostHasAvx512();
  b.detail = fmt::format("{} sgemm for products up to 2^{} multiply-adds ({}), else {}{}", d.detail,
                         std::countr_zero(static_cast<uint64_t>(kDnnlMaxMacs)),
                         b.dnnl_avx512 ? "every layout: AVX-512"
                                             : fmt::format("2^{} when A is transposed",
                                                           std::countr_zero(static_cast<uint64_t>(kDnnlAnyMacs))),
                         b.detail, why_not_mkl.empty() ? "" : fmt::format(" (MKL not loaded: {})", why_not_mkl));
  b.dnnl_sgemm = d.sgemm;
  b.dnnl_threads = d.threads;
  b.dnnl_gemm_bf16 = d.gemm_bf16;
  b.detail += d.gemm_bf16 ? "; bf16 products by oneDNN's gemm_bf16bf16f32" : "; bf16 products widened to f32";
  return b;
}

std::mutex g_mu;
std::atomic<const BlasLibrary*> g_active{nullptr};

const BlasLibrary& Install(BlasLibrary lib) {
  static BlasLibrary slots[3];  // one per library: a pointer handed out stays valid
  BlasLibrary& slot = slots[lib.name == "mkl" ? 1 : lib.name == "onednn" ? 2 : 0];
  slot = std::move(lib);
  g_active.store(&slot, std::memory_order_release);
  return slot;
}

// Under g_mu.
const BlasLibrary& Select(const std::string& name) {
  if (name == "openblas") return Install(MakeOpenBlas(""));
  if (name == "mkl") {
    if (!MklAvailable())
      Fail("AXLE_BLAS=mkl, but MKL does not load: {}. Install it with `python3 -m pip install --no-deps mkl` "
           "and rebuild (CMake finds it in the Python prefix), or point AXLE_MKL_LIBRARY at libmkl_rt.so.N, or "
           "use AXLE_BLAS=openblas",
           LoadMkl().error);
    return Install(MakeMkl());
  }
  if (name == "onednn") {
    if (!DnnlAvailable())
      Fail("AXLE_BLAS=onednn, but oneDNN does not load: {}. Install it with `apt-get install libdnnl2`, or point "
           "AXLE_DNNL_LIBRARY at libdnnl.so.N, or use AXLE_BLAS=openblas",
           LoadDnnl().error);
    return Install(MakeOnednn(""));
  }
  if (name == "auto") {
    const bool intel = CpuVendor() == "GenuineIntel";
    if (intel && MklAvailable()) return Install(MakeMkl());
    const std::string why =
        intel ? LoadMkl().error
              : fmt::format("the CPU is {}, where OpenBLAS is the faster; AXLE_BLAS=mkl forces it", CpuVendor());
    return DnnlAvailable() ? Install(MakeOnednn(why)) : Install(MakeOpenBlas(why));
  }
  Fail("AXLE_BLAS='{}' is not a BLAS Axle knows: use auto (MKL on an Intel CPU when it loads, else onednn when "
       "oneDNN loads, else OpenBLAS), mkl, onednn or openblas",
       name);
}

}  // namespace

std::string CpuVendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "unknown";
  char v[13] = {};
  std::memcpy(v, &ebx, 4);  // the 12 characters come in ebx, edx, ecx
  std::memcpy(v + 4, &edx, 4);
  std::memcpy(v + 8, &ecx, 4);
  return v;
#else
  return "unknown";  // not an x86 CPU: no MKL for it
#endif
}

bool MklAvailable() { return LoadMkl().sgemm != nullptr; }

bool DnnlAvailable() { return LoadDnnl().sgemm != nullptr; }

std::string DescribeBlas() {
  const BlasLibrary& b = Blas();
  return fmt::format("blas: {}, {}", b.name, b.detail);
}

const BlasLibrary& UseBlas(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  return Select(name);
}

const BlasLibrary& Blas() {
  if (const BlasLibrary* b = g_active.load(std::memory_order_acquire)) return *b;
  std::lock_guard<std::mutex> lock(g_mu);
  if (const BlasLibrary* b = g_active.load(std::memory_order_relaxed)) return *b;
  return Select(flags::blas());
}

}  // namespace axle::runtime::cpu
