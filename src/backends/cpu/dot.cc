// dot_general on the CPU: operands are viewed as batches of [M, K] x [K, N] matrices (read in
// place, with a row stride and a transpose flag, whenever each operand's two groups of dims index
// like one dim each, whatever the batch strides; any other layout is copied once with
// StridedCopy), then
//   - f32 / f64 products with M*N*K >= BlasMinFlops() call sgemm / dgemm of MKL or OpenBLAS (Note
//     [Which BLAS], blas.cc), split over our thread pool (Note [BLAS threads]). BLAS accumulates in
//     the element type in its own order, so results differ from the interpreter's (double
//     accumulation, row-major order, one rounding) by reassociation: a few ulps relative to the
//     sum of |products|, more under cancellation. A product with an inf or NaN result is
//     recomputed by the exact loop (Note [BLAS and non-finite values]).
//   - smaller f32 / f64 products use an exact loop: double accumulation from -0 over k in order,
//     one rounding, an empty contraction gives +0 — bitwise equal to the interpreter.
//   - bf16 / f16 products: halves multiplied exactly and summed in f32 (Note [Products of
//     halves]), through oneDNN's bf16 GEMM or sgemm;
//   - every other dtype goes to the interpreter's kernel.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/cpu_flags.h"
#include "core/half.h"
#include "ir/shape_inference.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;

std::atomic<int64_t> g_blas_min_flops{32 * 32 * 32};
std::atomic<int64_t> g_operand_copies{0};
std::atomic<int64_t> g_transposed_operands{0};

// Note [BLAS threads]
// OpenBLAS runs its own thread pool, and its threads keep spinning for a while after a call: the
// fused kernel that follows a GEMM then shares its cores with them (a 65K-element add ran at
// 0.6 GB/s right after a GEMM), and on small products the threads cost more than they give (the
// tiny GPT-2 config spent ~40% of its time in the kernel with 2 BLAS threads). So BLAS always
// runs single-threaded, and the parallelism is ours:
//   - a batch of products (B >= threads, or any batch under kSplitMacs in all) is split over the
//     pool by batch index (the attention scores are 32 products of 64 x 64 x 32);
//   - a few large products are each split into tiles of C (Note [Product tiles]).
// Measured on GPT-2 124M (2 cores, batch 4 x 64): 74-82 tokens/s against 67-68 with OpenBLAS's
// own two threads; the small config gains ~5%. openblas_set_num_threads is process-wide; without
// OpenBLAS (another BLAS behind cblas.h) the weak symbol is null and that BLAS keeps its policy.
// MKL is loaded with its sequential layer (blas.cc), so it has no threads at all.
constexpr int64_t kSplitMacs = int64_t{1} << 20;

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

void SetBlasThreads(int n) {
  static std::atomic<int> current{-1};
  if (openblas_set_num_threads == nullptr || current.load(std::memory_order_relaxed) == n) return;
  openblas_set_num_threads(n);
  current.store(n, std::memory_order_relaxed);
}

// Note [Product tiles]
// A large product is split over the pool's threads by tiles of C, each one BLAS call. Up to a
// few MB of C per thread, one block per thread (by rows, or by columns when M is small) is best:
// every extra tile packs its panels of A and B again, and the products whose K is small (the
// weight gradients, K = batch x seq) lost 10-20% with 4-8 tiles. Above that, a block no longer
// stays in cache between OpenBLAS's passes over it (it first scales C by beta, then adds the
// product panel by panel), and both cores stream it from memory. So such a product gets tiles of
// at most kTileElements, about a multiple of the thread count of them, claimed one at a time.
// GPT-2 124M's LM head, 3 interleaved pairs of 8-step runs: the weight gradient (C = 50257 x 768,
// K = 256) took 133 ms a call in two halves and 119 in 74 tiles of 688 rows; the logits
// (C = 256 x 50257) 123 -> 119 ms. Every tile is computed by the same call whichever thread runs
// it, so the result does not depend on the schedule.
constexpr int64_t kTileElements = int64_t{1} << 19;      // 2 MB of f32
constexpr int64_t kBlockElements = int64_t{1} << 21;     // above this per thread, tile

int64_t RoundUp16(int64_t x) { return (x + 15) / 16 * 16; }

thread_local bool tls_one_thread = false;  // ProductsOnOneThread
thread_local int tls_cut_for = 0;          // ProductsCutFor; 0: the pool's size

}  // namespace

ProductsOnOneThread::ProductsOnOneThread() : previous_(tls_one_thread) { tls_one_thread = true; }
ProductsOnOneThread::~ProductsOnOneThread() { tls_one_thread = previous_; }
ProductsCutFor::ProductsCutFor(int threads) : previous_(tls_cut_for) { tls_cut_for = threads; }
ProductsCutFor::~ProductsCutFor() { tls_cut_for = previous_; }

DotTiles DotTiling(int64_t M, int64_t N, int64_t K, int threads) {
  DotTiles t;
  if (M * N <= kBlockElements * threads) {
    // One block per thread, on multiples of 16 so the split falls on BLAS's own register blocks.
    // By columns when M is small, or when N > M and the contraction is long: each thread then
    // packs only its half of B (the weights, in a layer's forward product and its input
    // gradient) and both pack the short A; two halves of rows would each pack all of B.
    // Measured (interleaved, medians of 21): GPT-2 124M's forward and input-gradient products
    // 1-5% faster by columns; its weight gradients (K = 256 < M) 3-4% faster by rows.
    (M >= N || (M >= 64 * threads && K < M) ? t.rows : t.cols) = threads;
    t.row_extent = t.rows == 1 ? M : RoundUp16((M + t.rows - 1) / t.rows);
    t.col_extent = t.cols == 1 ? N : RoundUp16((N + t.cols - 1) / t.cols);
    return t;
  }
  // Cut the longer side into about a multiple of `threads` tiles of at most kTileElements, on
  // multiples of 16; cut the other side too only when a 16-wide strip is still too large.
  const bool by_rows = M >= N;
  const int64_t along = by_rows ? M : N, across = by_rows ? N : M;
  const int64_t across_cuts = std::max<int64_t>(1, (16 * across + kTileElements - 1) / kTileElements);
  const int64_t across_extent = across_cuts == 1 ? across : RoundUp16((across + across_cuts - 1) / across_cuts);
  int64_t cuts = std::max<int64_t>(1, (along * across_extent + kTileElements - 1) / kTileElements);
  cuts = (cuts + threads - 1) / threads * threads;
  const int64_t along_extent = RoundUp16((along + cuts - 1) / cuts);
  (by_rows ? t.row_extent : t.col_extent) = along_extent;
  (by_rows ? t.col_extent : t.row_extent) = across_extent;
  t.rows = (M + t.row_extent - 1) / t.row_extent;
  t.cols = (N + t.col_extent - 1) / t.col_extent;
  return t;
}

namespace {

// An operand as a batch of row-major matrices [rows_wanted, cols_wanted] (or, with trans, stored
// as [cols_wanted, rows_wanted]) whose rows are ld elements apart; matrix i starts at offset[i].
template <typename T>
struct Mat {
  const T* data = nullptr;
  bool trans = false;
  int64_t ld = 0;
  std::vector<int64_t> offset;
  std::vector<T> copy;
  const T* at(int64_t i) const { return data + offset[static_cast<size_t>(i)]; }
};

// Whether `dims` (in the listed order, dims of size 1 ignored) are adjacent in x's row-major
// layout, so they index like one dim; sets that dim's stride (1 when no dim is left).
bool Collapses(const Shape& shape, const std::vector<int64_t>& xs, const std::vector<int64_t>& dims,
               int64_t* stride) {
  int64_t prev = -1;
  *stride = 1;
  for (int64_t d : dims) {
    if (shape.dim(d) == 1) continue;
    if (prev >= 0 && xs[static_cast<size_t>(prev)] != xs[static_cast<size_t>(d)] * shape.dim(d)) return false;
    prev = d;
    *stride = xs[static_cast<size_t>(d)];
  }
  return true;
}

// Whether Arrange reads an operand of `shape` stored with strides `xs` in place (no copy): the
// two groups of dims each index like one dim, with the second innermost (or, trans, the first),
// and stored rows do not overlap (BLAS needs ld >= the stored row length; the layout guarantees it when the groups
// collapse, checked anyway). Sets the groups' strides.
bool InPlaceLayout(const Shape& shape, const std::vector<int64_t>& xs, const std::vector<int64_t>& first,
                   const std::vector<int64_t>& second, bool* trans, int64_t* s_first, int64_t* s_second) {
  int64_t rows = 1, cols = 1;
  for (int64_t d : first) rows *= shape.dim(d);
  for (int64_t d : second) cols *= shape.dim(d);
  const bool first_ok = Collapses(shape, xs, first, s_first), second_ok = Collapses(shape, xs, second, s_second);
  const bool plain = first_ok && second_ok && *s_second == 1 && (rows == 1 || *s_first >= cols);
  *trans = !plain && first_ok && second_ok && *s_first == 1 && *s_second >= rows;
  return plain || *trans;
}

// Brings `x` to [batch..., first..., second...] (each group in the listed order). No copy when the
// second group indexes like one innermost dim and the first like one dim of any stride (the row
// stride), or the same with the groups swapped (trans); the batch dims may then have any strides
// (the heads of attention, [b, t, h, d] with batch (b, h), are read in place). Else a copy.
// The operand is the value of `shape` that view `v` places in buffer x (Note [Products into views]).
template <typename T>
void Arrange(const Literal& x, const Shape& shape, const View& v, const std::vector<int64_t>& batch,
             const std::vector<int64_t>& first, const std::vector<int64_t>& second, Mat<T>& m) {
  const std::vector<int64_t> xs = v.plain() ? shape.Strides() : v.strides;
  int64_t bcount = 1;
  for (int64_t d : batch) bcount *= shape.dim(d);
  int64_t rows = 1, cols = 1;
  for (int64_t d : first) rows *= shape.dim(d);
  for (int64_t d : second) cols *= shape.dim(d);
  m.data = x.data<T>() + v.offset;
  bool trans = false;
  int64_t s_first = 1, s_second = 1;
  if (InPlaceLayout(shape, xs, first, second, &trans, &s_first, &s_second)) {
    m.trans = trans;
    m.ld = trans ? s_second : (rows > 1 ? s_first : std::max<int64_t>(1, cols));
    m.offset.assign(static_cast<size_t>(bcount), 0);
    for (int64_t i = 0; i < bcount; ++i) {
      int64_t rem = i, off = 0;
      for (size_t k = batch.size(); k-- > 0;) {
        const int64_t d = batch[k];
        off += (rem % shape.dim(d)) * xs[static_cast<size_t>(d)];
        rem /= shape.dim(d);
      }
      m.offset[static_cast<size_t>(i)] = off;
    }
    return;
  }
  std::vector<int64_t> perm = batch;
  perm.insert(perm.end(), first.begin(), first.end());
  perm.insert(perm.end(), second.begin(), second.end());
  std::vector<int64_t> dims, strides;
  for (int64_t p : perm) {
    dims.push_back(shape.dim(p));
    strides.push_back(xs[static_cast<size_t>(p)]);
  }
  g_operand_copies.fetch_add(1, std::memory_order_relaxed);
  m.copy.resize(static_cast<size_t>(shape.NumElements()));
  StridedCopy(x.bytes().data(), v.offset, dims, strides, sizeof(T), reinterpret_cast<uint8_t*>(m.copy.data()));
  m.data = m.copy.data();
  m.trans = false;
  m.ld = std::max<int64_t>(1, cols);
  m.offset.resize(static_cast<size_t>(bcount));
  for (int64_t i = 0; i < bcount; ++i) m.offset[static_cast<size_t>(i)] = i * rows * cols;
}


// A dot_general's dims: the free dims of each operand, and the product as B batches of
// [M, K] x [K, N].
struct ProductDims {
  std::vector<int64_t> lf, rf;
  int64_t B = 1, M = 1, K = 1, N = 1;
};
ProductDims DimsOf(const Node& node) {
  const auto& d = node.attrs_as<ir::DotGeneralAttrs>();
  const Shape& ls = node.operand(0)->shape();
  const Shape& rs = node.operand(1)->shape();
  ProductDims p;
  p.lf = ir::DotFreeDims(ls.rank(), d.lhs_batch, d.lhs_contracting);
  p.rf = ir::DotFreeDims(rs.rank(), d.rhs_batch, d.rhs_contracting);
  for (int64_t x : d.lhs_batch) p.B *= ls.dim(x);
  for (int64_t x : p.lf) p.M *= ls.dim(x);
  for (int64_t x : d.lhs_contracting) p.K *= ls.dim(x);
  for (int64_t x : p.rf) p.N *= rs.dim(x);
  return p;
}

// Both operands as batches of row-major matrices: a [B, M, K], b [B, K, N].
template <typename T>
void ArrangeOperands(const Node& node, Operands ops, const ProductDims& p, const DotViews& v, Mat<T>& a, Mat<T>& b) {
  const auto& d = node.attrs_as<ir::DotGeneralAttrs>();
  Arrange(*ops[0], node.operand(0)->shape(), v.lhs, d.lhs_batch, p.lf, d.lhs_contracting, a);
  Arrange(*ops[1], node.operand(1)->shape(), v.rhs, d.rhs_batch, d.rhs_contracting, p.rf, b);
}

// The result as B row-major [M, N] matrices: item i at offset[i], rows ld apart, columns adjacent.
// Plain: the result's own buffer, item after item. Through a view (Note [Products into views]):
// its [batch..., lhs free..., rhs free...] dims must index as batch strides, one row stride and
// adjacent columns (ResultLayout).
template <typename T>
struct CMat {
  T* data = nullptr;
  int64_t ld = 0;
  std::vector<int64_t> offset;
  T* at(int64_t i) const { return data + offset[static_cast<size_t>(i)]; }
};

// Whether view v can hold the product's result as CMat does; sets the row stride.
bool ResultLayout(const Node& node, const ProductDims& p, const View& v, int64_t* ld) {
  const Shape& shape = node.result()->shape();
  const size_t nb = node.attrs_as<ir::DotGeneralAttrs>().lhs_batch.size();
  std::vector<int64_t> rows, cols;
  for (size_t k = 0; k < p.lf.size(); ++k) rows.push_back(static_cast<int64_t>(nb + k));
  for (size_t k = 0; k < p.rf.size(); ++k) cols.push_back(static_cast<int64_t>(nb + p.lf.size() + k));
  int64_t s_rows = 1, s_cols = 1;
  if (!Collapses(shape, v.strides, rows, &s_rows) || !Collapses(shape, v.strides, cols, &s_cols)) return false;
  if (p.N > 1 && s_cols != 1) return false;
  *ld = p.M > 1 ? s_rows : std::max<int64_t>(1, p.N);
  return p.M == 1 || *ld >= p.N;
}

template <typename T>
void ArrangeResult(const Node& node, Literal& out, const ProductDims& p, const View& v, CMat<T>& c) {
  c.data = out.mutable_data<T>() + v.offset;
  c.offset.resize(static_cast<size_t>(p.B));
  if (v.plain()) {
    c.ld = p.N;
    for (int64_t i = 0; i < p.B; ++i) c.offset[static_cast<size_t>(i)] = i * p.M * p.N;
    return;
  }
  const bool ok = ResultLayout(node, p, v, &c.ld);
  AXLE_CHECK(ok, "a product's result view does not fit its layout (DotTakesViews was not asked)");
  const Shape& shape = node.result()->shape();
  const size_t nb = node.attrs_as<ir::DotGeneralAttrs>().lhs_batch.size();
  for (int64_t i = 0; i < p.B; ++i) {
    int64_t rem = i, off = 0;
    for (size_t k = nb; k-- > 0;) {
      off += (rem % shape.dim(static_cast<int64_t>(k))) * v.strides[k];
      rem /= shape.dim(static_cast<int64_t>(k));
    }
    c.offset[static_cast<size_t>(i)] = off;
  }
}

// Whether any of the n elements at p (32- or 64-bit floats, read as bits) is an inf or NaN
// (exponent bits all ones). One OR-reduction the compiler vectorises; cloned for AVX-512F and AVX2,
// chosen when the program loads, because Axle itself is built for baseline x86-64 (SSE2), where
// this ran at a quarter of the width and cost GPT-2 small ~4% of its step.
#if defined(__x86_64__) && !defined(__clang__)
#define AXLE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AXLE_VECTOR_CLONES
#endif
// An element is an inf or NaN when its exponent bits are all ones, that is when adding the lowest
// exponent bit to them carries into the sign bit: bad collects (b & kExp) + kExpLow for every b and
// its sign bit answers. Three integer ops a vector, no compares (the compare-and-mask form read
// 256 KB in cache at 68 GB/s on a Zen 4 core, this one at 86).
// Blocks of a fixed 64, then 16 elements: GCC's -O2 vectoriser (its "very cheap" cost model) only
// takes loops whose trip count it knows. The 16s are for the rows of a product written into a view
// (Note [Products into views]): an attention head's 32 floats a row, which the 64s left to the
// scalar tail (0.6 us an item, slower than the copy the view saved).
template <typename T, typename Bits, Bits kExp, int64_t kBlock>
inline void OrBlocks(const T* p, int64_t n, int64_t& i, Bits& bad) {
  constexpr Bits kExpLow = kExp & ~(kExp << 1);
  for (; i + kBlock <= n; i += kBlock) {
    const T* q = p + i;
    for (int64_t j = 0; j < kBlock; ++j) {
      Bits b;
      std::memcpy(&b, q + j, sizeof(b));
      bad |= static_cast<Bits>((b & kExp) + kExpLow);
    }
  }
}
// Whether any element of the rows x cols block at p (rows ld apart) is an inf or NaN.
template <typename T, typename Bits, Bits kExp>
inline bool AnyNonFiniteImpl(const T* p, int64_t rows, int64_t cols, int64_t ld) {
  Bits bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = p + r * ld;
    int64_t i = 0;
    OrBlocks<T, Bits, kExp, 64>(row, cols, i, bad);
    OrBlocks<T, Bits, kExp, 16>(row, cols, i, bad);
    OrBlocks<T, Bits, kExp, 1>(row, cols, i, bad);
  }
  return (bad >> (sizeof(Bits) * 8 - 1)) != 0;
}
AXLE_VECTOR_CLONES bool AnyNonFinite32(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  return AnyNonFiniteImpl<float, uint32_t, 0x7f800000u>(p, rows, cols, ld);
}
AXLE_VECTOR_CLONES bool AnyNonFinite64(const double* p, int64_t rows, int64_t cols, int64_t ld) {
  return AnyNonFiniteImpl<double, uint64_t, 0x7ff0000000000000ull>(p, rows, cols, ld);
}
bool AnyNonFinite(const float* p, int64_t rows, int64_t cols, int64_t ld) { return AnyNonFinite32(p, rows, cols, ld); }
bool AnyNonFinite(const double* p, int64_t rows, int64_t cols, int64_t ld) { return AnyNonFinite64(p, rows, cols, ld); }

// Whether no element of the rows x cols block at p (row stride ld) is an inf or NaN. It runs on
// every block BLAS writes, right after BLAS wrote it (still in cache), so it must cost next to
// nothing: a contiguous block is one scan, otherwise one scan a row, in one call.
template <typename T>
bool BlockFinite(const T* p, int64_t rows, int64_t cols, int64_t ld) {
  if (ld == cols) return !AnyNonFinite(p, 1, rows * cols, 0);
  return !AnyNonFinite(p, rows, cols, ld);
}

// Note [Zeroing C ourselves]
// With beta = 0 OpenBLAS first runs its "beta" routine over C, a store loop of its own, and then
// adds the product into C panel by panel. On a Zen 2 EPYC that routine was 13% of all of GPT-2
// small's CPU time (`perf`, sgemm_beta_ZEN next to sgemm_kernel_ZEN's 41%): its stores are slow
// on C blocks that the kernels left cold. With beta = 1 OpenBLAS skips that pass, so we clear C
// with memset (glibc's vector stores) and pass beta = 1. The kernel then adds the product to
// +0.0, as after its own beta pass, so the bits are the same. One thread, warm, 512 x 384 x 128:
// 566 -> 520 us; 64 x 64 x 32 (the attention's): 4.8 -> 3.8 us. MKL (on Intel CPUs only, Note
// [Which BLAS]) keeps beta = 0: it was not measured to need this.
template <typename T>
void ClearBlock(T* c, int64_t rows, int64_t cols, int64_t ldc) {
  if (ldc == cols) {
    std::memset(c, 0, sizeof(T) * static_cast<size_t>(rows * cols));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) std::memset(c + r * ldc, 0, sizeof(T) * static_cast<size_t>(cols));
}

thread_local bool tls_dnnl_one_thread = false;  // this thread set its OpenMP thread count to 1

// C[M, N] = op(A) op(B) with explicit leading dimensions (row-major), through the BLAS in use, or
// through oneDNN when it takes the product (Note [Products through oneDNN], blas.cc).
void Gemm(const BlasLibrary& blas, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (blas.dnnl_sgemm != nullptr && DnnlTakes(ta, tb, M, N, K, ldb, blas.dnnl_avx512)) {
    if (!tls_dnnl_one_thread) {
      if (blas.dnnl_threads != nullptr) blas.dnnl_threads(1);
      tls_dnnl_one_thread = true;
    }
    const int status = blas.dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (status != 0)
      Fail("oneDNN's sgemm failed (dnnl_status_t {}) on a {} x {} x {} product (lda {}, ldb {}, ldc {}); "
           "AXLE_BLAS=openblas avoids it",
           status, M, N, K, lda, ldb, ldc);
    return;
  }
  if (blas.zero_c_first) ClearBlock(c, M, N, ldc);
  blas.sgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans, tb ? kCblasTrans : kCblasNoTrans,
             static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, a, static_cast<int>(lda), b,
             static_cast<int>(ldb), blas.zero_c_first ? 1.0f : 0.0f, c, static_cast<int>(ldc));
}
void Gemm(const BlasLibrary& blas, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* a,
          int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  if (blas.zero_c_first) ClearBlock(c, M, N, ldc);
  blas.dgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans, tb ? kCblasTrans : kCblasNoTrans,
             static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0, a, static_cast<int>(lda), b,
             static_cast<int>(ldb), blas.zero_c_first ? 1.0 : 0.0, c, static_cast<int>(ldc));
}

// The exact loop (the interpreter's: products summed in double, rounded once) over rows [lo, hi)
// of C viewed as [B * M, N].
template <typename T>
void ExactRows(const Mat<T>& a, const Mat<T>& b, const CMat<T>& c, int64_t M, int64_t N, int64_t K, int64_t lo,
               int64_t hi) {
  // Strides of a[m, k] and b[k, n] inside one batch.
  const int64_t am = a.trans ? 1 : a.ld, ak = a.trans ? a.ld : 1;
  const int64_t bk = b.trans ? 1 : b.ld, bn = b.trans ? b.ld : 1;
  for (int64_t bm = lo; bm < hi; ++bm) {
    const int64_t i = bm / M, m = bm % M;
    const T* arow = a.at(i) + m * am;
    const T* bmat = b.at(i);
    T* crow = c.at(i) + m * c.ld;
    for (int64_t n = 0; n < N; ++n) {
      double acc = -0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(arow[k * ak]) * static_cast<double>(bmat[k * bk + n * bn]);
      crow[n] = static_cast<T>(acc);
    }
  }
}

// Note [B transposed for oneDNN]
// oneDNN's AVX-512 sgemm is slower on B stored transposed (C = A B^T, B as [N, K]) than on B as
// [K, N]. One Zen 4 core, warm (the sweeps are in bench/README.md, session 30):
//   - long contractions with a narrow B: at M = 512, 14% at K = 512, N = 64, 8% at N = 128, 3%
//     at N = 512; 23% at K = 1024, N = 64; 2-6% for every K <= 256;
//   - small B (the attention's heads): ~0.35 ns more a float of B, 19-23% of a 64-row product
//     with N <= 64 (64 x 64 x 32: 3.65 against 2.86 us), 5-8% with N = 128.
// GPT-2 small's MLP input gradient dx = dh w^T (512 x 128 x 512) is of the first kind, the longer
// product of its backward pair (Note [Products side by side]): 656 us against the weight
// gradient's 596, the other thread waiting. Its attention's scores q k^T and the values'
// gradient dO v^T (64 x 64 x 32 a head) are of the second. So an item whose B is transposed, with
// K >= kTransposeMinK, N <= K / 4 and at least kTransposeMinRows rows, or with N <= kSmallMaxN,
// K <= kSmallMaxK and at least kSmallMinRows rows, gets B copied into its [K, N] layout first
// (TransposeInto, 4 x 4 blocks of SSE shuffles: ~0.12-0.2 ns a float) and runs as A B. In place
// (traced, near): that dx 656 / 665 -> 612 / 607 us; the attention's forward chains 205-211 ->
// 189-202 us, its backward ones 309-322 -> 305-325. Where the penalty is smaller the copy costs
// about what it saves (the other input gradients, K = 128 or 384, measured in place: no gain,
// or a loss when B was cold).
// The rule reads the whole item's shape and layout, and a tile of an item the rule takes (Note
// [Product tiles]; a chain's row block) copies its columns of B too (B once per tile: a row tile
// copies all of it), so the calls that compute an item, and so its bits, never depend on the
// schedule. (Until session 40 only whole items copied, and a product ran whole in a pair but in
// tiles unpaired: a recomputation under a memory budget that split a pair changed the bits of
// GPT-2 small's MLP input gradient, Note [Rematerialization under a budget].) Measured on AVX-512
// only: elsewhere B stays as it is.
constexpr int64_t kTransposeMinK = 512;
constexpr int64_t kTransposeMinRows = 256;
constexpr int64_t kTransposeMaxElements = int64_t{1} << 22;  // a 16 MB copy at most
constexpr int64_t kSmallMaxN = 64, kSmallMaxK = 128, kSmallMinRows = 64;

// Whether item calls of this [M, K] x [K, N] product (M, N: the whole item's) read B copied to
// [K, N] (Note [B transposed for oneDNN]): the item's shape and layout alone decide, for the whole
// item and for each of its tiles.
bool CopiesB(const BlasLibrary& lib, const Mat<float>& a, const Mat<float>& b, int64_t M, int64_t N, int64_t K) {
  const bool long_narrow = K >= kTransposeMinK && 4 * N <= K && M >= kTransposeMinRows && N * K <= kTransposeMaxElements;
  const bool small = N <= kSmallMaxN && K <= kSmallMaxK && M >= kSmallMinRows;
  return b.trans && (long_narrow || small) && lib.dnnl_sgemm != nullptr && lib.dnnl_avx512 &&
         DnnlTakes(a.trans, false, M, N, K, N, true) && flags::transpose_b();
}

// Rows [r0, r1) x columns [c0, c1) of item i of a [M, K] x [K, N] product through BLAS, one call;
// false when the block holds an inf or NaN. The whole item is the block [0, M) x [0, N); a tile
// (Note [Product tiles]) or a chain's row block a part of it.
template <typename T>
bool GemmBlock(const BlasLibrary& lib, const Mat<T>& a, const Mat<T>& b, const CMat<T>& c, int64_t M, int64_t N,
               int64_t K, int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (r0 >= r1 || c0 >= c1) return true;
  const T* ab = a.at(i) + (a.trans ? r0 : r0 * a.ld);
  const T* bb = b.at(i) + (b.trans ? c0 * b.ld : c0);
  T* cb = c.at(i) + r0 * c.ld + c0;
  if constexpr (std::is_same_v<T, float>) {
    if (CopiesB(lib, a, b, M, N, K)) {
      // Note [B transposed for oneDNN]: the block's columns of B, as [K, c1 - c0].
      const int64_t w = c1 - c0;
      thread_local std::vector<float> bt;
      if (bt.size() < static_cast<size_t>(w * K)) bt.resize(static_cast<size_t>(w * K));
      TransposeInto(bb, w, K, b.ld, bt.data(), w);
      g_transposed_operands.fetch_add(1, std::memory_order_relaxed);
      Gemm(lib, a.trans, false, r1 - r0, w, K, ab, a.ld, bt.data(), w, cb, c.ld);
      return BlockFinite(cb, r1 - r0, w, c.ld);
    }
  }
  Gemm(lib, a.trans, b.trans, r1 - r0, c1 - c0, K, ab, a.ld, bb, b.ld, cb, c.ld);
  return BlockFinite(cb, r1 - r0, c1 - c0, c.ld);
}

// Batch item i of the product through BLAS, whole: one call, whether the whole product runs or a
// chain's slice of it.
template <typename T>
bool GemmItem(const BlasLibrary& lib, const Mat<T>& a, const Mat<T>& b, const CMat<T>& c, int64_t M, int64_t N,
              int64_t K, int64_t i) {
  return GemmBlock(lib, a, b, c, M, N, K, i, 0, M, 0, N);
}

// Note [BLAS threads], Note [Product tiles]: runs the B items of a [M, K] x [K, N] product over
// the pool as whole items (a batch, or products under kSplitMacs), or, for a few large products,
// as tiles of C (DotTiling for the threads the executor cut it for). `item(i)` computes item i,
// `tile(i, r0, r1, c0, c1)` rows [r0, r1) x columns [c0, c1) of it; each returns false when its
// block holds an inf or NaN. Returns whether every block was finite. Which call computes a block
// depends on the shape and the target's threads alone, never on the schedule.
template <typename Item, typename Tile>
bool RunProductBlocks(int64_t B, int64_t M, int64_t N, int64_t K, Item&& item, Tile&& tile) {
  const bool alone = tls_one_thread;
  // Note [Products cut for the target]: the target's count when the executor says it; on one
  // thread too (Note [Products side by side]: the same calls, run one after the other).
  const int threads = tls_cut_for > 0 ? tls_cut_for : ThreadPool::Global().num_threads();
  std::atomic<bool> finite{true};
  auto check = [&](bool ok) {
    if (!ok) finite.store(false, std::memory_order_relaxed);
  };
  if (B >= threads || M * N * K < kSplitMacs || threads == 1) {
    auto items = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) check(item(i));
    };
    if (alone)
      items(0, B);
    else
      ThreadPool::Global().ParallelFor(B, B * M * N * K >= kSplitMacs ? 1 : B + 1, items);
  } else {
    // Few large products: each one is cut into tiles of C (Note [Product tiles]).
    const DotTiles tiles = DotTiling(M, N, K, threads);
    const int64_t count = tiles.rows * tiles.cols;
    for (int64_t i = 0; i < B; ++i) {
      auto run = [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          const int64_t r0 = std::min(M, t / tiles.cols * tiles.row_extent), r1 = std::min(M, r0 + tiles.row_extent);
          const int64_t c0 = std::min(N, t % tiles.cols * tiles.col_extent), c1 = std::min(N, c0 + tiles.col_extent);
          if (r0 < r1 && c0 < c1) check(tile(i, r0, r1, c0, c1));
        }
      };
      if (alone)
        run(0, count);
      else
        ThreadPool::Global().ParallelFor(count, 1, run, static_cast<int>(std::min<int64_t>(count, 1 << 20)));
    }
  }
  return finite.load(std::memory_order_relaxed);
}

// Items [lo, hi) of C set to +0 (an empty contraction).
template <typename T>
void ZeroItems(const CMat<T>& c, int64_t M, int64_t N, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i)
    for (int64_t m = 0; m < M; ++m) std::fill(c.at(i) + m * c.ld, c.at(i) + m * c.ld + N, T(0));
}

template <typename T>
bool DotKernelT(const Node& node, Operands ops, Literal& out, const DotViews& v) {
  const ProductDims dims = DimsOf(node);
  const int64_t B = dims.B, M = dims.M, K = dims.K, N = dims.N;
  if (node.result()->shape().NumElements() == 0) return true;
  CMat<T> c;
  ArrangeResult(node, out, dims, v.out, c);
  if (K == 0) {
    ZeroItems(c, M, N, 0, B);
    return true;
  }
  // Note [BLAS and non-finite values]: BLAS sums in the element type in its own order, so a product
  // whose f32 partial sums overflow can come out inf where the interpreter's double accumulation
  // stays finite; and an inf or NaN operand must give the interpreter's inf / NaN pattern. So every
  // block BLAS writes is checked (in cache, ~free) and a product with any inf or NaN result is
  // recomputed by the exact loop. This relies on the BLAS's gemm multiplying every pair (OpenBLAS's
  // and MKL's do; neither skips zero entries, as reference BLAS does; tested on both): then an inf
  // or NaN operand element reaches every result of its row or column, and an all-finite result
  // means all-finite operands. Checking the operands before the call instead read ~1.3 GB per
  // GPT-2 124M step, 0.15-0.5 s of its ~2.3 s.
  const bool blas = M * N * K >= BlasMinFlops() && std::max({M, N, K}) < (int64_t{1} << 31);
  Mat<T> a, b;
  ArrangeOperands(node, ops, dims, v, a, b);
  if (blas) {
    // Note [BLAS threads]: BLAS always runs single-threaded, on our pool's threads.
    SetBlasThreads(1);
    const BlasLibrary& lib = Blas();
    const bool finite = RunProductBlocks(
        B, M, N, K, [&](int64_t i) { return GemmItem(lib, a, b, c, M, N, K, i); },
        [&](int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
          return GemmBlock(lib, a, b, c, M, N, K, i, r0, r1, c0, c1);
        });
    if (finite) return true;
  }
  ThreadPool::Global().ParallelFor(B * M, std::max<int64_t>(1, kParallelElements / std::max<int64_t>(N * K, 1)),
                                   [&](int64_t lo, int64_t hi) { ExactRows(a, b, c, M, N, K, lo, hi); });
  return true;
}

// Items [lo, hi) of a batched product, on this thread: the calls DotKernelT makes for them when
// it runs one BLAS call per batch item, or its exact loop. False when a BLAS block came out inf or
// NaN (the caller runs the whole product again through DotKernelT, Note [BLAS and non-finite
// values]). Only for products ChainSlices accepts: no operand copy, one call per item.
template <typename T>
bool DotItemsT(const Node& node, Operands ops, Literal& out, int64_t lo, int64_t hi, const DotViews& v) {
  const ProductDims dims = DimsOf(node);
  const int64_t M = dims.M, K = dims.K, N = dims.N;
  if (M * N == 0) return true;
  CMat<T> c;
  ArrangeResult(node, out, dims, v.out, c);
  if (K == 0) {
    ZeroItems(c, M, N, lo, hi);
    return true;
  }
  Mat<T> a, b;
  ArrangeOperands(node, ops, dims, v, a, b);
  if (M * N * K >= BlasMinFlops() && std::max({M, N, K}) < (int64_t{1} << 31)) {
    SetBlasThreads(1);
    const BlasLibrary& lib = Blas();
    for (int64_t i = lo; i < hi; ++i)
      if (!GemmItem(lib, a, b, c, M, N, K, i)) return false;
    return true;
  }
  ExactRows(a, b, c, M, N, K, lo * M, hi * M);
  return true;
}

// Note [Products of halves]
// A bf16 or f16 dot_general is a product of halves with f32 sums (as on GPUs, as PyTorch's CPU
// bf16 matmul): block by block of C into an f32 tile in cache, then each element rounded once to
// the half. The tile comes from oneDNN's gemm_bf16bf16f32 for bf16 where the CPU multiplies bf16
// itself (BlasLibrary::dnnl_gemm_bf16: AVX512-BF16's vdpbf16ps); otherwise, and for
// f16, the block's operands are widened to f32 (exactly) and go through sgemm as an f32 product
// (the f32 path: correct everywhere, at f32 speed). The products of two halves are exact in f32
// (8 + 8 or 11 + 11 significant bits), so the two paths differ only in the order of f32 sums.
// Against the interpreter (sums in double, one rounding to the half) a result is then within an
// ulp of the half plus the f32 sums' reassociation error (docs/precision.md). Small products
// (under BlasMinFlops) and any product whose f32 tile holds an inf or NaN run the interpreter's
// loop instead (Note [BLAS and non-finite values]), bitwise equal to it. Items and tiles are cut
// as DotKernelT cuts f32 products, by the product's shape alone: the bits do not depend on the
// schedule. Halves take no views, chains or row slices (DotTakesViews, ChainSlices). A product
// declared f32 (an f32 dot_general of halves, Note [Partial products of halves]) stores the f32
// tile as it is, and the exact loop rounds its double sum to f32 once.
// The half's tag (kernels.h), and a double sum rounded to it once (Note [Single rounding]: through
// round-to-odd f32).
template <bool kBF16>
struct HalfOf : std::conditional_t<kBF16, BF16Tag, F16Tag> {
  static uint16_t NarrowExact(double v) { return HalfOf::Store(ax_f64_to_f32_odd(v)); }
};

// The result element of an f32 tile value (Out = float: as it is) or of a double sum.
template <bool kBF16, typename Out>
Out StoreTile(float v) {
  if constexpr (std::is_same_v<Out, float>) return v; else return HalfOf<kBF16>::Store(v);
}
template <bool kBF16, typename Out>
Out StoreExact(double v) {
  if constexpr (std::is_same_v<Out, float>) return static_cast<float>(v); else return HalfOf<kBF16>::NarrowExact(v);
}

// Rows [lo, hi) of C (plain, [B * M, N]): the interpreter's loop.
template <bool kBF16, typename Out>
void ExactHalfRows(const Mat<uint16_t>& a, const Mat<uint16_t>& b, Out* c, int64_t M, int64_t N, int64_t K,
                   int64_t lo, int64_t hi) {
  using H = HalfOf<kBF16>;
  const int64_t am = a.trans ? 1 : a.ld, ak = a.trans ? a.ld : 1;
  const int64_t bk = b.trans ? 1 : b.ld, bn = b.trans ? b.ld : 1;
  for (int64_t bm = lo; bm < hi; ++bm) {
    const int64_t i = bm / M, m = bm % M;
    const uint16_t* arow = a.at(i) + m * am;
    const uint16_t* bmat = b.at(i);
    for (int64_t n = 0; n < N; ++n) {
      double acc = -0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(H::Load(arow[k * ak])) * static_cast<double>(H::Load(bmat[k * bk + n * bn]));
      c[bm * N + n] = StoreExact<kBF16, Out>(acc);
    }
  }
}

// `rows` x `cols` halves at p (rows ld apart; with trans, stored transposed) widened into dst as a
// plain row-major [rows, cols] f32 matrix.
template <bool kBF16>
void WidenBlock(const uint16_t* p, bool trans, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = HalfOf<kBF16>::Load(trans ? p[c * ld + r] : p[r * ld + c]);
}

// Rows [r0, r1) x columns [c0, c1) of item i of C (plain), through an f32 tile; false when the
// tile holds an inf or NaN (nothing is written then).
template <bool kBF16, typename Out>
bool HalfBlock(const BlasLibrary& lib, const Mat<uint16_t>& a, const Mat<uint16_t>& b, Out* c, int64_t M,
               int64_t N, int64_t K, int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  thread_local std::vector<float> tile, wa, wb;
  if (tile.size() < static_cast<size_t>(rows * cols)) tile.resize(static_cast<size_t>(rows * cols));
  const uint16_t* ap = a.trans ? a.at(i) + r0 : a.at(i) + r0 * a.ld;
  const uint16_t* bp = b.trans ? b.at(i) + c0 * b.ld : b.at(i) + c0;
  if (kBF16 && lib.dnnl_gemm_bf16 != nullptr) {
    if (!tls_dnnl_one_thread) {
      if (lib.dnnl_threads != nullptr) lib.dnnl_threads(1);
      tls_dnnl_one_thread = true;
    }
    const int status = lib.dnnl_gemm_bf16(a.trans ? 'T' : 'N', b.trans ? 'T' : 'N', rows, cols, K, 1.0f, ap, a.ld,
                                          bp, b.ld, 0.0f, tile.data(), cols);
    if (status != 0)
      Fail("oneDNN's gemm_bf16bf16f32 failed (dnnl_status_t {}) on a {} x {} x {} product; AXLE_BLAS=openblas "
           "avoids it",
           status, rows, cols, K);
  } else {
    if (wa.size() < static_cast<size_t>(rows * K)) wa.resize(static_cast<size_t>(rows * K));
    if (wb.size() < static_cast<size_t>(K * cols)) wb.resize(static_cast<size_t>(K * cols));
    WidenBlock<kBF16>(ap, a.trans, a.ld, rows, K, wa.data());
    WidenBlock<kBF16>(bp, b.trans, b.ld, K, cols, wb.data());
    Gemm(lib, false, false, rows, cols, K, wa.data(), K, wb.data(), cols, tile.data(), cols);
  }
  if (!BlockFinite(tile.data(), rows, cols, cols)) return false;
  Out* out = c + i * M * N + r0 * N + c0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) out[r * N + k] = StoreTile<kBF16, Out>(tile[static_cast<size_t>(r * cols + k)]);
  return true;
}

template <bool kBF16, typename Out>
bool HalfDotKernel(const Node& node, Operands ops, Literal& out) {
  const ProductDims dims = DimsOf(node);
  const int64_t B = dims.B, M = dims.M, K = dims.K, N = dims.N;
  if (node.result()->shape().NumElements() == 0) return true;
  Out* c = out.mutable_data<Out>();
  if (K == 0) {
    std::fill(c, c + B * M * N, Out{0});  // +0
    return true;
  }
  Mat<uint16_t> a, b;
  ArrangeOperands(node, ops, dims, DotViews{}, a, b);
  if (M * N * K >= BlasMinFlops() && std::max({M, N, K}) < (int64_t{1} << 31)) {
    SetBlasThreads(1);
    const BlasLibrary& lib = Blas();
    auto block = [&](int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      return HalfBlock<kBF16, Out>(lib, a, b, c, M, N, K, i, r0, r1, c0, c1);
    };
    if (RunProductBlocks(B, M, N, K, [&](int64_t i) { return block(i, 0, M, 0, N); }, block)) return true;
  }
  ThreadPool::Global().ParallelFor(B * M, std::max<int64_t>(1, kParallelElements / std::max<int64_t>(N * K, 1)),
                                   [&](int64_t lo, int64_t hi) { ExactHalfRows<kBF16, Out>(a, b, c, M, N, K, lo, hi); });
  return true;
}

}  // namespace

// Blocks of 4 x 4 by SSE shuffles (Note [B transposed for oneDNN]), inside tiles that keep the
// written rows from crowding a few cache sets: rows of dst a multiple of 1 KB apart map to the
// same sets, so such a tile writes only 4 of them at a time (512 x 128 floats: 24 us in 32 x 32
// tiles, 12 us so).
void TransposeInto(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
#if !defined(__x86_64__) && !defined(__i386__)
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * ldd + r] = src[r * lds + c];
#else
  const bool crowded = ldd % 256 == 0;
  const int64_t tr = crowded ? 512 : 64, tc = crowded ? 4 : 16;
  for (int64_t c0 = 0; c0 < cols; c0 += tc)
    for (int64_t r0 = 0; r0 < rows; r0 += tr) {
      const int64_t r1 = std::min(rows, r0 + tr), c1 = std::min(cols, c0 + tc);
      int64_t r = r0;
      for (; r + 4 <= r1; r += 4) {
        int64_t c = c0;
        for (; c + 4 <= c1; c += 4) {
          __m128 x0 = _mm_loadu_ps(src + r * lds + c), x1 = _mm_loadu_ps(src + (r + 1) * lds + c);
          __m128 x2 = _mm_loadu_ps(src + (r + 2) * lds + c), x3 = _mm_loadu_ps(src + (r + 3) * lds + c);
          _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
          _mm_storeu_ps(dst + c * ldd + r, x0);
          _mm_storeu_ps(dst + (c + 1) * ldd + r, x1);
          _mm_storeu_ps(dst + (c + 2) * ldd + r, x2);
          _mm_storeu_ps(dst + (c + 3) * ldd + r, x3);
        }
        for (; c < c1; ++c)
          for (int64_t k = 0; k < 4; ++k) dst[c * ldd + r + k] = src[(r + k) * lds + c];
      }
      for (; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
    }
#endif
}

int64_t BlasMinFlops() { return g_blas_min_flops.load(std::memory_order_relaxed); }
int64_t DotTransposedOperands() { return g_transposed_operands.load(std::memory_order_relaxed); }
int64_t DotOperandCopies() { return g_operand_copies.load(std::memory_order_relaxed); }
void SetBlasMinFlops(int64_t flops) { g_blas_min_flops.store(flops, std::memory_order_relaxed); }

namespace {
template <typename T>
bool PlainDotKernel(const Node& node, Operands ops, Literal& out) {
  return DotKernelT<T>(node, ops, out, DotViews{});
}
}  // namespace

KernelChoice SelectDotKernel(const Node& node) {
  KernelChoice c;
  if (node.op() != ir::OpKind::kDotGeneral) return c;
  const DType t = node.result()->dtype(), in = node.operand(0)->dtype();
  if (t == DType::kF32 && in == DType::kF32) c.fn = PlainDotKernel<float>;
  if (t == DType::kF64) c.fn = PlainDotKernel<double>;
  // Note [Products of halves]: halves to halves, or to f32 (a declared f32 result).
  if (in == DType::kBF16) c.fn = t == DType::kF32 ? HalfDotKernel<true, float> : HalfDotKernel<true, uint16_t>;
  if (in == DType::kF16) c.fn = t == DType::kF32 ? HalfDotKernel<false, float> : HalfDotKernel<false, uint16_t>;
  c.name = "dot_general";
  return c;
}

bool DotKernel(const Node& node, Operands ops, Literal& out, const DotViews& views) {
  if (node.result()->dtype() == DType::kF64) return DotKernelT<double>(node, ops, out, views);
  return DotKernelT<float>(node, ops, out, views);
}

namespace {
// Whether DotKernelT reads both operands of the product in place (Arrange makes no copy).
bool ReadInPlace(const Node& node, const ProductDims& p, const DotViews& v) {
  const auto& d = node.attrs_as<ir::DotGeneralAttrs>();
  bool trans = false;
  int64_t s1 = 1, s2 = 1;
  const Shape& ls = node.operand(0)->shape();
  const Shape& rs = node.operand(1)->shape();
  return InPlaceLayout(ls, v.lhs.plain() ? ls.Strides() : v.lhs.strides, p.lf, d.lhs_contracting, &trans, &s1, &s2) &&
         InPlaceLayout(rs, v.rhs.plain() ? rs.Strides() : v.rhs.strides, d.rhs_contracting, p.rf, &trans, &s1, &s2);
}
}  // namespace

// Whether the product is one DotKernelT computes: f32 or f64 operands and result (not halves).
static bool PlainFloatProduct(const Node& node) {
  const DType t = node.result()->dtype();
  return (t == DType::kF32 || t == DType::kF64) && node.operand(0)->dtype() == t;
}

bool DotTakesViews(const Node& node, const DotViews& v) {
  if (node.op() != ir::OpKind::kDotGeneral || !PlainFloatProduct(node)) return false;
  const ProductDims p = DimsOf(node);
  int64_t ld = 0;
  return ReadInPlace(node, p, v) && (v.out.plain() || ResultLayout(node, p, v.out, &ld));
}

int64_t ChainSlices(const Node& node, int threads, const DotViews& v) {
  if (node.op() != ir::OpKind::kDotGeneral || !PlainFloatProduct(node)) return 0;
  const ProductDims p = DimsOf(node);
  // One call per item in DotKernelT too (B >= threads), so a sliced run makes the same calls.
  if (p.B < 2 || p.B < threads || !ReadInPlace(node, p, v)) return 0;
  return p.B;
}

bool DotItems(const Node& node, Operands ops, Literal& out, int64_t lo, int64_t hi, const DotViews& v) {
  if (node.result()->dtype() == DType::kF64) return DotItemsT<double>(node, ops, out, lo, hi, v);
  return DotItemsT<float>(node, ops, out, lo, hi, v);
}

int64_t ChainRowSlices(const Node& node, int threads, const DotViews& v) {
  if (node.op() != ir::OpKind::kDotGeneral || threads < 2 || !PlainFloatProduct(node)) return 0;
  if (!node.attrs_as<ir::DotGeneralAttrs>().lhs_batch.empty()) return 0;
  const ProductDims p = DimsOf(node);
  const int64_t M = p.M, N = p.N, K = p.K;
  // DotKernelT's tile path, one block of rows per thread, the blocks equal (so block s is rows
  // [s M / threads, (s + 1) M / threads)), through BLAS.
  if (M * N * K < kSplitMacs || M * N * K < BlasMinFlops() || std::max({M, N, K}) >= (int64_t{1} << 31)) return 0;
  const DotTiles tiles = DotTiling(M, N, K, threads);
  if (tiles.rows != threads || tiles.cols != 1 || tiles.row_extent * threads != M) return 0;
  return ReadInPlace(node, p, v) ? threads : 0;
}

bool LhsRowsInOrder(const Node& node) {
  const auto& d = node.attrs_as<ir::DotGeneralAttrs>();
  if (!d.lhs_batch.empty()) return false;
  std::vector<int64_t> order = DimsOf(node).lf;  // free dims first, in order, then the contracting dims
  order.insert(order.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  for (size_t k = 0; k < order.size(); ++k)
    if (order[k] != static_cast<int64_t>(k)) return false;
  return true;
}

// Row block `slice` of the tile path's blocks, as DotKernelT computes it; false when BLAS left an
// inf or NaN in it.
template <typename T>
bool DotRowBlockT(const Node& node, Operands ops, Literal& out, int64_t slice, int threads, const DotViews& v) {
  const ProductDims dims = DimsOf(node);
  Mat<T> a, b;
  ArrangeOperands(node, ops, dims, v, a, b);
  CMat<T> c;
  ArrangeResult(node, out, dims, v.out, c);
  SetBlasThreads(1);
  // ChainRowSlices: the tiles are `threads` blocks of whole rows, so tile `slice` is block `slice`.
  const DotTiles tiles = DotTiling(dims.M, dims.N, dims.K, threads);
  const int64_t r0 = std::min(dims.M, slice * tiles.row_extent);
  return GemmBlock(Blas(), a, b, c, dims.M, dims.N, dims.K, 0, r0, std::min(dims.M, r0 + tiles.row_extent), 0, dims.N);
}

bool DotRowBlocks(const Node& node, Operands ops, Literal& out, int64_t lo, int64_t hi, int threads,
                  const DotViews& v) {
  for (int64_t s = lo; s < hi; ++s) {
    const bool ok = node.result()->dtype() == DType::kF64 ? DotRowBlockT<double>(node, ops, out, s, threads, v)
                                                          : DotRowBlockT<float>(node, ops, out, s, threads, v);
    if (!ok) return false;
  }
  return true;
}

KernelChoice SelectKernel(const Node& node) {
  if (node.num_results() != 1) return {};
  for (auto select : {SelectElementwiseKernel, SelectMovementKernel, SelectReduceKernel, SelectDotKernel,
                      SelectRandomKernel}) {
    KernelChoice c = select(node);
    if (c.fn) return c;
  }
  return {};
}

}  // namespace axle::runtime::cpu
