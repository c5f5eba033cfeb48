// The CPU backend's own flags (core/flags.h: one registry, one getenv; `axle flags` lists these
// after the flags every layer reads). Its strategies' switches and which BLAS runs products are
// this backend's business, so they are declared here rather than in core's table.
#pragma once

#include <string>

#include "core/flags.h"

namespace axle::flags {

// X(type, name, default, help), as AXLE_FLAGS.
#define AXLE_CPU_FLAGS(X) \
  X(bool, chains, true,                                                                      \
    "The CPU executor runs a batched product and the kernels that read it slice by slice, each thread its slices of all of them (Note [Batch-sliced chains]); 0 = kernel by kernel.") \
  X(bool, groups, true,                                                                      \
    "The CPU executor runs consecutive independent loop kernels as one pool call, their elements claimed as one loop (Note [Independent kernels as one loop]); 0 = one call each.") \
  X(bool, views, true,                                                                       \
    "The CPU executor lets products read slices of a buffer and write into a transpose's or concatenation's result in place of those copies (Note [Products into views]); 0 = copy.") \
  X(bool, transpose_b, true,                                                                 \
    "A product item whose B is stored transposed copies it to [K, N] first where oneDNN's AVX-512 sgemm is faster so: long and narrow, or small (Note [B transposed for oneDNN]); 0 = leave B as it is.") \
  X(std::string, blas, std::string("auto"),                                                   \
    "BLAS for dot_general's large products: auto (MKL on Intel CPUs when it loads, else onednn when oneDNN loads, else OpenBLAS), mkl, onednn (oneDNN's sgemm for small and medium f32 products, OpenBLAS for the rest) or openblas.") \
  X(std::string, mkl_library, std::string(),                                                 \
    "Path of MKL's libmkl_rt.so.N; empty: the one CMake found at build time, else libmkl_rt on the loader's path.") \
  X(std::string, dnnl_library, std::string(),                                                \
    "Path of oneDNN's libdnnl.so.N; empty: libdnnl.so.3 or libdnnl.so.2 on the loader's path.")

AXLE_DECLARE_FLAGS(AXLE_CPU_FLAGS)

}  // namespace axle::flags
