// Reduce fast kernels: sum / max / min of f32 and f64 over any dims.
//
// Bitwise equal to the interpreter: floats accumulate in double starting at -0 (sum) or ∓inf
// (max/min, NaN wins, +0 beats -0), each output visits its inputs in row-major order over the
// reduced dims, and rounds once (an empty sum stores +0). The layout [A, R, B] (the reduced dims
// one contiguous block R) is handled in place: B == 1 is a contiguous innermost reduction (one
// output per row), otherwise each a accumulates rows of B columns (the leading-dims case, A == 1,
// vectorises across columns). Any other set of dims is first transposed to [kept..., reduced...]
// with StridedCopy, which keeps the row-major order over the reduced dims.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels.h"
// The builds use -O2, whose "very cheap" vectoriser cost model skips the column loops below.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
// After the pragma: the scalar functions are inlined into the loops below and take their options.
#include "ir/scalar_ops.h"  // NOLINT(build/include_order)
#include "runtime/thread_pool.h"

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;
using ir::ReduceKind;

template <ReduceKind K>
inline double Combine(double acc, double x) {
  if constexpr (K == ReduceKind::kSum) return acc + x;
  else if constexpr (K == ReduceKind::kMax) return ir::scalar::Max(acc, x);
  else return ir::scalar::Min(acc, x);
}
template <ReduceKind K>
constexpr double Init() {
  if constexpr (K == ReduceKind::kSum) return -0.0;
  else if constexpr (K == ReduceKind::kMax) return -std::numeric_limits<double>::infinity();
  else return std::numeric_limits<double>::infinity();
}
template <ReduceKind K>
double Finish(double acc, int64_t count) {
  if constexpr (K == ReduceKind::kSum) return count == 0 ? 0.0 : acc;
  else return acc;
}

// x viewed as [A, R, B]; out as [A, B].
template <typename T, ReduceKind K>
void ReduceARB(const T* x, int64_t A, int64_t R, int64_t B, T* out) {
  ThreadPool& pool = ThreadPool::Global();
  if (B == 1) {
    const int64_t min_rows = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(R, 1));
    pool.ParallelFor(A, min_rows, [&](int64_t b, int64_t e) {
      for (int64_t a = b; a < e; ++a) {
        const T* row = x + a * R;
        double acc = Init<K>();
        for (int64_t r = 0; r < R; ++r) acc = Combine<K>(acc, static_cast<double>(row[r]));
        out[a] = static_cast<T>(Finish<K>(acc, R));
      }
    });
    return;
  }
  // Split over (a, column block) pairs so A == 1 still uses every thread.
  constexpr int64_t kBlock = 512;
  const int64_t blocks = (B + kBlock - 1) / kBlock;
  const int64_t min_items = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(R * kBlock, 1));
  pool.ParallelFor(A * blocks, min_items, [&](int64_t b, int64_t e) {
    double acc[kBlock];
    for (int64_t item = b; item < e; ++item) {
      const int64_t a = item / blocks, j0 = (item % blocks) * kBlock;
      const int64_t n = std::min(kBlock, B - j0);
      std::fill(acc, acc + n, Init<K>());
      const T* base = x + a * R * B + j0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = base + r * B;
        for (int64_t j = 0; j < n; ++j) acc[j] = Combine<K>(acc[j], static_cast<double>(row[j]));
      }
      T* o = out + a * B + j0;
      for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>(Finish<K>(acc[j], R));
    }
  });
}

template <typename T, ReduceKind K>
bool ReduceKernelT(const Node& node, Operands ops, Literal& out) {
  const Literal& x = *ops[0];
  std::vector<int64_t> rdims = node.attrs_as<ir::ReduceAttrs>().dims;
  std::sort(rdims.begin(), rdims.end());
  const auto& dims = x.shape().dims();
  const int64_t rank = x.shape().rank();
  if (out.NumElements() == 0) return true;
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : rdims) reduced[static_cast<size_t>(d)] = true;
  // Contiguous block?
  bool block = true;
  for (size_t i = 1; i < rdims.size(); ++i) block = block && rdims[i] == rdims[i - 1] + 1;
  if (rdims.empty()) {  // a copy
    std::copy(x.data<T>(), x.data<T>() + x.NumElements(), out.mutable_data<T>());
    return true;
  }
  if (block) {
    int64_t A = 1, R = 1, B = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < rdims.front()) A *= dims[static_cast<size_t>(d)];
      else if (d <= rdims.back()) R *= dims[static_cast<size_t>(d)];
      else B *= dims[static_cast<size_t>(d)];
    }
    ReduceARB<T, K>(x.data<T>(), A, R, B, out.mutable_data<T>());
    return true;
  }
  // Transpose to [kept..., reduced...].
  const std::vector<int64_t> xs = x.shape().Strides();
  std::vector<int64_t> tdims, tstrides;
  int64_t A = 1, R = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) {
      tdims.push_back(dims[static_cast<size_t>(d)]);
      tstrides.push_back(xs[static_cast<size_t>(d)]);
      A *= dims[static_cast<size_t>(d)];
    }
  for (int64_t d : rdims) {
    tdims.push_back(dims[static_cast<size_t>(d)]);
    tstrides.push_back(xs[static_cast<size_t>(d)]);
    R *= dims[static_cast<size_t>(d)];
  }
  std::vector<T> tmp(static_cast<size_t>(A * R));
  StridedCopy(x.bytes().data(), 0, tdims, tstrides, sizeof(T), reinterpret_cast<uint8_t*>(tmp.data()));
  ReduceARB<T, K>(tmp.data(), A, R, 1, out.mutable_data<T>());
  return true;
}

template <typename T>
KernelFn ReduceFor(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum: return ReduceKernelT<T, ReduceKind::kSum>;
    case ReduceKind::kMax: return ReduceKernelT<T, ReduceKind::kMax>;
    case ReduceKind::kMin: return ReduceKernelT<T, ReduceKind::kMin>;
    default: return nullptr;
  }
}

}  // namespace

KernelChoice SelectReduceKernel(const Node& node) {
  KernelChoice c;
  if (node.op() != ir::OpKind::kReduce) return c;
  const auto kind = node.attrs_as<ir::ReduceAttrs>().kind;
  const DType t = node.result()->dtype();
  if (t == DType::kF32) c.fn = ReduceFor<float>(kind);
  if (t == DType::kF64) c.fn = ReduceFor<double>(kind);
  c.name = "reduce";
  return c;
}

}  // namespace axle::runtime::cpu
