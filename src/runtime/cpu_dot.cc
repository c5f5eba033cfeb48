// dot_general on the CPU: operands are viewed as batches of [M, K] x [K, N] matrices (read in
// place, with a row stride and a transpose flag, whenever each operand's two groups of dims index
// like one dim each, whatever the batch strides; any other layout is copied once with
// StridedCopy), then
//   - f32 / f64 products with M*N*K >= BlasMinFlops() call cblas_sgemm / cblas_dgemm, split over
//     our thread pool (Note [BLAS threads]). BLAS accumulates in the element type in its own
//     order, so results differ from the interpreter's (double accumulation, row-major order, one
//     rounding) by reassociation: a few ulps relative to the sum of |products|, more under
//     cancellation. A product with an inf or NaN result is recomputed by the exact loop (Note
//     [BLAS and non-finite values]).
//   - smaller f32 / f64 products use an exact loop: double accumulation from -0 over k in order,
//     one rounding, an empty contraction gives +0 — bitwise equal to the interpreter.
//   - every other dtype goes to the interpreter's kernel.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ir/shape_inference.h"
#include "runtime/cpu_kernels.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;

std::atomic<int64_t> g_blas_min_flops{32 * 32 * 32};
std::atomic<int64_t> g_operand_copies{0};

// Note [BLAS threads]
// OpenBLAS runs its own thread pool, and its threads keep spinning for a while after a call: the
// fused kernel that follows a GEMM then shares its cores with them (a 65K-element add ran at
// 0.6 GB/s right after a GEMM), and on small products the threads cost more than they give (the
// tiny GPT-2 config spent ~40% of its time in the kernel with 2 BLAS threads). So BLAS always
// runs single-threaded, and the parallelism is ours:
//   - a batch of products (B >= threads, or any batch under kSplitMacs in all) is split over the
//     pool by batch index (the attention scores are 32 products of 64 x 64 x 32);
//   - a few large products are each split by rows of C (or by columns when M is small) into one
//     block per thread, on chunk boundaries that are multiples of 16.
// Measured on GPT-2 124M (2 cores, batch 4 x 64): 74-82 tokens/s against 67-68 with OpenBLAS's
// own two threads; the small config gains ~5%. openblas_set_num_threads is process-wide; without
// OpenBLAS (another BLAS behind cblas.h) the weak symbol is null and that BLAS keeps its policy.
constexpr int64_t kSplitMacs = int64_t{1} << 20;

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

void SetBlasThreads(int n) {
  static std::atomic<int> current{-1};
  if (openblas_set_num_threads == nullptr || current.load(std::memory_order_relaxed) == n) return;
  openblas_set_num_threads(n);
  current.store(n, std::memory_order_relaxed);
}

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

// Brings `x` to [batch..., first..., second...] (each group in the listed order). No copy when the
// second group indexes like one innermost dim and the first like one dim of any stride (the row
// stride), or the same with the groups swapped (trans); the batch dims may then have any strides
// (the heads of attention, [b, t, h, d] with batch (b, h), are read in place). Else a copy.
template <typename T>
void Arrange(const Literal& x, const std::vector<int64_t>& batch, const std::vector<int64_t>& first,
             const std::vector<int64_t>& second, Mat<T>& m) {
  const Shape& shape = x.shape();
  const std::vector<int64_t> xs = shape.Strides();
  int64_t bcount = 1;
  for (int64_t d : batch) bcount *= shape.dim(d);
  int64_t rows = 1, cols = 1;
  for (int64_t d : first) rows *= shape.dim(d);
  for (int64_t d : second) cols *= shape.dim(d);
  m.data = x.data<T>();
  int64_t s_first = 1, s_second = 1;
  const bool first_ok = Collapses(shape, xs, first, &s_first), second_ok = Collapses(shape, xs, second, &s_second);
  // Stored rows must not overlap (BLAS needs ld >= the stored row length); the layout guarantees it
  // when the groups collapse, checked anyway.
  const bool plain = first_ok && second_ok && s_second == 1 && (rows == 1 || s_first >= cols);
  const bool trans = !plain && first_ok && second_ok && s_first == 1 && s_second >= rows;
  if (plain || trans) {
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
    dims.push_back(x.shape().dim(p));
    strides.push_back(xs[static_cast<size_t>(p)]);
  }
  g_operand_copies.fetch_add(1, std::memory_order_relaxed);
  m.copy.resize(static_cast<size_t>(x.NumElements()));
  StridedCopy(x.bytes().data(), 0, dims, strides, sizeof(T), reinterpret_cast<uint8_t*>(m.copy.data()));
  m.data = m.copy.data();
  m.trans = false;
  m.ld = std::max<int64_t>(1, cols);
  m.offset.resize(static_cast<size_t>(bcount));
  for (int64_t i = 0; i < bcount; ++i) m.offset[static_cast<size_t>(i)] = i * rows * cols;
}


int64_t Prod(const Literal& x, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= x.shape().dim(d);
  return p;
}

// Whether no element of the rows x cols block at p (row stride ld) is an inf or NaN (exponent
// bits all ones). It runs on every block BLAS writes, right after BLAS wrote it (still in cache),
// so it must cost next to nothing: the test is on the bits, in fixed blocks the compiler vectorises.
template <typename T>
bool BlockFinite(const T* p, int64_t rows, int64_t cols, int64_t ld) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static constexpr Bits kExp = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  static constexpr int64_t kBlock = 64;
  Bits bad = 0;
  for (int64_t r = 0; r < rows && bad == 0; ++r) {
    const T* row = p + r * ld;
    int64_t i = 0;
    for (; i + kBlock <= cols; i += kBlock) {
      Bits block[kBlock];
      std::memcpy(block, row + i, sizeof(block));
      for (int64_t j = 0; j < kBlock; ++j) bad |= static_cast<Bits>((block[j] & kExp) == kExp);
    }
    for (; i < cols; ++i) {
      Bits b;
      std::memcpy(&b, row + i, sizeof(b));
      bad |= static_cast<Bits>((b & kExp) == kExp);
    }
  }
  return bad == 0;
}

// C[M, N] = op(A) op(B) with explicit leading dimensions (row-major).
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
          int64_t ldb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b,
          int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
}

template <typename T>
bool DotKernelT(const Node& node, Operands ops, Literal& out) {
  const Literal& lhs = *ops[0];
  const Literal& rhs = *ops[1];
  const auto& d = node.attrs_as<ir::DotGeneralAttrs>();
  const std::vector<int64_t> lf = ir::DotFreeDims(lhs.shape().rank(), d.lhs_batch, d.lhs_contracting);
  const std::vector<int64_t> rf = ir::DotFreeDims(rhs.shape().rank(), d.rhs_batch, d.rhs_contracting);
  const int64_t B = Prod(lhs, d.lhs_batch), M = Prod(lhs, lf), K = Prod(lhs, d.lhs_contracting),
                N = Prod(rhs, rf);
  T* c = out.mutable_data<T>();
  if (out.NumElements() == 0) return true;
  if (K == 0) {
    std::fill(c, c + out.NumElements(), T(0));
    return true;
  }
  // Note [BLAS and non-finite values]: BLAS sums in the element type in its own order, so a product
  // whose f32 partial sums overflow can come out inf where the interpreter's double accumulation
  // stays finite; and an inf or NaN operand must give the interpreter's inf / NaN pattern. So every
  // block BLAS writes is checked (in cache, ~free) and a product with any inf or NaN result is
  // recomputed by the exact loop. This relies on OpenBLAS's gemm multiplying every pair (it does
  // not skip zero entries, as reference BLAS does): then an inf or NaN operand element reaches every
  // result of its row or column, and an all-finite result means all-finite operands. Checking the
  // operands before the call instead read ~1.3 GB per GPT-2 124M step, 0.15-0.5 s of its ~2.3 s.
  const bool blas = M * N * K >= BlasMinFlops() && std::max({M, N, K}) < (int64_t{1} << 31);
  Mat<T> a, b;
  Arrange(lhs, d.lhs_batch, lf, d.lhs_contracting, a);   // [B, M, K]
  Arrange(rhs, d.rhs_batch, d.rhs_contracting, rf, b);   // [B, K, N]
  if (blas) {
    // Note [BLAS threads]: BLAS always runs single-threaded, on our pool's threads.
    SetBlasThreads(1);
    const int64_t lda = a.ld, ldb = b.ld;
    const int threads = ThreadPool::Global().num_threads();
    std::atomic<bool> finite{true};
    auto check = [&](const T* block, int64_t rows, int64_t cols) {
      if (!BlockFinite(block, rows, cols, N)) finite.store(false, std::memory_order_relaxed);
    };
    if (B >= threads || M * N * K < kSplitMacs || threads == 1) {
      ThreadPool::Global().ParallelFor(B, B * M * N * K >= kSplitMacs ? 1 : B + 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          Gemm(a.trans, b.trans, M, N, K, a.at(i), lda, b.at(i), ldb, c + i * M * N, N);
          check(c + i * M * N, M, N);
        }
      });
    } else {
      // Few large products: split each one's rows (M) or, when M is small, its columns (N).
      const bool by_rows = M >= N || M >= 64 * threads;
      for (int64_t i = 0; i < B; ++i) {
        const T* ab = a.at(i);
        const T* bb = b.at(i);
        T* cb = c + i * M * N;
        ThreadPool::Global().ParallelFor(threads, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t t = lo; t < hi; ++t) {
            const int64_t extent = by_rows ? M : N;
            // Chunks are multiples of 16 so the split falls on BLAS's own register blocks.
            const int64_t chunk = (extent / threads + 15) / 16 * 16;
            const int64_t begin = std::min(extent, t * chunk), end = t + 1 == threads ? extent : std::min(extent, begin + chunk);
            if (begin >= end) continue;
            if (by_rows) {
              Gemm(a.trans, b.trans, end - begin, N, K, a.trans ? ab + begin : ab + begin * lda, lda, bb, ldb,
                   cb + begin * N, N);
              check(cb + begin * N, end - begin, N);
            } else {
              Gemm(a.trans, b.trans, M, end - begin, K, ab, lda, b.trans ? bb + begin * ldb : bb + begin, ldb,
                   cb + begin, N);
              check(cb + begin, M, end - begin);
            }
          }
        });
      }
    }
    if (finite.load(std::memory_order_relaxed)) return true;
  }
  // Exact: strides of a[m, k] and b[k, n] inside one batch.
  const int64_t am = a.trans ? 1 : a.ld, ak = a.trans ? a.ld : 1;
  const int64_t bk = b.trans ? 1 : b.ld, bn = b.trans ? b.ld : 1;
  ThreadPool::Global().ParallelFor(B * M, std::max<int64_t>(1, kParallelElements / std::max<int64_t>(N * K, 1)),
                                   [&](int64_t lo, int64_t hi) {
    for (int64_t bm = lo; bm < hi; ++bm) {
      const int64_t i = bm / M, m = bm % M;
      const T* arow = a.at(i) + m * am;
      const T* bmat = b.at(i);
      T* crow = c + bm * N;
      for (int64_t n = 0; n < N; ++n) {
        double acc = -0.0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(arow[k * ak]) * static_cast<double>(bmat[k * bk + n * bn]);
        crow[n] = static_cast<T>(acc);
      }
    }
  });
  return true;
}

}  // namespace

int64_t BlasMinFlops() { return g_blas_min_flops.load(std::memory_order_relaxed); }
int64_t DotOperandCopies() { return g_operand_copies.load(std::memory_order_relaxed); }
void SetBlasMinFlops(int64_t flops) { g_blas_min_flops.store(flops, std::memory_order_relaxed); }

KernelChoice SelectDotKernel(const Node& node) {
  KernelChoice c;
  if (node.op() != ir::OpKind::kDotGeneral) return c;
  const DType t = node.result()->dtype();
  if (t == DType::kF32) c.fn = DotKernelT<float>;
  if (t == DType::kF64) c.fn = DotKernelT<double>;
  c.name = "dot_general";
  return c;
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
