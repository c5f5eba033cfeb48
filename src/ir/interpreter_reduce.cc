// Interpreter kernels of reductions, scans, sort and dot_general; and the Accumulator that
// reduce, all_reduce and reduce_scatter share.
#include <algorithm>
#include <numeric>

#include "ir/interpreter_internal.h"
#include "ir/shape_inference.h"

namespace axle::ir::interp {

// ---------------------------------------------------------------------------------------------
// Note [Accumulation]
// Float sums and products accumulate in double and round once into the result type, so a sum does
// not depend on how a backend splits it as long as the backend is exact enough (f32 sums of
// values of mixed magnitude, bf16 sums of many terms). Values are combined in row-major order of
// the operand (for collectives: group order). max/min use the max/min ops' rules: NaN wins and +0
// beats -0. Integer sums and products wrap modulo 2^N: computing on the int64 two's complement
// bits and truncating once gives the same bits as wrapping at every step.
// A float sum starts at -0 (the exact additive identity: -0 + -0 = -0, so a sum of negative
// zeros stays -0) and an empty float sum stores +0. Empty reductions store the identity: 0,
// 1, -inf / the lowest integer (max), +inf / the largest integer (min), all ones (and; true for
// bool), 0 (or; false for bool).

namespace {

int64_t LowestInt(DType t) {
  return VisitInteger(t, [](auto e) -> int64_t {
    return static_cast<int64_t>(std::numeric_limits<typename decltype(e)::Compute>::lowest());
  });
}
int64_t HighestInt(DType t) {
  return VisitInteger(t, [](auto e) -> int64_t {
    return static_cast<int64_t>(std::numeric_limits<typename decltype(e)::Compute>::max());
  });
}

}  // namespace

Accumulator::Accumulator(ReduceKind kind, DType dtype)
    : kind_(kind), dtype_(dtype), is_float_(IsFloat(dtype)) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (kind) {
    case ReduceKind::kSum: f_ = -0.0; i_ = 0; break;
    case ReduceKind::kProd: f_ = 1; i_ = 1; break;
    case ReduceKind::kMax: f_ = -kInf; i_ = is_float_ ? 0 : LowestInt(dtype); break;
    case ReduceKind::kMin: f_ = kInf; i_ = is_float_ ? 0 : HighestInt(dtype); break;
    case ReduceKind::kAnd: i_ = -1; break;
    case ReduceKind::kOr: i_ = 0; break;
  }
}

void Accumulator::Add(const Literal& lit, int64_t i) {
  any_ = true;
  if (is_float_) {
    const double x = LoadDouble(lit, i);
    switch (kind_) {
      case ReduceKind::kSum: f_ += x; return;
      case ReduceKind::kProd: f_ *= x; return;
      case ReduceKind::kMax: f_ = Max(f_, x); return;
      case ReduceKind::kMin: f_ = Min(f_, x); return;
      default: Fail("internal error: {} reduction of floats", EnumName(kind_));
    }
  }
  const int64_t x = LoadInt(lit, i);
  const uint64_t a = static_cast<uint64_t>(i_), b = static_cast<uint64_t>(x);
  switch (kind_) {
    case ReduceKind::kSum: i_ = static_cast<int64_t>(a + b); return;
    case ReduceKind::kProd: i_ = static_cast<int64_t>(a * b); return;
    case ReduceKind::kMax: i_ = std::max(i_, x); return;
    case ReduceKind::kMin: i_ = std::min(i_, x); return;
    case ReduceKind::kAnd: i_ = static_cast<int64_t>(a & b); return;
    case ReduceKind::kOr: i_ = static_cast<int64_t>(a | b); return;
  }
}

void Accumulator::Store(Literal& out, int64_t i) const {
  if (!is_float_) return StoreInt(out, i, i_);
  StoreDouble(out, i, (kind_ == ReduceKind::kSum && !any_) ? 0.0 : f_);
}

namespace {

// For each operand position, the flat offset of its result position once `dropped` dims are gone.
std::vector<int64_t> KeptStrides(const Shape& operand, const std::vector<int64_t>& dropped) {
  std::vector<int64_t> strides(static_cast<size_t>(operand.rank()), 0);
  int64_t stride = 1;
  for (int64_t d = operand.rank() - 1; d >= 0; --d) {
    if (std::find(dropped.begin(), dropped.end(), d) != dropped.end()) continue;
    strides[static_cast<size_t>(d)] = stride;
    stride *= operand.dim(d);
  }
  return strides;
}

std::vector<Literal> ReduceKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& r = node.attrs_as<ReduceAttrs>();
  Literal out(node.result()->type());
  std::vector<Accumulator> acc(static_cast<size_t>(out.NumElements()), Accumulator(r.kind, x.dtype()));
  const std::vector<int64_t> to = KeptStrides(x.shape(), r.dims);
  ForEachIndex(x.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    acc[static_cast<size_t>(Offset(idx, to))].Add(x, flat);
  });
  for (size_t i = 0; i < acc.size(); ++i) acc[i].Store(out, static_cast<int64_t>(i));
  return One(std::move(out));
}

// The index of the first extreme element along `dim`; a NaN is more extreme than any number, so
// the first NaN wins (numpy's argmax/argmin).
template <bool kMax>
std::vector<Literal> ArgReduceKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const int64_t dim = node.attrs_as<ArgReduceAttrs>().dim;
  Literal out(node.result()->type());
  const size_t n = static_cast<size_t>(out.NumElements());
  const std::vector<int64_t> to = KeptStrides(x.shape(), {dim});
  VisitNumeric(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::Compute;
    std::vector<T> best(n);
    std::vector<int64_t> best_at(n, -1);
    ForEachIndex(x.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t flat) {
      const size_t o = static_cast<size_t>(Offset(idx, to));
      const T v = Get<E>(x, flat);
      bool take = best_at[o] < 0;
      if constexpr (std::is_floating_point_v<T>) {
        if (!take && std::isnan(best[o])) return;
        take = take || std::isnan(v);
      }
      take = take || (kMax ? v > best[o] : v < best[o]);
      if (!take) return;
      best[o] = v;
      best_at[o] = idx[static_cast<size_t>(dim)];
    });
    for (size_t o = 0; o < n; ++o) StoreInt(out, static_cast<int64_t>(o), best_at[o]);
  });
  return One(std::move(out));
}

// Calls f(offset, stride, size) for every line of `shape` along `dim`: the line's elements are at
// offset + k * stride for k in [0, size).
template <typename F>
void ForEachLine(const Shape& shape, int64_t dim, F&& f) {
  std::vector<int64_t> outer = shape.dims();
  outer[static_cast<size_t>(dim)] = 1;
  const std::vector<int64_t> strides = shape.Strides();
  ForEachIndex(outer, [&](const std::vector<int64_t>& idx, int64_t) {
    f(Offset(idx, strides), strides[static_cast<size_t>(dim)], shape.dim(dim));
  });
}

// Inclusive running sums; floats accumulate in double and each output rounds once.
std::vector<Literal> CumsumKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& x = *ops[0];
  const auto& c = node.attrs_as<CumsumAttrs>();
  Literal out(node.result()->type());
  const bool is_float = IsFloat(x.dtype());
  ForEachLine(x.shape(), c.dim, [&](int64_t offset, int64_t stride, int64_t size) {
    double f = 0;
    uint64_t u = 0;
    for (int64_t k = 0; k < size; ++k) {
      const int64_t at = offset + (c.reverse ? size - 1 - k : k) * stride;
      if (is_float) {
        f = k == 0 ? LoadDouble(x, at) : f + LoadDouble(x, at);
        StoreDouble(out, at, f);
      } else {
        u += static_cast<uint64_t>(LoadInt(x, at));
        StoreInt(out, at, static_cast<int64_t>(u));
      }
    }
  });
  return One(std::move(out));
}

// Ascending order: -inf < ... < -0 == +0 < ... < +inf < NaN (NaNs equal each other).
template <typename T>
bool SortLess(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// Stable sort of every operand along `dim` by operand 0; descending reverses the comparison.
std::vector<Literal> SortKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& keys = *ops[0];
  const auto& s = node.attrs_as<SortAttrs>();
  std::vector<Literal> out;
  for (const Literal* x : ops) out.push_back(*x);
  VisitNumeric(keys.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::Compute;
    ForEachLine(keys.shape(), s.dim, [&](int64_t offset, int64_t stride, int64_t size) {
      std::vector<int64_t> order(static_cast<size_t>(size));
      std::iota(order.begin(), order.end(), 0);
      auto key = [&](int64_t k) { return Get<E>(keys, offset + k * stride); };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return s.descending ? SortLess<T>(key(b), key(a)) : SortLess<T>(key(a), key(b));
      });
      for (size_t j = 0; j < out.size(); ++j)
        for (int64_t k = 0; k < size; ++k)
          CopyElement(*ops[j], offset + order[static_cast<size_t>(k)] * stride, out[j],
                      offset + k * stride);
    });
  });
  return out;
}

// result[batch, lhs free, rhs free] = sum over contracting of lhs * rhs; floats accumulate the
// products in double and round once, integers wrap.
std::vector<Literal> DotGeneralKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const Literal& lhs = *ops[0];
  const Literal& rhs = *ops[1];
  const auto& d = node.attrs_as<DotGeneralAttrs>();
  Literal out(node.result()->type());
  const std::vector<int64_t> lf = DotFreeDims(lhs.shape().rank(), d.lhs_batch, d.lhs_contracting);
  const std::vector<int64_t> rf = DotFreeDims(rhs.shape().rank(), d.rhs_batch, d.rhs_contracting);
  std::vector<int64_t> contract_dims;
  for (int64_t c : d.lhs_contracting) contract_dims.push_back(lhs.shape().dim(c));
  const std::vector<int64_t> ls = lhs.shape().Strides(), rs = rhs.shape().Strides();
  std::vector<int64_t> li(ls.size()), ri(rs.size());
  const int64_t contract_size = Shape(contract_dims).NumElements();
  const size_t nb = d.lhs_batch.size();
  const bool is_float = IsFloat(lhs.dtype());
  ForEachIndex(out.shape().dims(), [&](const std::vector<int64_t>& r, int64_t flat) {
    for (size_t k = 0; k < nb; ++k) {
      li[static_cast<size_t>(d.lhs_batch[k])] = r[k];
      ri[static_cast<size_t>(d.rhs_batch[k])] = r[k];
    }
    for (size_t k = 0; k < lf.size(); ++k) li[static_cast<size_t>(lf[k])] = r[nb + k];
    for (size_t k = 0; k < rf.size(); ++k) ri[static_cast<size_t>(rf[k])] = r[nb + lf.size() + k];
    double f = -0.0;  // see Note [Accumulation]
    uint64_t u = 0;
    ForEachIndex(contract_dims, [&](const std::vector<int64_t>& c, int64_t) {
      for (size_t k = 0; k < c.size(); ++k) {
        li[static_cast<size_t>(d.lhs_contracting[k])] = c[k];
        ri[static_cast<size_t>(d.rhs_contracting[k])] = c[k];
      }
      if (is_float)
        f += LoadDouble(lhs, Offset(li, ls)) * LoadDouble(rhs, Offset(ri, rs));
      else
        u += static_cast<uint64_t>(LoadInt(lhs, Offset(li, ls))) *
             static_cast<uint64_t>(LoadInt(rhs, Offset(ri, rs)));
    });
    if (is_float) StoreDouble(out, flat, contract_size == 0 ? 0.0 : f);
    else StoreInt(out, flat, static_cast<int64_t>(u));
  });
  return One(std::move(out));
}

}  // namespace

void RegisterReduceKernels(KernelTable& table) {
  auto set = [&](OpKind k, LocalKernel f) { table[static_cast<size_t>(k)].local = f; };
  set(OpKind::kReduce, ReduceKernel);
  set(OpKind::kArgMax, ArgReduceKernel<true>);
  set(OpKind::kArgMin, ArgReduceKernel<false>);
  set(OpKind::kCumsum, CumsumKernel);
  set(OpKind::kSort, SortKernel);
  set(OpKind::kDotGeneral, DotGeneralKernel);
}

}  // namespace axle::ir::interp
