// Data-movement fast kernels. They move element bits by width (1, 2, 4 or 8 bytes), so one kernel
// serves every dtype. broadcast_in_dim, transpose, slice and reverse are all one strided copy
// (StridedCopy: dims are merged where the strides allow, then the innermost run is a memcpy, a
// fill or a strided loop), except a transpose of 4- or 8-byte elements that moves the innermost
// dim, which is copied in cache-blocked tiles (BlockedTranspose); reshape is a memcpy; concatenate copies contiguous blocks; gather and
// scatter_add move contiguous rows.
#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/cpu/kernels.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;

template <typename W>
void InnerCopy(const uint8_t* src, int64_t off, int64_t n, int64_t stride, uint8_t* dst) {
  const W* s = reinterpret_cast<const W*>(src) + off;
  W* d = reinterpret_cast<W*>(dst);
  if (stride == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(W));
  } else if (stride == 0) {
    std::fill(d, d + n, *s);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * stride];
  }
}

using InnerFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, uint8_t*);

}  // namespace

void StridedCopy(const uint8_t* src, int64_t base, const std::vector<int64_t>& dims_in,
                 const std::vector<int64_t>& strides_in, int64_t width, uint8_t* dst) {
  int64_t total = 1;
  for (int64_t d : dims_in) total *= d;
  if (total == 0) return;
  // Drop size-1 dims and merge dim d into d+1 when stride[d] == stride[d+1] * dim[d+1].
  std::vector<int64_t> dims, strides;
  for (size_t i = 0; i < dims_in.size(); ++i) {
    if (dims_in[i] == 1) continue;
    if (!dims.empty() && strides.back() == strides_in[i] * dims_in[i]) {
      dims.back() *= dims_in[i];
      strides.back() = strides_in[i];
    } else {
      dims.push_back(dims_in[i]);
      strides.push_back(strides_in[i]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(1);
  }
  InnerFn inner = nullptr;
  switch (width) {
    case 1: inner = InnerCopy<uint8_t>; break;
    case 2: inner = InnerCopy<uint16_t>; break;
    case 4: inner = InnerCopy<uint32_t>; break;
    default: inner = InnerCopy<uint64_t>; break;
  }
  const size_t rank = dims.size();
  const int64_t inner_n = dims.back(), inner_s = strides.back();
  const int64_t rows = total / inner_n;
  const int64_t min_rows = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(inner_n, 1));
  ThreadPool::Global().ParallelFor(rows, min_rows, [&](int64_t rb, int64_t re) {
    // Odometer over the outer dims, starting at row rb.
    std::vector<int64_t> idx(rank, 0);
    int64_t r = rb, off = base;
    for (size_t d = rank - 1; d-- > 0;) {
      idx[d] = r % dims[d];
      r /= dims[d];
      off += idx[d] * strides[d];
    }
    for (int64_t row = rb; row < re; ++row) {
      inner(src, off, inner_n, inner_s, dst + row * inner_n * width);
      for (size_t d = rank - 1; d-- > 0;) {
        off += strides[d];
        if (++idx[d] < dims[d]) break;
        off -= strides[d] * dims[d];
        idx[d] = 0;
      }
    }
  });
}

namespace {

std::vector<int64_t> StridesOf(const Literal& x) { return x.shape().Strides(); }

bool BroadcastInDimKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& dims = node.attrs_as<ir::BroadcastInDimAttrs>().dims;
  const std::vector<int64_t> xs = StridesOf(x);
  std::vector<int64_t> strides(static_cast<size_t>(out.shape().rank()), 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (x.shape().dim(static_cast<int64_t>(i)) != 1) strides[static_cast<size_t>(dims[i])] = xs[i];
  StridedCopy(x.bytes().data(), 0, out.shape().dims(), strides, DTypeSize(x.dtype()),
              out.mutable_bytes().data());
  return true;
}

// Cache-blocked transpose for 4- and 8-byte elements. After merging (size-1 dims dropped, output
// dims that are consecutive in the input merged into one), let `a` be the output's innermost dim
// and `b` the output dim that is the input's innermost (input stride 1). When a != b, a row-wise
// copy reads the input with stride S[a] (one element per cache line: ~1 GB/s on [50257,768]).
// Instead, the (b, a) plane is cut into kTile x kTile tiles; a tile reads kTile input runs of
// kTile contiguous elements and writes kTile output runs of kTile contiguous elements, all in L1.
// Tiles (times the outer dims, in output order) are spread over the thread pool. A pure copy of
// element bits: bitwise identical to StridedCopy.
constexpr int64_t kTile = 32;

// One tile: q[i * ob + j] = s[j * sa + i] for i < nb, j < na. Reads: each j is a contiguous run
// over i; writes: each i a contiguous run over j. Full 4- and 8-byte tiles move 4x4 / 2x2 blocks
// through SSE2 registers with integer unpacks (bit moves only, NaN payloads untouched).
template <typename W>
void TileCopy(const W* s, int64_t sa, W* q, int64_t ob, int64_t nb, int64_t na) {
#if defined(__SSE2__)
  if constexpr (sizeof(W) == 4) {
    if (nb == kTile && na == kTile) {
      for (int64_t i = 0; i < kTile; i += 4)
        for (int64_t j = 0; j < kTile; j += 4) {
          auto ld = [&](int64_t r) {
            return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (j + r) * sa + i));
          };
          const __m128i r0 = ld(0), r1 = ld(1), r2 = ld(2), r3 = ld(3);
          const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
          const __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
          auto st = [&](int64_t c, __m128i v) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q + (i + c) * ob + j), v);
          };
          st(0, _mm_unpacklo_epi64(t0, t1));
          st(1, _mm_unpackhi_epi64(t0, t1));
          st(2, _mm_unpacklo_epi64(t2, t3));
          st(3, _mm_unpackhi_epi64(t2, t3));
        }
      return;
    }
  } else if constexpr (sizeof(W) == 8) {
    if (nb == kTile && na == kTile) {
      for (int64_t i = 0; i < kTile; i += 2)
        for (int64_t j = 0; j < kTile; j += 2) {
          const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j * sa + i));
          const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (j + 1) * sa + i));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i * ob + j), _mm_unpacklo_epi64(r0, r1));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(q + (i + 1) * ob + j), _mm_unpackhi_epi64(r0, r1));
        }
      return;
    }
  }
#endif
  for (int64_t i = 0; i < nb; ++i) {
    const W* si = s + i;
    W* qi = q + i * ob;
    for (int64_t j = 0; j < na; ++j) qi[j] = si[j * sa];
  }
}

template <typename W>
void BlockedTranspose(const W* src, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      size_t a, size_t b, W* dst) {
  const size_t rank = dims.size();
  std::vector<int64_t> ostrides(rank, 1);  // row-major strides of the output
  for (size_t d = rank - 1; d-- > 0;) ostrides[d] = ostrides[d + 1] * dims[d + 1];
  std::vector<size_t> outer;  // the other dims, in output order
  for (size_t d = 0; d < rank; ++d)
    if (d != a && d != b) outer.push_back(d);
  int64_t outer_n = 1;
  for (size_t d : outer) outer_n *= dims[d];
  const int64_t na = dims[a], nb = dims[b], sa = strides[a], ob = ostrides[b];
  const int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
  const int64_t items = outer_n * tb * ta;
  const int64_t min_items = std::max<int64_t>(1, kParallelElements / (kTile * kTile));
  ThreadPool::Global().ParallelFor(items, min_items, [&](int64_t lo, int64_t hi) {
    for (int64_t it = lo; it < hi; ++it) {
      int64_t r = it / (tb * ta);
      const int64_t t = it % (tb * ta);
      const int64_t b0 = (t / ta) * kTile, a0 = (t % ta) * kTile;
      int64_t in = 0, o = 0;
      for (size_t k = outer.size(); k-- > 0;) {
        const size_t d = outer[k];
        const int64_t i = r % dims[d];
        r /= dims[d];
        in += i * strides[d];
        o += i * ostrides[d];
      }
      const int64_t b1 = std::min(nb, b0 + kTile), a1 = std::min(na, a0 + kTile);
      TileCopy(src + in + a0 * sa + b0, sa, dst + o + b0 * ob + a0, ob, b1 - b0, a1 - a0);
    }
  });
}

bool TransposeKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& perm = node.attrs_as<ir::TransposeAttrs>().perm;
  const std::vector<int64_t> xs = StridesOf(x);
  std::vector<int64_t> strides;
  for (int64_t p : perm) strides.push_back(xs[static_cast<size_t>(p)]);
  const int64_t width = DTypeSize(x.dtype());
  if ((width == 4 || width == 8) && out.NumElements() > 0) {
    // Merge as StridedCopy does: drop size-1 dims, fuse runs that are consecutive in the input.
    std::vector<int64_t> dims, st;
    for (size_t i = 0; i < strides.size(); ++i) {
      const int64_t n = out.shape().dim(static_cast<int64_t>(i));
      if (n == 1) continue;
      if (!dims.empty() && st.back() == strides[i] * n) {
        dims.back() *= n;
        st.back() = strides[i];
      } else {
        dims.push_back(n);
        st.push_back(strides[i]);
      }
    }
    const size_t a = dims.empty() ? 0 : dims.size() - 1;
    size_t b = dims.size();
    for (size_t d = 0; d < dims.size(); ++d)
      if (st[d] == 1) b = d;
    if (dims.size() >= 2 && b < a) {
      if (width == 4)
        BlockedTranspose(x.data<uint32_t>(), dims, st, a, b, out.mutable_data<uint32_t>());
      else
        BlockedTranspose(x.data<uint64_t>(), dims, st, a, b, out.mutable_data<uint64_t>());
      return true;
    }
  }
  StridedCopy(x.bytes().data(), 0, out.shape().dims(), strides, width, out.mutable_bytes().data());
  return true;
}

bool SliceKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& a = node.attrs_as<ir::SliceAttrs>();
  const std::vector<int64_t> xs = StridesOf(x);
  std::vector<int64_t> strides(xs.size());
  int64_t base = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    base += a.start[d] * xs[d];
    strides[d] = xs[d] * a.strides[d];
  }
  StridedCopy(x.bytes().data(), base, out.shape().dims(), strides, DTypeSize(x.dtype()),
              out.mutable_bytes().data());
  return true;
}

bool ReverseKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& rd = node.attrs_as<ir::ReverseAttrs>().dims;
  std::vector<int64_t> strides = StridesOf(x);
  int64_t base = 0;
  for (int64_t d : rd) {
    const size_t u = static_cast<size_t>(d);
    if (x.shape().dim(d) == 0) return true;
    base += (x.shape().dim(d) - 1) * strides[u];
    strides[u] = -strides[u];
  }
  StridedCopy(x.bytes().data(), base, out.shape().dims(), strides, DTypeSize(x.dtype()),
              out.mutable_bytes().data());
  return true;
}

bool ReshapeKernel(const Node&, Operands ops, Literal& out) {
  if (!out.bytes().empty() && out.bytes().data() != ops[0]->bytes().data())
    std::memcpy(out.mutable_bytes().data(), ops[0]->bytes().data(), out.bytes().size());
  return true;
}

bool ConcatenateKernel(const Node& node, Operands ops, Literal& out) {
  const int64_t dim = node.attrs_as<ir::ConcatenateAttrs>().dim;
  const int64_t w = DTypeSize(out.dtype());
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.shape().dim(d);
  int64_t inner = w;
  for (int64_t d = dim + 1; d < out.shape().rank(); ++d) inner *= out.shape().dim(d);
  const int64_t row = out.shape().dim(dim) * inner;  // bytes of one outer row of the result
  uint8_t* dst = out.mutable_bytes().data();
  if (row == 0) return true;
  // Split over the result's outer rows; each thread copies every operand's part of its rows.
  const int64_t min_rows = std::max<int64_t>(1, kParallelElements * 4 / row);
  ThreadPool::Global().ParallelFor(outer, min_rows, [&](int64_t b, int64_t e) {
    int64_t col = 0;
    for (const Literal* x : ops) {
      const int64_t chunk = x->shape().dim(dim) * inner;
      if (chunk > 0) {
        const uint8_t* src = x->bytes().data();
        for (int64_t o = b; o < e; ++o)
          std::memcpy(dst + o * row + col, src + o * chunk, static_cast<size_t>(chunk));
      }
      col += chunk;
    }
  });
  return true;
}

int64_t LoadIndex(const Literal& idx, int64_t i) {
  switch (idx.dtype()) {
    case DType::kI32: return idx.data<int32_t>()[i];
    case DType::kI64: return idx.data<int64_t>()[i];
    case DType::kI8: return idx.data<int8_t>()[i];
    case DType::kU8: return idx.data<uint8_t>()[i];
    case DType::kU32: return idx.data<uint32_t>()[i];
    default: return 0;
  }
}

// gather / scatter_add geometry: x = [outer(p...), axis, row(r...)], p's first batch_dims dims are
// shared with indices = [batch..., inner(i...)].
struct GatherGeometry {
  int64_t outer = 1, axis_size = 0, row = 1, batch = 1, inner = 1, per_batch = 1;
};
GatherGeometry Geometry(const Node& node, const Literal& x, const Literal& idx) {
  const auto& a = node.attrs_as<ir::GatherAttrs>();
  GatherGeometry g;
  for (int64_t d = 0; d < a.axis; ++d) g.outer *= x.shape().dim(d);
  g.axis_size = x.shape().dim(a.axis);
  for (int64_t d = a.axis + 1; d < x.shape().rank(); ++d) g.row *= x.shape().dim(d);
  for (int64_t d = 0; d < a.batch_dims; ++d) g.batch *= idx.shape().dim(d);
  for (int64_t d = a.batch_dims; d < idx.shape().rank(); ++d) g.inner *= idx.shape().dim(d);
  g.per_batch = g.batch == 0 ? 0 : g.outer / g.batch;  // p's dims after the batch dims
  return g;
}

bool GatherKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const Literal& idx = *ops[1];
  if (out.NumElements() == 0) return true;
  const GatherGeometry g = Geometry(node, x, idx);
  if (g.axis_size == 0) return false;  // the interpreter reports the error
  const int64_t w = DTypeSize(x.dtype());
  const int64_t row_bytes = g.row * w;
  const uint8_t* src = x.bytes().data();
  uint8_t* dst = out.mutable_bytes().data();
  const int64_t total_rows = g.outer * g.inner;
  const int64_t min_rows = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(g.row, 1));
  ThreadPool::Global().ParallelFor(total_rows, min_rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = r / g.inner, i = r % g.inner;
      const int64_t bi = p / g.per_batch;
      int64_t k = LoadIndex(idx, bi * g.inner + i);
      k = std::clamp<int64_t>(k, 0, g.axis_size - 1);
      std::memcpy(dst + r * row_bytes, src + ((p * g.axis_size + k) * g.row) * w,
                  static_cast<size_t>(row_bytes));
    }
  });
  return true;
}

// Note [Scatter-add by destination rows]: the updates are added in row-major update order, each
// add rounded, so duplicates accumulate as the interpreter's do. The work is cut by destination
// rows, not by updates: every part scans all the indices and adds only those that land in its
// rows, so each destination row still sees its updates in order and the bits do not depend on
// the cut. A part owns every parts-th block of 8 rows rather than one range: token ids cluster
// (GPT-2 small's byte tokens use rows 0-255 of 512), and a range would leave one thread the
// work. (Its embedding gradient, 512 updates of 128 floats: 38-41 us on one thread.)
template <typename T>
bool ScatterAddKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const Literal& idx = *ops[1];
  const Literal& upd = *ops[2];
  const bool copy = out.bytes().data() != x.bytes().data() && !out.bytes().empty();
  const GatherGeometry g = Geometry(node, x, idx);
  T* y = out.mutable_data<T>();
  const T* xs = x.data<T>();
  const T* u = upd.data<T>();
  const int64_t dst_rows = g.outer * g.axis_size, updates = upd.NumElements() == 0 ? 0 : g.outer * g.inner;
  constexpr int64_t kBlock = 8;  // rows
  const int64_t blocks = (dst_rows + kBlock - 1) / kBlock;
  const bool split = std::max(dst_rows, updates) * g.row >= kParallelElements && blocks > 1;
  const int64_t parts = split ? std::min<int64_t>(blocks, 4 * ThreadPool::Global().num_threads()) : 1;
  ThreadPool::Global().ParallelFor(parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t part = lo; part < hi; ++part) {
      if (copy)
        for (int64_t blk = part; blk < blocks; blk += parts) {
          const int64_t r0 = blk * kBlock, r1 = std::min(dst_rows, r0 + kBlock);
          std::memcpy(y + r0 * g.row, xs + r0 * g.row, static_cast<size_t>((r1 - r0) * g.row) * sizeof(T));
        }
      for (int64_t r = 0; r < updates; ++r) {
        const int64_t p = r / g.inner, i = r % g.inner;
        const int64_t k = LoadIndex(idx, (p / g.per_batch) * g.inner + i);
        const int64_t d = p * g.axis_size + k;
        if (k < 0 || k >= g.axis_size || (d / kBlock) % parts != part) continue;
        T* dr = y + d * g.row;
        const T* ur = u + r * g.row;
        for (int64_t j = 0; j < g.row; ++j) dr[j] = dr[j] + ur[j];
      }
    }
  });
  return true;
}

// The inverse of StridedCopy: dst[base + sum_d idx[d] * strides[d]] = src[flat(idx)].
template <typename W>
void StridedScatterT(const W* src, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                     int64_t base, W* dst) {
  for (int64_t d : dims)
    if (d == 0) return;
  const size_t rank = dims.size();
  if (rank == 0) {
    dst[base] = src[0];
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  const int64_t inner_n = dims.back(), inner_s = strides.back();
  int64_t off = base;
  for (int64_t flat = 0;; flat += inner_n) {
    W* d = dst + off;
    const W* s = src + flat;
    if (inner_s == 1) std::memcpy(d, s, static_cast<size_t>(inner_n) * sizeof(W));
    else for (int64_t i = 0; i < inner_n; ++i) d[i * inner_s] = s[i];
    size_t k = rank - 1;
    for (;;) {
      if (k == 0) return;
      --k;
      off += strides[k];
      if (++idx[k] < dims[k]) break;
      off -= strides[k] * dims[k];
      idx[k] = 0;
    }
  }
}

void StridedScatter(const uint8_t* src, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& strides, int64_t base, int64_t width, uint8_t* dst) {
  switch (width) {
    case 1: return StridedScatterT(src, dims, strides, base, dst);
    case 2: return StridedScatterT(reinterpret_cast<const uint16_t*>(src), dims, strides, base, reinterpret_cast<uint16_t*>(dst));
    case 4: return StridedScatterT(reinterpret_cast<const uint32_t*>(src), dims, strides, base, reinterpret_cast<uint32_t*>(dst));
    default: return StridedScatterT(reinterpret_cast<const uint64_t*>(src), dims, strides, base, reinterpret_cast<uint64_t*>(dst));
  }
}

void Fill(uint8_t* dst, int64_t n, const uint8_t* value, int64_t width) {
  if (n == 0) return;  // dst may be null
  switch (width) {
    case 1: std::memset(dst, *value, static_cast<size_t>(n)); return;
    case 2: { uint16_t v; std::memcpy(&v, value, 2); std::fill_n(reinterpret_cast<uint16_t*>(dst), n, v); return; }
    case 4: { uint32_t v; std::memcpy(&v, value, 4); std::fill_n(reinterpret_cast<uint32_t*>(dst), n, v); return; }
    default: { uint64_t v; std::memcpy(&v, value, 8); std::fill_n(reinterpret_cast<uint64_t*>(dst), n, v); return; }
  }
}

bool PadKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& a = node.attrs_as<ir::PadAttrs>();
  const int64_t w = DTypeSize(x.dtype());
  Fill(out.mutable_bytes().data(), out.NumElements(), ops[1]->bytes().data(), w);
  if (out.NumElements() == 0 || x.NumElements() == 0) return true;
  // Operand indices [first, last] along each dim land inside the result.
  const std::vector<int64_t> os = out.shape().Strides(), xs = x.shape().Strides();
  std::vector<int64_t> dims, strides;
  int64_t src_base = 0, dst_base = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    const int64_t step = a.interior[d] + 1, n = x.shape().dim(static_cast<int64_t>(d));
    const int64_t size = out.shape().dim(static_cast<int64_t>(d));
    int64_t first = 0;
    while (first < n && a.low[d] + first * step < 0) ++first;
    int64_t last = n - 1;
    while (last >= first && a.low[d] + last * step >= size) --last;
    if (last < first) return true;
    dims.push_back(last - first + 1);
    strides.push_back(os[d] * step);
    src_base += first * xs[d];
    dst_base += (a.low[d] + first * step) * os[d];
  }
  // Copy the landing block of x contiguously, then scatter it.
  std::vector<uint8_t> block;
  const uint8_t* src = x.bytes().data();
  bool whole = true;
  for (size_t d = 0; d < dims.size(); ++d) whole = whole && dims[d] == x.shape().dim(static_cast<int64_t>(d));
  if (!whole) {
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    block.resize(static_cast<size_t>(count * w));
    StridedCopy(src, src_base, dims, xs, w, block.data());
    src = block.data();
  }
  StridedScatter(src, dims, strides, dst_base, w, out.mutable_bytes().data());
  return true;
}

std::vector<int64_t> ClampedStarts(Operands ops, size_t first, const Literal& x, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t s = LoadIndex(*ops[first + d], 0);
    starts.push_back(std::clamp<int64_t>(s, 0, x.shape().dim(static_cast<int64_t>(d)) - sizes[d]));
  }
  return starts;
}

bool DynamicSliceKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const auto& sizes = node.attrs_as<ir::DynamicSliceAttrs>().sizes;
  const std::vector<int64_t> starts = ClampedStarts(ops, 1, x, sizes);
  const std::vector<int64_t> xs = x.shape().Strides();
  int64_t base = 0;
  for (size_t d = 0; d < xs.size(); ++d) base += starts[d] * xs[d];
  StridedCopy(x.bytes().data(), base, out.shape().dims(), xs, DTypeSize(x.dtype()), out.mutable_bytes().data());
  return true;
}

bool DynamicUpdateSliceKernel(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  const Literal& u = *ops[1];
  if (out.bytes().data() != x.bytes().data() && !out.bytes().empty())
    std::memcpy(out.mutable_bytes().data(), x.bytes().data(), out.bytes().size());
  const std::vector<int64_t> starts = ClampedStarts(ops, 2, x, u.shape().dims());
  const std::vector<int64_t> xs = x.shape().Strides();
  int64_t base = 0;
  for (size_t d = 0; d < xs.size(); ++d) base += starts[d] * xs[d];
  StridedScatter(u.bytes().data(), u.shape().dims(), xs, base, DTypeSize(x.dtype()), out.mutable_bytes().data());
  return true;
}

bool BitcastConvertKernel(const Node&, Operands ops, Literal& out) {
  if (!out.bytes().empty()) std::memcpy(out.mutable_bytes().data(), ops[0]->bytes().data(), out.bytes().size());
  return true;
}

template <typename T>
bool IotaKernel(const Node& node, Operands, Literal& out) {
  const int64_t dim = node.attrs_as<ir::IotaAttrs>().dim;
  const auto& dims = out.shape().dims();
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t n = dims[static_cast<size_t>(dim)];
  T* y = out.mutable_data<T>();
  const int64_t total = out.NumElements();
  for (int64_t i = 0; i < total; ++i) y[i] = static_cast<T>((i / inner) % n);  // one rounding / wrap
  return true;
}

}  // namespace

KernelChoice SelectMovementKernel(const Node& node) {
  KernelChoice c;
  switch (node.op()) {
    case OpKind::kBroadcastInDim: c.fn = BroadcastInDimKernel; c.name = "broadcast_in_dim"; break;
    case OpKind::kTranspose: c.fn = TransposeKernel; c.name = "transpose"; break;
    case OpKind::kSlice: c.fn = SliceKernel; c.name = "slice"; break;
    case OpKind::kReverse: c.fn = ReverseKernel; c.name = "reverse"; break;
    case OpKind::kReshape: c.fn = ReshapeKernel; c.in_place = true; c.name = "reshape"; break;
    case OpKind::kConcatenate: c.fn = ConcatenateKernel; c.name = "concatenate"; break;
    case OpKind::kGather: c.fn = GatherKernel; c.name = "gather"; break;
    case OpKind::kScatterAdd:
      if (node.result()->dtype() == DType::kF32) c.fn = ScatterAddKernel<float>;
      if (node.result()->dtype() == DType::kF64) c.fn = ScatterAddKernel<double>;
      c.in_place = c.fn != nullptr;  // out may be x's storage, never the updates'
      c.in_place_operand = 0;
      c.name = "scatter_add";
      break;
    case OpKind::kPad: c.fn = PadKernel; c.name = "pad"; break;
    case OpKind::kDynamicSlice: c.fn = DynamicSliceKernel; c.name = "dynamic_slice"; break;
    case OpKind::kDynamicUpdateSlice:
      c.fn = DynamicUpdateSliceKernel;
      c.in_place = true;  // out may be x's storage, never the update's
      c.in_place_operand = 0;
      c.name = "dynamic_update_slice";
      break;
    case OpKind::kBitcastConvert: c.fn = BitcastConvertKernel; c.in_place = true; c.name = "bitcast_convert"; break;
    case OpKind::kIota:
      switch (node.result()->dtype()) {
        case DType::kF32: c.fn = IotaKernel<float>; break;
        case DType::kF64: c.fn = IotaKernel<double>; break;
        case DType::kI32: c.fn = IotaKernel<int32_t>; break;
        case DType::kI64: c.fn = IotaKernel<int64_t>; break;
        case DType::kU32: c.fn = IotaKernel<uint32_t>; break;
        default: break;
      }
      c.name = "iota";
      break;
    default: break;
  }
  return c;
}

}  // namespace axle::runtime::cpu
