// The BLAS behind dot_general's large f32 / f64 products (Note [Which BLAS], blas.cc).
//
// OpenBLAS is linked; Intel MKL is loaded at run time when it is installed (`python3 -m pip
// install --no-deps mkl`, or Debian's libmkl-rt) and AXLE_BLAS allows it. Both are called
// single-threaded from our pool (Note [BLAS threads], cpu_dot.cc), through the CBLAS row-major
// interface.
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

struct BlasLibrary {
  std::string name;    // "mkl" or "openblas"
  std::string detail;  // version and where it was loaded from, for `axle train`'s header
  CblasSgemm sgemm = nullptr;
  CblasDgemm dgemm = nullptr;
  // Whether the caller zeroes C itself and passes beta = 1 rather than beta = 0 (Note [Zeroing C
  // ourselves], cpu_dot.cc): OpenBLAS scales C by beta in a pass of its own before the product.
  bool zero_c_first = false;
};

// The library AXLE_BLAS selects, chosen on first use: auto (the default) takes MKL on an Intel CPU
// when it loads and OpenBLAS otherwise (Note [Which BLAS]); mkl is an error when MKL does not
// load; openblas never loads MKL.
const BlasLibrary& Blas();

// Loads the named library ("mkl" or "openblas") and makes it the one Blas() returns; throws
// axle::Error naming what to do when it cannot. For tests and benchmarks that compare the two.
const BlasLibrary& UseBlas(const std::string& name);

// The CPU's vendor string from cpuid leaf 0 ("GenuineIntel", "AuthenticAMD", ...); "unknown" off x86.
std::string CpuVendor();

// Whether MKL can be loaded here (AXLE_MKL_LIBRARY, else the one found at build time, else
// libmkl_rt on the loader's path). Loads it on the first call.
bool MklAvailable();

}  // namespace axle::runtime::cpu
