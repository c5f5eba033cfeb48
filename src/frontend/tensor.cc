// axle::Tensor's operations: each one appends IR primitives to the current trace (lazy.h).
// Creation functions are in creation.cc, composite ops (softmax, layer_norm, ...) in
// composite.cc, autodiff in autograd.cc, the shared helpers in ops_internal.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "axle/autocast.h"
#include "frontend/lazy.h"
#include "frontend/ops_internal.h"
#include "ir/shape_inference.h"

namespace axle {
using detail::B;
using detail::MakePending;
using detail::ValueOf;
using ir::OpKind;
using ir::Value;

using namespace detail;

Dims broadcast_shapes(const Dims& a, const Dims& b) { return BroadcastShapes(a, b); }

namespace {

std::string Shp(const Tensor& t) { return t.type_string(); }

// Promotes and broadcasts both operands of an elementwise op.
std::pair<Value*, Value*> Coerce(const Tensor& a, const Tensor& b, std::string_view op,
                                 DType* common = nullptr) {
  ValueOf(a), ValueOf(b);  // checks definedness first
  Dims shape;
  try {
    shape = BroadcastShapes(a.sizes(), b.sizes());
  } catch (const Error& e) {
    Fail("{}: operands {} and {} do not broadcast: {}", op, Shp(a), Shp(b), e.message());
  }
  const DType t = Promote(a.dtype(), b.dtype());
  if (common) *common = t;
  return {BroadcastOperand(Cast(ValueOf(a), t), shape), BroadcastOperand(Cast(ValueOf(b), t), shape)};
}

Tensor BinaryOp(OpKind op, const Tensor& a, const Tensor& b) {
  auto [x, y] = Coerce(a, b, ir::OpName(op));
  return MakePending(B().Binary(op, x, y), {&a, &b});
}

Tensor BinaryScalar(OpKind op, const Tensor& a, double s, bool scalar_first) {
  ValueOf(a);
  Value* sv = FullOperand(a.sizes(), a.dtype(), s);
  Value* av = ValueOf(a);
  return MakePending(scalar_first ? B().Binary(op, sv, av) : B().Binary(op, av, sv), {&a});
}

Tensor CompareOp(ir::CompareDir dir, const Tensor& a, const Tensor& b) {
  auto [x, y] = Coerce(a, b, "compare");
  return MakePending(B().Compare(dir, x, y), false);
}

Tensor CompareScalar(ir::CompareDir dir, const Tensor& a, double s) {
  Value* av = ValueOf(a);
  return MakePending(B().Compare(dir, av, FullOperand(a.sizes(), a.dtype(), s)), false);
}

Tensor Unary(OpKind op, const Tensor& a) {
  return MakePending(B().Unary(op, ValueOf(a)), {&a});
}

Tensor FloatUnary(OpKind op, const Tensor& a) {
  Value* v = ValueOf(a);
  if (!IsFloat(a.dtype())) v = B().Convert(v, DType::kF32);  // torch.exp(int) is float
  return MakePending(B().Unary(op, v), {&a});
}

Tensor Reduce(const Tensor& x, ir::ReduceKind kind, const Dims& dims, bool keepdim,
              std::string_view op) {
  Dims d = dims.empty() ? Dims() : NormDims(dims, x.dim(), op);
  if (dims.empty())
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  Value* v = ValueOf(x);
  if (x.dtype() == DType::kBool && (kind == ir::ReduceKind::kSum)) v = B().Convert(v, DType::kI64);
  Value* r = B().Reduce(v, kind, d);
  if (keepdim) r = KeepDims(r, x.sizes(), d);
  return MakePending(r, {&x});
}

Dims InferReshape(const Dims& from, Dims to, int64_t numel) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      if (infer >= 0) Fail("reshape: only one dim may be -1, got [{}]", fmt::join(to, ","));
      infer = static_cast<int64_t>(i);
    } else if (to[i] < 0) {
      Fail("reshape: invalid size {} in [{}]", to[i], fmt::join(to, ","));
    } else {
      known *= to[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      Fail("reshape: cannot reshape [{}] ({} elements) into [{}]", fmt::join(from, ","), numel,
           fmt::join(to, ","));
    to[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    Fail("reshape: cannot reshape [{}] ({} elements) into [{}] ({} elements)",
         fmt::join(from, ","), numel, fmt::join(to, ","), known);
  }
  return to;
}

}  // namespace

// ---- Properties ------------------------------------------------------------------------------
DType Tensor::dtype() const {
  AXLE_CHECK(defined(), "dtype() of an undefined tensor");
  return impl_->type.dtype;
}
DimsView Tensor::sizes() const {
  AXLE_CHECK(defined(), "sizes() of an undefined tensor");
  return impl_->type.shape.dims();
}
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::size(int64_t d) const { return sizes()[static_cast<size_t>(NormDim(d, dim(), "size"))]; }
int64_t Tensor::numel() const { return impl_->type.NumElements(); }
std::string Tensor::type_string() const { return defined() ? impl_->type.ToString() : "undefined"; }

ir::Literal Tensor::to_literal() const { return *detail::Materialize(*this); }

double Tensor::item() const {
  if (numel() != 1)
    Fail("item(): the tensor {} has {} elements; item() needs exactly one", type_string(), numel());
  return detail::Materialize(*this)->GetDouble(0);
}

std::string Tensor::ToString() const {
  if (!defined()) return "tensor(undefined)";
  return "tensor(" + to_literal().ToString() + ")";
}

// ---- In place --------------------------------------------------------------------------------
Tensor& Tensor::copy_(const Tensor& src) {
  Value* v = BroadcastTo(Cast(ValueOf(src), dtype()), sizes());
  detail::Rebind(*impl_, v);
  return *this;
}
Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return copy_(alpha == 1.0 ? *this + other : *this + other * alpha);
}
Tensor& Tensor::mul_(const Tensor& other) { return copy_(*this * other); }
Tensor& Tensor::mul_(double s) { return copy_(*this * s); }
Tensor& Tensor::zero_() { return fill_(0.0); }
Tensor& Tensor::convert_(DType to) {
  if (to == dtype()) return *this;
  Value* v = Cast(ValueOf(*this), to);
  impl_->type = ir::TensorType(to, impl_->type.shape);
  impl_->grad.reset();
  detail::Rebind(*impl_, v);
  return *this;
}
Tensor& Tensor::fill_(double v) {
  detail::Rebind(*impl_, Full(sizes(), dtype(), v));
  return *this;
}

// ---- Movement ----------------------------------------------------------------------------------
Tensor Tensor::reshape(Dims shape) const {
  Dims to = InferReshape(sizes(), std::move(shape), numel());
  if (to == sizes()) return *this;
  return MakePending(B().Reshape(ValueOf(*this), Shape(to)), {this});
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = NormDim(start_dim, dim(), "flatten"), e = NormDim(end_dim, dim(), "flatten");
  if (s > e) Fail("flatten: start_dim {} is after end_dim {}", start_dim, end_dim);
  Dims to;
  for (int64_t i = 0; i < s; ++i) to.push_back(size(i));
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= size(i);
  to.push_back(m);
  for (int64_t i = e + 1; i < dim(); ++i) to.push_back(size(i));
  return reshape(to);
}

Tensor Tensor::permute(Dims dims) const {
  if (static_cast<int64_t>(dims.size()) != dim())
    Fail("permute: {} dims given for a tensor of rank {} ({})", dims.size(), dim(), type_string());
  Dims perm;
  for (int64_t d : dims) perm.push_back(NormDim(d, dim(), "permute"));
  Dims sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < dim(); ++i)
    if (sorted[static_cast<size_t>(i)] != i)
      Fail("permute: [{}] is not a permutation of the {} dims", fmt::join(dims, ", "), dim());
  bool identity = true;
  for (int64_t i = 0; i < dim(); ++i) identity = identity && perm[static_cast<size_t>(i)] == i;
  if (identity) return *this;
  return MakePending(B().Transpose(ValueOf(*this), perm), {this});
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  Dims perm(static_cast<size_t>(dim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(NormDim(d0, dim(), "transpose"))],
            perm[static_cast<size_t>(NormDim(d1, dim(), "transpose"))]);
  return permute(perm);
}

Tensor Tensor::squeeze() const {
  Dims to;
  for (int64_t s : sizes())
    if (s != 1) to.push_back(s);
  return reshape(to);
}

Tensor Tensor::squeeze(int64_t d) const {
  const int64_t n = NormDim(d, dim(), "squeeze");
  if (dim() == 0 || size(n) != 1) return *this;
  Dims to = sizes();
  to.erase(to.begin() + n);
  return reshape(to);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = NormDim(d, dim() + 1, "unsqueeze");
  Dims to = sizes();
  to.insert(to.begin() + n, 1);
  return reshape(to);
}

Tensor Tensor::expand(Dims shape) const {
  const int64_t off = static_cast<int64_t>(shape.size()) - dim();
  if (off < 0)
    Fail("expand: target [{}] has fewer dims than {}", fmt::join(shape, ","), type_string());
  for (int64_t i = 0; i < dim(); ++i)
    if (shape[static_cast<size_t>(i + off)] == -1) shape[static_cast<size_t>(i + off)] = size(i);
  for (int64_t i = 0; i < dim(); ++i)
    if (size(i) != 1 && size(i) != shape[static_cast<size_t>(i + off)])
      Fail("expand: {} cannot expand to [{}]: dim {} is {}, not 1", type_string(),
           fmt::join(shape, ","), i, size(i));
  return MakePending(BroadcastTo(ValueOf(*this), shape), {this});
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  const int64_t n = NormDim(d, dim(), "slice");
  if (step <= 0) Fail("slice: step must be positive, got {}", step);
  const int64_t len = size(n);
  auto clamp = [&](int64_t v) {
    if (v < 0) v += len;
    return std::clamp<int64_t>(v, 0, len);
  };
  const int64_t s = start ? clamp(*start) : 0;
  const int64_t e = std::max(s, end ? clamp(*end) : len);
  if (s == 0 && e == len && step == 1) return *this;
  ir::SliceAttrs a;
  a.start.assign(static_cast<size_t>(dim()), 0);
  a.limit = sizes();
  a.strides.assign(static_cast<size_t>(dim()), 1);
  a.start[static_cast<size_t>(n)] = s;
  a.limit[static_cast<size_t>(n)] = e;
  a.strides[static_cast<size_t>(n)] = step;
  return MakePending(B().Build1(OpKind::kSlice, {ValueOf(*this)}, a), {this});
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int64_t n = NormDim(d, dim(), "narrow");
  if (start < 0) start += size(n);
  if (start < 0 || length < 0 || start + length > size(n))
    Fail("narrow: [{}, {}) is out of range for dim {} of size {}", start, start + length, d, size(n));
  return slice(n, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t n = NormDim(d, dim(), "select");
  const int64_t len = size(n);
  if (index < -len || index >= len)
    Fail("select: index {} is out of range for dim {} of size {}", index, d, len);
  if (index < 0) index += len;
  return slice(n, index, index + 1).squeeze(n);
}

Tensor Tensor::index_select(int64_t d, const Tensor& index) const {
  const int64_t n = NormDim(d, dim(), "index_select");
  if (IsFloat(index.dtype()) || index.dtype() == DType::kBool)
    Fail("index_select: indices must be integers, got {}", index.type_string());
  if (index.dim() > 1) Fail("index_select: index must be 1-D, got {}", index.type_string());
  return MakePending(
      B().Build1(OpKind::kGather, {ValueOf(*this), ValueOf(index)}, ir::GatherAttrs{n, 0}),
      {this});
}

Tensor Tensor::gather(int64_t d, const Tensor& index) const {
  const int64_t n = NormDim(d, dim(), "gather");
  if (index.dim() != dim())
    Fail("gather: index {} must have the rank of the input {}", index.type_string(), type_string());
  // Move `d` last, gather along it with every other dim as a batch dim (tf.gather batch_dims).
  Dims perm;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != n) perm.push_back(i);
  perm.push_back(n);
  Tensor x = permute(perm), idx = index.permute(perm);
  for (int64_t i = 0; i + 1 < dim(); ++i) {
    if (idx.size(i) > x.size(i))
      Fail("gather: index {} is larger than the input {} in dim {}", index.type_string(),
           type_string(), perm[static_cast<size_t>(i)]);
    x = x.slice(i, 0, idx.size(i));
  }
  Tensor g = MakePending(B().Build1(OpKind::kGather, {ValueOf(x), ValueOf(idx)},
                                    ir::GatherAttrs{dim() - 1, dim() - 1}),
                         {this});
  Dims inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return g.permute(inv);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  if (split_size <= 0) Fail("split: split_size must be positive, got {}", split_size);
  const int64_t n = NormDim(d, dim(), "split");
  std::vector<Tensor> out;
  for (int64_t s = 0; s < size(n) || (s == 0 && size(n) == 0); s += split_size) {
    out.push_back(slice(n, s, std::min(size(n), s + split_size)));
    if (size(n) == 0) break;
  }
  return out;
}

std::vector<Tensor> Tensor::split(const Dims& sizes_, int64_t d) const {
  const int64_t n = NormDim(d, dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes_) total += s;
  if (total != size(n))
    Fail("split: sizes [{}] sum to {} but dim {} has size {}", fmt::join(sizes_, ","), total, d,
         size(n));
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes_) {
    out.push_back(slice(n, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  if (chunks <= 0) Fail("chunk: chunks must be positive, got {}", chunks);
  const int64_t n = NormDim(d, dim(), "chunk");
  return split(std::max<int64_t>(1, (size(n) + chunks - 1) / chunks), n);
}

namespace {
Tensor TriMask(const Tensor& x, int64_t diagonal, bool lower) {
  if (x.dim() < 2) Fail("{}: needs at least 2 dims, got {}", lower ? "tril" : "triu", x.type_string());
  const Dims& s = x.sizes();
  ir::TensorType it(DType::kI64, Shape(s));
  Value* row = B().Iota(it, x.dim() - 2);
  Value* col = B().Iota(it, x.dim() - 1);
  Value* diff = B().Sub(col, row);  // col - row
  Value* keep = B().Compare(lower ? ir::CompareDir::kLe : ir::CompareDir::kGe, diff,
                            Full(s, DType::kI64, static_cast<double>(diagonal)));
  return MakePending(B().Select(keep, ValueOf(x), Full(s, x.dtype(), 0)), {&x});
}
}  // namespace

Tensor Tensor::tril(int64_t diagonal) const { return TriMask(*this, diagonal, true); }
Tensor Tensor::triu(int64_t diagonal) const { return TriMask(*this, diagonal, false); }

Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  if (mask.dtype() != DType::kBool)
    Fail("masked_fill: the mask must be bool, got {}", mask.type_string());
  Dims shape = broadcast_shapes(sizes(), mask.sizes());
  if (shape != sizes())
    Fail("masked_fill: mask {} does not broadcast to the input {}", mask.type_string(), type_string());
  Value* m = BroadcastTo(ValueOf(mask), shape);
  return MakePending(B().Select(m, Full(shape, dtype(), value), ValueOf(*this)), {this});
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  return MakePending(B().Convert(ValueOf(*this), t), {this});
}

// ---- Elementwise -------------------------------------------------------------------------------
Tensor Tensor::neg() const { return Unary(OpKind::kNeg, *this); }
Tensor Tensor::abs() const { return Unary(OpKind::kAbs, *this); }
Tensor Tensor::exp() const { return FloatUnary(OpKind::kExp, *this); }
Tensor Tensor::log() const { return FloatUnary(OpKind::kLog, *this); }
Tensor Tensor::log1p() const { return FloatUnary(OpKind::kLog1p, *this); }
Tensor Tensor::sqrt() const { return FloatUnary(OpKind::kSqrt, *this); }
Tensor Tensor::rsqrt() const { return FloatUnary(OpKind::kRsqrt, *this); }
Tensor Tensor::tanh() const { return FloatUnary(OpKind::kTanh, *this); }
Tensor Tensor::sigmoid() const { return FloatUnary(OpKind::kLogistic, *this); }
Tensor Tensor::sin() const { return FloatUnary(OpKind::kSin, *this); }
Tensor Tensor::cos() const { return FloatUnary(OpKind::kCos, *this); }
Tensor Tensor::erf() const { return FloatUnary(OpKind::kErf, *this); }
Tensor Tensor::floor() const { return Unary(OpKind::kFloor, *this); }
Tensor Tensor::ceil() const { return Unary(OpKind::kCeil, *this); }
Tensor Tensor::sign() const { return Unary(OpKind::kSign, *this); }
Tensor Tensor::square() const { return *this * *this; }
Tensor Tensor::reciprocal() const { return 1.0 / *this; }
Tensor Tensor::pow(double e) const {
  if (e == 2.0) return square();
  if (e == 1.0) return *this;
  if (e == 0.5) return sqrt();
  return BinaryScalar(OpKind::kPow, *this, e, false);
}
Tensor Tensor::pow(const Tensor& e) const { return BinaryOp(OpKind::kPow, *this, e); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const {
  Value* v = ValueOf(*this);
  if (lo) v = B().Max(v, FullOperand(sizes(), dtype(), *lo));
  if (hi) v = B().Min(v, FullOperand(sizes(), dtype(), *hi));
  return MakePending(v, {this});
}
Tensor Tensor::logical_not() const {
  if (dtype() != DType::kBool) return *this == 0.0;
  return MakePending(B().Unary(OpKind::kNot, ValueOf(*this)), false);
}
Tensor Tensor::isfinite() const {
  return MakePending(B().Unary(OpKind::kIsFinite, ValueOf(*this)), false);
}

// ---- Reductions --------------------------------------------------------------------------------
Tensor Tensor::sum(Dims dims, bool keepdim) const {
  return Reduce(Autocast(*this, "sum"), ir::ReduceKind::kSum, dims, keepdim, "sum");
}
Tensor Tensor::mean(Dims dims, bool keepdim) const {
  if (!IsFloat(dtype())) Fail("mean: needs a floating tensor, got {}", type_string());
  if (autocast_enabled()) {  // cast as mean's policy says, then no other op's casts inside
    const Tensor x = Autocast(*this, "mean");
    AutocastOff off;
    return x.mean(std::move(dims), keepdim);
  }
  Dims d = dims.empty() ? Dims() : NormDims(dims, dim(), "mean");
  int64_t count = 1;
  if (dims.empty()) count = numel();
  for (int64_t i : d) count *= size(i);
  return sum(dims, keepdim) / static_cast<double>(count);
}
Tensor Tensor::amax(Dims dims, bool keepdim) const {
  return Reduce(*this, ir::ReduceKind::kMax, dims, keepdim, "amax");
}
Tensor Tensor::amin(Dims dims, bool keepdim) const {
  return Reduce(*this, ir::ReduceKind::kMin, dims, keepdim, "amin");
}
Tensor Tensor::prod(Dims dims, bool keepdim) const {
  return Reduce(Autocast(*this, "prod"), ir::ReduceKind::kProd, dims, keepdim, "prod");
}
Tensor Tensor::var(Dims dims, bool keepdim, int64_t correction) const {
  if (autocast_enabled()) {
    const Tensor x = Autocast(*this, "var");
    AutocastOff off;
    return x.var(std::move(dims), keepdim, correction);
  }
  Tensor m = mean(dims, true);
  Tensor d = *this - m;
  Dims nd = dims.empty() ? Dims() : NormDims(dims, dim(), "var");
  int64_t count = 1;
  if (dims.empty()) count = numel();
  for (int64_t i : nd) count *= size(i);
  return (d * d).sum(dims, keepdim) / static_cast<double>(std::max<int64_t>(count - correction, 0));
}
Tensor Tensor::argmax(int64_t d, bool keepdim) const {
  const int64_t n = NormDim(d, dim(), "argmax");
  Value* r = B().Build1(OpKind::kArgMax, {ValueOf(*this)}, ir::ArgReduceAttrs{n, DType::kI64});
  if (keepdim) r = KeepDims(r, sizes(), {n});
  return MakePending(r, false);
}
Tensor Tensor::argmin(int64_t d, bool keepdim) const {
  const int64_t n = NormDim(d, dim(), "argmin");
  Value* r = B().Build1(OpKind::kArgMin, {ValueOf(*this)}, ir::ArgReduceAttrs{n, DType::kI64});
  if (keepdim) r = KeepDims(r, sizes(), {n});
  return MakePending(r, false);
}
Tensor Tensor::all() const { return Reduce(to(DType::kBool), ir::ReduceKind::kAnd, {}, false, "all"); }
Tensor Tensor::any() const { return Reduce(to(DType::kBool), ir::ReduceKind::kOr, {}, false, "any"); }

// ---- Linear algebra ------------------------------------------------------------------------------
Tensor Tensor::matmul(const Tensor& other) const { return axle::matmul(*this, other); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  return detail::MatMulNoCast(detail::Autocast(a, "matmul"), detail::Autocast(b, "matmul"));
}

Tensor detail::MatMulNoCast(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.dim() == 0 || b_in.dim() == 0)
    Fail("matmul: both operands need at least 1 dim, got {} and {}", a_in.type_string(),
         b_in.type_string());
  if (a_in.dim() == 1) return MatMulNoCast(a_in.unsqueeze(0), b_in).squeeze(-2);
  if (b_in.dim() == 1) return MatMulNoCast(a_in, b_in.unsqueeze(-1)).squeeze(-1);
  const DType t = Promote(a_in.dtype(), b_in.dtype());
  Tensor a = a_in.to(t), b = b_in.to(t);
  const int64_t k = a.size(-1);
  if (b.size(-2) != k)
    Fail("matmul: {} @ {}: the inner dims differ ({} vs {}); expected a [..., n, k] @ [..., k, m]",
         a_in.type_string(), b_in.type_string(), k, b.size(-2));
  ir::DotGeneralAttrs d;
  if (b.dim() == 2) {  // [..., n, k] @ [k, m]: no batch dims
    d.lhs_contracting = {a.dim() - 1};
    d.rhs_contracting = {0};
    return MakePending(B().DotGeneral(ValueOf(a), ValueOf(b), d), {&a_in, &b_in});
  }
  Dims ab(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  Dims batch = broadcast_shapes(ab, bb);
  Dims ashape = batch, bshape = batch;
  ashape.push_back(a.size(-2));
  ashape.push_back(k);
  bshape.push_back(k);
  bshape.push_back(b.size(-1));
  Value* av = BroadcastTo(ValueOf(a), ashape);
  Value* bv = BroadcastTo(ValueOf(b), bshape);
  const int64_t nb = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < nb; ++i) {
    d.lhs_batch.push_back(i);
    d.rhs_batch.push_back(i);
  }
  d.lhs_contracting = {nb + 1};
  d.rhs_contracting = {nb};
  return MakePending(B().DotGeneral(av, bv, d), {&a_in, &b_in});
}

// ---- Operators -------------------------------------------------------------------------------
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator+(const Tensor& a, const Tensor& b) { return BinaryOp(OpKind::kAdd, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return BinaryOp(OpKind::kSub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return BinaryOp(OpKind::kMul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) {
  if (!IsFloat(a.dtype()) && !IsFloat(b.dtype()))  // true division, as torch's `/`
    return BinaryOp(OpKind::kDiv, a.to(DType::kF32), b.to(DType::kF32));
  return BinaryOp(OpKind::kDiv, a, b);
}
Tensor operator+(const Tensor& a, double b) { return BinaryScalar(OpKind::kAdd, a, b, false); }
Tensor operator-(const Tensor& a, double b) { return BinaryScalar(OpKind::kSub, a, b, false); }
Tensor operator*(const Tensor& a, double b) { return BinaryScalar(OpKind::kMul, a, b, false); }
Tensor operator/(const Tensor& a, double b) {
  if (!IsFloat(a.dtype())) return a.to(DType::kF32) / b;
  return BinaryScalar(OpKind::kDiv, a, b, false);
}
Tensor operator+(double a, const Tensor& b) { return BinaryScalar(OpKind::kAdd, b, a, true); }
Tensor operator-(double a, const Tensor& b) { return BinaryScalar(OpKind::kSub, b, a, true); }
Tensor operator*(double a, const Tensor& b) { return BinaryScalar(OpKind::kMul, b, a, true); }
Tensor operator/(double a, const Tensor& b) {
  if (!IsFloat(b.dtype())) return a / b.to(DType::kF32);
  return BinaryScalar(OpKind::kDiv, b, a, true);
}
Tensor operator==(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kEq, a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kNe, a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kLt, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kLe, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kGt, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return CompareOp(ir::CompareDir::kGe, a, b); }
Tensor operator==(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kEq, a, b); }
Tensor operator!=(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kNe, a, b); }
Tensor operator<(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kLt, a, b); }
Tensor operator<=(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kLe, a, b); }
Tensor operator>(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kGt, a, b); }
Tensor operator>=(const Tensor& a, double b) { return CompareScalar(ir::CompareDir::kGe, a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) {
  return BinaryOp(OpKind::kAnd, a.to(DType::kBool), b.to(DType::kBool));
}
Tensor operator||(const Tensor& a, const Tensor& b) {
  return BinaryOp(OpKind::kOr, a.to(DType::kBool), b.to(DType::kBool));
}

Tensor maximum(const Tensor& a, const Tensor& b) { return BinaryOp(OpKind::kMax, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return BinaryOp(OpKind::kMin, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (cond.dtype() != DType::kBool) Fail("where: the condition must be bool, got {}", cond.type_string());
  Dims shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes()), b.sizes());
  const DType t = Promote(a.dtype(), b.dtype());
  Value* c = BroadcastTo(ValueOf(cond), shape);
  Value* x = BroadcastTo(Cast(ValueOf(a), t), shape);
  Value* y = BroadcastTo(Cast(ValueOf(b), t), shape);
  return MakePending(B().Select(c, x, y), {&a, &b});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, scalar_tensor(b, a.dtype()));
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t d) {
  if (tensors.empty()) Fail("cat: needs at least one tensor");
  const Tensor& first = tensors[0];
  const int64_t n = NormDim(d, first.dim(), "cat");
  DType t = first.dtype();
  for (const Tensor& x : tensors) t = Promote(t, x.dtype());
  std::vector<Value*> vs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& x = tensors[i];
    if (x.dim() != first.dim())
      Fail("cat: tensor {} is {} but tensor 0 is {} (ranks differ)", i, x.type_string(),
           first.type_string());
    for (int64_t j = 0; j < x.dim(); ++j)
      if (j != n && x.size(j) != first.size(j))
        Fail("cat: tensor {} is {} but tensor 0 is {}: dim {} differs (only dim {} may)", i,
             x.type_string(), first.type_string(), j, n);
    vs.push_back(Cast(ValueOf(x), t));
  }
  bool rg = false;
  for (const Tensor& x : tensors) rg = rg || x.requires_grad();
  if (vs.size() == 1) return MakePending(vs[0], rg);
  return MakePending(B().Build1(OpKind::kConcatenate, vs, ir::ConcatenateAttrs{n}), rg);
}

Tensor dynamic_update_slice(const Tensor& operand, const Tensor& update, const std::vector<Tensor>& start) {
  if (update.dim() != operand.dim() || static_cast<int64_t>(start.size()) != operand.dim())
    Fail("dynamic_update_slice: update {} and {} start offsets must match the operand {}'s rank",
         update.type_string(), start.size(), operand.type_string());
  for (int64_t d = 0; d < operand.dim(); ++d)
    if (update.size(d) > operand.size(d))
      Fail("dynamic_update_slice: update {} is larger than the operand {} in dim {}", update.type_string(),
           operand.type_string(), d);
  std::vector<Value*> vs = {ValueOf(operand), Cast(ValueOf(update), operand.dtype())};
  for (const Tensor& s : start) {
    if (s.dim() != 0 || !IsInteger(s.dtype()))
      Fail("dynamic_update_slice: start offsets must be 0-d integer tensors, got {}", s.type_string());
    vs.push_back(Cast(ValueOf(s), DType::kI64));
  }
  return MakePending(B().Build1(OpKind::kDynamicUpdateSlice, vs, ir::NoAttrs{}),
                     operand.requires_grad() || update.requires_grad());
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t d) {
  if (tensors.empty()) Fail("stack: needs at least one tensor");
  const int64_t n = NormDim(d, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (const Tensor& x : tensors) {
    if (x.sizes() != tensors[0].sizes())
      Fail("stack: all tensors must have the same shape, got {} and {}", tensors[0].type_string(),
           x.type_string());
    u.push_back(x.unsqueeze(n));
  }
  return cat(u, n);
}

// einsum: each operand's letters; pairwise contraction with dot_general.
namespace {
struct Labeled {
  Tensor t;
  std::string labels;
};

// Sums out the letters of `x` that no one else needs.
Labeled SumUnneeded(Labeled x, const std::string& needed) {
  Dims dims;
  std::string keep;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (needed.find(x.labels[i]) == std::string::npos) dims.push_back(static_cast<int64_t>(i));
    else keep += x.labels[i];
  }
  if (!dims.empty()) x = {x.t.sum(dims), keep};
  return x;
}

Labeled Contract(const Labeled& a, const Labeled& b, const std::string& needed_after) {
  ir::DotGeneralAttrs d;
  std::string batch, afree, bfree;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    const char c = a.labels[i];
    const size_t j = b.labels.find(c);
    if (j == std::string::npos) {
      afree += c;
    } else if (needed_after.find(c) != std::string::npos) {
      batch += c;
      d.lhs_batch.push_back(static_cast<int64_t>(i));
      d.rhs_batch.push_back(static_cast<int64_t>(j));
    } else {
      d.lhs_contracting.push_back(static_cast<int64_t>(i));
      d.rhs_contracting.push_back(static_cast<int64_t>(j));
    }
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) bfree += c;
  for (size_t k = 0; k < d.lhs_batch.size(); ++k)
    if (a.t.size(d.lhs_batch[k]) != b.t.size(d.rhs_batch[k]))
      Fail("einsum: letter '{}' has size {} in one operand and {} in another", batch[k],
           a.t.size(d.lhs_batch[k]), b.t.size(d.rhs_batch[k]));
  for (size_t k = 0; k < d.lhs_contracting.size(); ++k)
    if (a.t.size(d.lhs_contracting[k]) != b.t.size(d.rhs_contracting[k]))
      Fail("einsum: a contracted letter has size {} in one operand and {} in another",
           a.t.size(d.lhs_contracting[k]), b.t.size(d.rhs_contracting[k]));
  const DType t = Promote(a.t.dtype(), b.t.dtype());
  Tensor r = MakePending(B().DotGeneral(Cast(ValueOf(a.t), t), Cast(ValueOf(b.t), t), d),
                         {&a.t, &b.t});
  return {r, batch + afree + bfree};
}
}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands_in) {
  std::vector<Tensor> operands;
  for (const Tensor& t : operands_in) operands.push_back(detail::Autocast(t, "einsum"));
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  if (arrow == std::string::npos)
    Fail("einsum: '{}' needs an explicit output ('->'), e.g. \"ij,jk->ik\"", equation);
  const std::string out = eq.substr(arrow + 2);
  std::vector<std::string> ins;
  size_t at = 0;
  const std::string lhs = eq.substr(0, arrow);
  while (true) {
    const size_t comma = lhs.find(',', at);
    ins.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (ins.size() != operands.size())
    Fail("einsum: '{}' names {} operands but {} were given", equation, ins.size(), operands.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    for (char c : ins[i])
      if (!std::isalpha(static_cast<unsigned char>(c)))
        Fail("einsum: '{}': only letters are supported as subscripts (no '...')", equation);
    if (static_cast<int64_t>(ins[i].size()) != operands[i].dim())
      Fail("einsum: operand {} has subscripts '{}' but is {}", i, ins[i], operands[i].type_string());
    for (size_t j = 0; j < ins[i].size(); ++j)
      if (ins[i].find(ins[i][j]) != j)
        Fail("einsum: repeated subscript '{}' in operand {} (diagonals are not supported)", ins[i][j], i);
  }
  for (size_t j = 0; j < out.size(); ++j) {
    if (out.find(out[j]) != j) Fail("einsum: output subscript '{}' repeats", out[j]);
    if (lhs.find(out[j]) == std::string::npos)
      Fail("einsum: output subscript '{}' appears in no operand", out[j]);
  }
  std::vector<Labeled> xs;
  for (size_t i = 0; i < operands.size(); ++i) xs.push_back({operands[i], ins[i]});
  auto needed_from = [&](size_t first) {
    std::string s = out;
    for (size_t i = first; i < xs.size(); ++i) s += xs[i].labels;
    return s;
  };
  Labeled acc = SumUnneeded(xs[0], needed_from(1));
  for (size_t i = 1; i < xs.size(); ++i) {
    Labeled next = SumUnneeded(xs[i], needed_from(i + 1) + acc.labels);
    acc = SumUnneeded(acc, needed_from(i + 1) + next.labels);
    acc = Contract(acc, next, needed_from(i + 1));
  }
  acc = SumUnneeded(acc, out);
  Dims perm;
  for (char c : out) perm.push_back(static_cast<int64_t>(acc.labels.find(c)));
  return acc.t.permute(perm);
}

}  // namespace axle
