// The BLAS behind dot_general's large f32 / f64 products (Note [Which BLAS], blas.cc).
//
// OpenBLAS is linked; Intel MKL and oneDNN are loaded at run time when they are installed
// (`python3 -m pip install --no-deps mkl` or Debian's libmkl-rt; Debian's libdnnl2) and AXLE_BLAS
// allows them. oneDNN's sgemm takes only the small and medium f32 products, OpenBLAS the rest (Note
// [Products through oneDNN], blas.cc). All are called single-threaded from our pool (Note [BLAS
// threads], dot.cc), the BLAS through the CBLAS row-major interface.
#pragma once

#include <cstdint>
#include <string>

namespace axle::runtime::cpu {

// CBLAS's ?gemm with its enums passed as ints (the C ABI), of the standard values:
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int M, int N, int K, float alpha, const float* a,
                            int lda, const float* b, int ldb, float beta, float* c, int ldc);
using CblasDgemm = void (*)(int order, int trans_a, int trans_b, int M, int N, int K, double alpha, const double* a,
                            int lda, const double* b, int ldb, double beta, double* c, int ldc);

// oneDNN's dnnl_sgemm (row-major; 'N' / 'T'; dnnl_dim_t is int64_t; returns dnnl_status_t, 0 = success).
using DnnlSgemm = int (*)(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// oneDNN's dnnl_gemm_bf16bf16f32: C (f32) = op(A) op(B) with A and B bf16 (as their 16 bits),
// products exact and sums in f32; row-major as dnnl_sgemm.
using DnnlGemmBf16 = int (*)(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                             const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                             int64_t ldc);

struct BlasLibrary {
  std::string name;    // "mkl", "onednn" or "openblas"
  std::string detail;  // version and where it was loaded from, for `axle train`'s header
  CblasSgemm sgemm = nullptr;
  CblasDgemm dgemm = nullptr;
  // Whether the caller zeroes C itself and passes beta = 1 rather than beta = 0 (Note [Zeroing C
  // ourselves], dot.cc): OpenBLAS scales C by beta in a pass of its own before the product.
  bool zero_c_first = false;
  // "onednn" only: oneDNN's sgemm, for the f32 products DnnlTakes() gives it (Note [Products
  // through oneDNN]), and the OpenMP call that keeps it on the calling thread (omp_set_num_threads;
  // once per thread before its first product).
  DnnlSgemm dnnl_sgemm = nullptr;
  void (*dnnl_threads)(int) = nullptr;
  // oneDNN takes every product up to kDnnlMaxMacs (DnnlTakes' avx512): on hosts with AVX-512, where
  // its kernels beat OpenBLAS's on all of them (Note [Products through oneDNN]).
  bool dnnl_avx512 = false;
  // "onednn" only, on a CPU with AVX512-BF16 (vdpbf16ps) where oneDNN's bf16 GEMM computes a probe
  // product at load: bf16 x bf16 -> f32.
  // Null: bf16 products are widened to f32 and go through sgemm (Note [Products of halves], dot.cc).
  DnnlGemmBf16 dnnl_gemm_bf16 = nullptr;
};

// Whether a C[M, N] = op(A)[M, K] op(B)[K, N] f32 product goes to oneDNN's sgemm when the library
// has one (Note [Products through oneDNN]): any product of at most kDnnlAnyMacs multiply-adds, and
// those of at most kDnnlMaxMacs whose A is not transposed, except an untransposed B whose rows are a
// multiple of kDnnlBadLdb elements apart (ldb, the row stride of B as stored); with avx512
// (AVX-512 hosts, BlasLibrary::dnnl_avx512) every one of at most kDnnlMaxMacs, those two
// exceptions included. A function of the shape and of
// the host alone, so that which library computes a product (and so its bits) never depends on the
// schedule.
constexpr int64_t kDnnlAnyMacs = int64_t{1} << 18;
constexpr int64_t kDnnlMaxMacs = int64_t{1} << 26;
constexpr int64_t kDnnlBadLdb = 512;
inline bool DnnlTakes(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t ldb,
                      bool avx512 = false) {
  const int64_t macs = M * N * K;
  if (macs <= kDnnlAnyMacs) return true;
  if (avx512) return macs <= kDnnlMaxMacs;
  if (trans_a) return false;
  return macs <= kDnnlMaxMacs && (trans_b || ldb % kDnnlBadLdb != 0);
}

// The library AXLE_BLAS selects, chosen on first use: auto (the default) takes MKL on an Intel CPU
// when it loads, else oneDNN beside OpenBLAS when oneDNN loads, else OpenBLAS (Note [Which BLAS]);
// mkl and onednn are errors when their library does not load; openblas loads neither.
const BlasLibrary& Blas();

// "blas: <name>, <detail>" (Backend::Describe of the CPU backends, `axle train`'s header).
std::string DescribeBlas();

// Loads the named library ("mkl", "onednn" or "openblas") and makes it the one Blas() returns; throws
// axle::Error naming what to do when it cannot. For tests and benchmarks that compare the two.
const BlasLibrary& UseBlas(const std::string& name);

// The CPU's vendor string from cpuid leaf 0 ("GenuineIntel", "AuthenticAMD", ...); "unknown" off x86.
std::string CpuVendor();

// Whether MKL can be loaded here (AXLE_MKL_LIBRARY, else the one found at build time, else
// libmkl_rt on the loader's path). Loads it on the first call.
bool MklAvailable();

// Whether oneDNN's libdnnl can be loaded here (AXLE_DNNL_LIBRARY, else libdnnl.so.3 / .so.2 on the
// loader's path) with a sequential or OpenMP CPU runtime. Loads it on the first call.
bool DnnlAvailable();

}  // namespace axle::runtime::cpu
