// The CPU executor's fast kernels (internal to src/runtime).
//
// A kernel computes the single result of one node into `out`, a literal of the node's result
// type whose contents are unspecified on entry (it may be a range of the arena another value used
// before, and for kernels selected with in_place = true the very storage of a dying operand). A kernel returns
// false when it has no fast path for these operands; the executor then runs the reference
// interpreter's kernel for that node (ir::EvaluateNode). Every fast kernel computes exactly what
// the interpreter computes, bit for bit, except dot_general through BLAS (dot.cc).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/half.h"
#include "ir/literal.h"
#include "ir/module.h"

namespace axle::runtime::cpu {

// A half dtype's element as the hand kernels read and write it: widened exactly to float, and a
// float rounded back to nearest even (core/half.h). Shared by the elementwise kernels and the
// products of halves (dot.cc).
struct BF16Tag {
  static float Load(uint16_t h) { return BF16ToFloat(h); }
  static uint16_t Store(float f) { return FloatToBF16(f); }
};
struct F16Tag {
  static float Load(uint16_t h) { return F16ToFloat(h); }
  static uint16_t Store(float f) { return FloatToF16(f); }
};

using Operands = std::span<const ir::Literal* const>;
using KernelFn = bool (*)(const ir::Node& node, Operands ops, ir::Literal& out);

struct KernelChoice {
  KernelFn fn = nullptr;    // nullptr: use the interpreter's kernel
  bool in_place = false;    // `out` may alias an operand of the result's type
  int in_place_operand = -1;  // with in_place: only this operand may be aliased (-1: any)
  const char* name = "interpreter";
};

// Per-family selection (by op and dtypes; nullptr fn when there is no fast kernel).
KernelChoice SelectElementwiseKernel(const ir::Node& node);
KernelChoice SelectMovementKernel(const ir::Node& node);
KernelChoice SelectReduceKernel(const ir::Node& node);
KernelChoice SelectDotKernel(const ir::Node& node);
KernelChoice SelectRandomKernel(const ir::Node& node);
// The first family that has one.
KernelChoice SelectKernel(const ir::Node& node);

// Copies a strided view of `src` (element width `width` bytes) into contiguous `dst`:
// dst[flat(idx)] = src[base + sum_d idx[d] * strides[d]] for idx over `dims` (row-major).
// Strides are in elements and may be 0 (broadcast) or negative (reverse). Splits large copies
// over the thread pool.
void StridedCopy(const uint8_t* src, int64_t base, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& strides, int64_t width, uint8_t* dst);

// dot_general products at or above this many multiply-adds (M*N*K per batch) go to BLAS; smaller
// ones use an exact loop that matches the interpreter bit for bit.
int64_t BlasMinFlops();
void SetBlasMinFlops(int64_t flops);
// dot_general operands copied to a BLAS layout so far in this process (dot.cc, Arrange); the
// other layouts are read in place.
int64_t DotOperandCopies();
// Batch items whose transposed B was copied to [K, N] first (Note [B transposed for oneDNN],
// dot.cc) so far in this process.
int64_t DotTransposedOperands();
// dst[c * ldd + r] = src[r * lds + c] for the rows x cols matrix at src (rows lds apart).
void TransposeInto(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd);

// Note [Products into views] (views.cc): a value inside a larger buffer, element idx at
// offset + sum_d idx[d] * strides[d]; no strides: the value's own row-major buffer.
struct View {
  int64_t offset = 0;
  std::vector<int64_t> strides;
  bool plain() const { return strides.empty(); }
};
// A product's operands and result as views: then ops[j] and out are the buffers they are in.
struct DotViews {
  View lhs, rhs, out;
  bool plain() const { return lhs.plain() && rhs.plain() && out.plain(); }
};
// Whether an f32 / f64 dot_general reads its operands' views in place (no copy) and can write its
// result's view as BLAS writes C: batch strides, one row stride, adjacent columns.
bool DotTakesViews(const ir::Node& node, const DotViews& views);
// The dot_general kernel (SelectDotKernel's) through views the product takes.
bool DotKernel(const ir::Node& node, Operands ops, ir::Literal& out, const DotViews& views);

// Note [Batch-sliced chains] (chains.cc): a dot_general that a chain may run by slices of its
// batch returns its batch count (f32/f64, at least 2 and `threads` items, both operands read in
// place); 0 otherwise.
int64_t ChainSlices(const ir::Node& node, int threads, const DotViews& views = {});
// Items [lo, hi) of such a product on this thread, as DotKernel computes them; false when a BLAS
// result was inf or NaN (then DotKernel must compute the whole product).
bool DotItems(const ir::Node& node, Operands ops, ir::Literal& out, int64_t lo, int64_t hi,
              const DotViews& views = {});
// A product without batch dims whose kernel cuts it into one block of rows per thread, equal
// blocks, through BLAS (DotTiling), both operands read in place: `threads` (its slices are those
// blocks); 0 otherwise.
int64_t ChainRowSlices(const ir::Node& node, int threads, const DotViews& views = {});
// Whether the lhs of a product without batch dims is stored [free dims..., contracting dims...]
// in order, so that row block s of the result reads only row block s of it.
bool LhsRowsInOrder(const ir::Node& node);
// Row blocks [lo, hi) of such a product, each the BLAS call DotKernel makes for it; false when a
// result was inf or NaN.
bool DotRowBlocks(const ir::Node& node, Operands ops, ir::Literal& out, int64_t lo, int64_t hi, int threads,
                  const DotViews& views = {});

// Note [Products cut for the target]
// A product too large for one thread is cut into tiles of C, or its batch items shared, by a rule
// of the thread count (DotTiling); BLAS may round a tile's sums differently from the whole's, so
// the count decides bits. While one of these lives on a thread, the products that thread runs
// are cut as for `threads` (the executable's target, which its schedule was planned for: a
// chain's row blocks are the same tiles) whatever the pool's size, so a module's bits follow its
// target, not the machine; the pool runs the tiles, however many threads it has. Without one,
// the pool's size.
class ProductsCutFor {
 public:
  explicit ProductsCutFor(int threads);
  ~ProductsCutFor();
  ProductsCutFor(const ProductsCutFor&) = delete;
  ProductsCutFor& operator=(const ProductsCutFor&) = delete;

 private:
  int previous_;
};

// Note [Products side by side] (pairs.cc): while one of these lives on a thread, the products
// that thread runs make the calls they make anywhere (per batch item, or the tiles of Note
// [Product tiles] for ProductsCutFor's count), all of them on that thread: no pool.
class ProductsOnOneThread {
 public:
  ProductsOnOneThread();
  ~ProductsOnOneThread();
  ProductsOnOneThread(const ProductsOnOneThread&) = delete;
  ProductsOnOneThread& operator=(const ProductsOnOneThread&) = delete;

 private:
  bool previous_;
};

// How one large product ([M, K] x [K, N]) is split over `threads` threads: `rows` x `cols` tiles of C, each
// row_extent x col_extent (the last ones may be shorter, or empty), one BLAS call each
// (Note [Product tiles] in dot.cc).
struct DotTiles {
  int64_t rows = 1, cols = 1;
  int64_t row_extent = 0, col_extent = 0;
};
DotTiles DotTiling(int64_t M, int64_t N, int64_t K, int threads);

}  // namespace axle::runtime::cpu
