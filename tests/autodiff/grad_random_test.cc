// Randomized gradient checks: small random f64 graphs of differentiable elementwise, movement,
// indexing (gather, scatter_add, dynamic slices, sort, select), reduction and contraction ops,
// built with the Builder from a seed, each checked against central differences on the reference
// interpreter.
//
// The generator keeps values bounded and away from singular points: log/sqrt/rsqrt/div only see
// x^2 + 1, exp sees tanh(x). Non-differentiable points (ties of max between different functions,
// kinks of abs and clamp) have probability zero with continuous random inputs.
#include <fmt/format.h>

#include <numeric>
#include <random>

#include "gradcheck.h"

namespace axle::autodiff::test {
namespace {

using ir::ReduceKind;

class RandomGraph {
 public:
  RandomGraph(Builder& b, uint64_t seed) : b_(b), rng_(seed) {}

  // Builds `steps` random nodes on top of `params` and returns the last value.
  Value* Build(const Values& params, int steps) {
    pool_ = params;
    for (int i = 0; i < steps; ++i) pool_.push_back(Step());
    return pool_.back();
  }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  Value* Pick() {
    return pool_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(pool_.size()) - 1))];
  }
  Value* Full(Value* like, double v) {
    return b_.BroadcastInDim(b_.Scalar(DType::kF64, v), like->shape(), {});
  }
  Value* OnePlusSquare(Value* x) { return b_.Add(b_.Mul(x, x), Full(x, 1.0)); }
  std::vector<int64_t> AllDims(Value* x) {
    std::vector<int64_t> d(static_cast<size_t>(x->type().rank()));
    std::iota(d.begin(), d.end(), 0);
    return d;
  }

  // A value of x's shape: another pool value of that shape, or the broadcast sum of any value.
  Value* Partner(Value* x) {
    std::vector<Value*> same;
    for (Value* v : pool_)
      if (v->shape() == x->shape()) same.push_back(v);
    if (!same.empty() && Uniform(0, 3) > 0)
      return same[static_cast<size_t>(Uniform(0, static_cast<int64_t>(same.size()) - 1))];
    Value* v = Pick();
    Value* s = v->type().rank() == 0 ? v : b_.Reduce(v, ReduceKind::kSum, AllDims(v));
    return b_.BroadcastInDim(b_.Unary(OpKind::kTanh, s), x->shape(), {});
  }

  Value* Step() {
    Value* x = Pick();
    switch (Uniform(0, 7)) {
      case 0:
        return UnaryStep(x);
      case 7:
        return x->type().rank() > 0 ? IndexStep(x) : UnaryStep(x);
      case 1:
      case 2:
        return BinaryStep(x, Partner(x));
      case 3:
        return MovementStep(x);
      case 4:
        return ReduceStep(x);
      case 5:
        return x->type().rank() > 0 ? DotStep(x, Partner(x)) : UnaryStep(x);
      default:
        return ShapeStep(x);
    }
  }

  Value* UnaryStep(Value* x) {
    switch (Uniform(0, 11)) {
      case 0:
        return b_.Unary(OpKind::kNeg, x);
      case 1:
        return b_.Unary(OpKind::kTanh, x);
      case 2:
        return b_.Unary(OpKind::kSin, x);
      case 3:
        return b_.Unary(OpKind::kCos, x);
      case 4:
        return b_.Unary(OpKind::kLogistic, x);
      case 5:
        return b_.Unary(OpKind::kErf, x);
      case 6:
        return b_.Unary(OpKind::kExp, b_.Unary(OpKind::kTanh, x));
      case 7:
        return b_.Unary(OpKind::kSqrt, OnePlusSquare(x));
      case 8:
        return b_.Unary(OpKind::kLog, OnePlusSquare(x));
      case 9:
        return b_.Unary(OpKind::kRsqrt, OnePlusSquare(x));
      case 10:
        return b_.Unary(OpKind::kAbs, x);
      default:
        return b_.Build1(OpKind::kClamp,
                         {b_.Scalar(DType::kF64, -0.5), x, b_.Scalar(DType::kF64, 0.7)});
    }
  }

  Value* BinaryStep(Value* x, Value* y) {
    switch (Uniform(0, 6)) {
      case 0:
        return b_.Add(x, y);
      case 1:
        return b_.Sub(x, y);
      case 2:
        return b_.Mul(x, y);
      case 3:
        return b_.Div(x, OnePlusSquare(y));
      case 4:
        return b_.Max(x, y);
      case 5:
        return b_.Min(x, y);
      default:
        return b_.Binary(OpKind::kAtan2, x, OnePlusSquare(y));
    }
  }

  Value* MovementStep(Value* x) {
    const int64_t rank = x->type().rank();
    if (rank == 0) return b_.BroadcastInDim(x, Shape{Uniform(1, 3)}, {});
    const Shape& s = x->shape();
    switch (Uniform(0, 4)) {
      case 0: {
        std::vector<int64_t> perm = AllDims(x);
        std::shuffle(perm.begin(), perm.end(), rng_);
        return b_.Transpose(x, perm);
      }
      case 1: {
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d)
          if (Uniform(0, 1)) dims.push_back(d);
        return b_.Build1(OpKind::kReverse, {x}, ir::ReverseAttrs{dims});
      }
      case 2: {
        ir::SliceAttrs a;
        for (int64_t d = 0; d < rank; ++d) {
          a.start.push_back(Uniform(0, s.dim(d) - 1));
          a.limit.push_back(Uniform(a.start.back() + 1, s.dim(d)));
          a.strides.push_back(Uniform(1, 2));
        }
        return b_.Build1(OpKind::kSlice, {x}, a);
      }
      case 3: {
        ir::PadAttrs a;
        for (int64_t d = 0; d < rank; ++d) {
          a.interior.push_back(Uniform(0, 1));
          a.low.push_back(Uniform(-1, 1));
          a.high.push_back(Uniform(a.low.back() < 0 ? 1 : 0, 2));  // keeps every dim >= 1
        }
        Value* v = b_.Unary(OpKind::kTanh, b_.Reduce(x, ReduceKind::kSum, AllDims(x)));
        return b_.Build1(OpKind::kPad, {x, v}, a);
      }
      default: {
        const int64_t dim = Uniform(0, rank - 1);
        return b_.Build1(OpKind::kConcatenate, {x, Partner(x)}, ir::ConcatenateAttrs{dim});
      }
    }
  }

  Value* I32(std::vector<int64_t> dims, std::vector<int32_t> v) {
    return b_.Constant(Literal::FromVector<int32_t>(DType::kI32, Shape(std::move(dims)), v));
  }

  // Ops with index or predicate operands: gather, scatter_add, dynamic_slice,
  // dynamic_update_slice, sort, select, pow. Indices are random constants, sometimes out of range
  // (gather and dynamic_slice clamp, scatter_add drops).
  Value* IndexStep(Value* x) {
    const Shape& s = x->shape();
    const int64_t rank = s.rank();
    const int64_t axis = Uniform(0, rank - 1);
    switch (Uniform(0, 5)) {
      case 0:
      case 1: {
        const int64_t n = Uniform(1, 3);
        std::vector<int32_t> idx;
        for (int64_t i = 0; i < n; ++i)
          idx.push_back(static_cast<int32_t>(Uniform(-1, s.dim(axis))));
        const ir::GatherAttrs a{axis, 0};
        Value* indices = I32({n}, idx);
        Value* g = b_.Build1(OpKind::kGather, {x, indices}, a);
        if (Uniform(0, 1) == 0) return g;
        // Scatter a function of the gathered values back into x.
        return b_.Build1(OpKind::kScatterAdd, {x, indices, b_.Unary(OpKind::kSin, g)}, a);
      }
      case 2: {
        std::vector<Value*> ops = {x};
        std::vector<int64_t> sizes;
        for (int64_t d = 0; d < rank; ++d) {
          sizes.push_back(Uniform(1, s.dim(d)));
          ops.push_back(I32({}, {static_cast<int32_t>(Uniform(-1, s.dim(d)))}));
        }
        Value* slice = b_.Build1(OpKind::kDynamicSlice, ops, ir::DynamicSliceAttrs{sizes});
        if (Uniform(0, 1) == 0) return slice;
        ops[0] = Partner(x);
        ops.insert(ops.begin() + 1, b_.Unary(OpKind::kTanh, slice));
        return b_.Build1(OpKind::kDynamicUpdateSlice, ops);
      }
      case 3: {
        Value* y = Partner(x);
        std::vector<Value*> r =
            b_.Build(OpKind::kSort, {x, y}, ir::SortAttrs{axis, Uniform(0, 1) == 1});
        return Uniform(0, 1) == 0 ? r[0] : b_.Mul(r[0], r[1]);
      }
      case 4: {
        Value* y = Partner(x);
        return b_.Select(b_.Compare(ir::CompareDir::kLt, x, y), b_.Mul(x, y),
                         b_.Unary(OpKind::kCos, y));
      }
      default:  // (exp(tanh x)) ^ y: a positive base
        return b_.Binary(OpKind::kPow, b_.Unary(OpKind::kExp, b_.Unary(OpKind::kTanh, x)),
                         Partner(x));
    }
  }

  Value* ShapeStep(Value* x) {
    const Shape& s = x->shape();
    if (Uniform(0, 1) == 0 || s.rank() >= 3) return b_.Reshape(x, Shape{s.NumElements()});
    // Insert a dim of size 2 at a random position.
    const int64_t at = Uniform(0, s.rank());
    std::vector<int64_t> out, dims;
    for (int64_t d = 0; d < s.rank(); ++d) {
      if (d == at) out.push_back(2);
      dims.push_back(static_cast<int64_t>(out.size()));
      out.push_back(s.dim(d));
    }
    if (at == s.rank()) out.push_back(2);
    return b_.BroadcastInDim(x, Shape(out), dims);
  }

  Value* ReduceStep(Value* x) {
    const int64_t rank = x->type().rank();
    if (rank == 0) return b_.Mul(x, x);
    if (Uniform(0, 3) == 0)
      return b_.Build1(OpKind::kCumsum, {x},
                       ir::CumsumAttrs{Uniform(0, rank - 1), Uniform(0, 1) == 1});
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d)
      if (Uniform(0, 1)) dims.push_back(d);
    const ReduceKind kinds[] = {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin,
                                ReduceKind::kProd};
    return b_.Reduce(x, kinds[Uniform(0, 3)], dims);
  }

  // Batched inner products over the last dim: [..., n] x [..., n] -> [...].
  Value* DotStep(Value* x, Value* y) {
    const int64_t rank = x->type().rank();
    ir::DotGeneralAttrs d;
    for (int64_t i = 0; i + 1 < rank; ++i) {
      d.lhs_batch.push_back(i);
      d.rhs_batch.push_back(i);
    }
    d.lhs_contracting = {rank - 1};
    d.rhs_contracting = {rank - 1};
    return b_.DotGeneral(x, y, d);
  }

  Builder& b_;
  std::mt19937_64 rng_;
  Values pool_;
};

TEST(GradRandomTest, RandomGraphs) {
  int64_t checked = 0;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<TensorType> params;
    const int64_t num_params = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    for (int64_t i = 0; i < num_params; ++i) {
      std::vector<int64_t> dims(
          static_cast<size_t>(std::uniform_int_distribution<int64_t>(0, 3)(rng)));
      for (int64_t& d : dims) d = std::uniform_int_distribution<int64_t>(1, 4)(rng);
      params.push_back(F64(dims));
    }
    const int steps = static_cast<int>(std::uniform_int_distribution<int64_t>(3, 12)(rng));
    checked += CheckGradients(
        fmt::format("random graph seed {}", seed), params,
        [&](Builder& b, const Values& p) { return RandomGraph(b, seed).Build(p, steps); },
        {.tol = 1e-5, .seed = seed});
    if (HasFailure()) break;
  }
  EXPECT_GT(checked, 5000);
  RecordProperty("checked_elements", static_cast<int>(checked));
}

}  // namespace
}  // namespace axle::autodiff::test
