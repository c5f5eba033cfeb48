// Differential tests of the SPMD partitioner, one primitive at a time: for every op of the op
// table (ir/ops.def) that a global program may hold, small programs built around that op (dims
// 4..12, some of them not divisible by the shard counts) get random valid shardings on meshes of
// 1, 2, 4 and 8 devices, 1-D and 2-D; the partitioned program, run with ir::EvaluateReplicated on
// the shards (padding poisoned), must give what ir::Evaluate gives on the global program.
//
// Which ops are covered is measured, not declared: the programs are built and their nodes' ops
// collected. Every op of the table must be covered or listed in ExcludedOps() with the reason the
// partitioner rejects it, so a new op without a program here fails the test. Each covered op also
// gets random programs of its own from testing::RandomModule (RandomOpProgramTest): random ranks,
// dims (zero-sized included), dtypes, attributes and special values, compared bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "diff_harness.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "spmd/partitioner.h"
#include "testing/random_module.h"

namespace axle {
namespace {

using ir::Builder;
using ir::Literal;
using ir::Mesh;
using ir::Module;
using ir::OpKind;
using ir::TensorType;
using ir::Value;
using spmd_test::Annotate;
using spmd_test::CheckRandomShardings;
using spmd_test::Dot;
using spmd_test::F32;
using spmd_test::Meshes;
using spmd_test::Program;

TensorType T(DType t, Shape s) { return TensorType(t, std::move(s)); }

// Ops a global program cannot hold: the partitioner rejects them with an axle::Error naming them
// (ExcludedOpsAreRejected checks that error).
const std::map<OpKind, std::string>& ExcludedOps() {
  static const auto* ops = new std::map<OpKind, std::string>{
      {OpKind::kReplicaId, "the partitioner derives device indices itself; a global program has one replica"},
      {OpKind::kAllReduce, "collectives: the global program states communication only through shardings"},
      {OpKind::kAllGather, "collectives: the global program states communication only through shardings"},
      {OpKind::kReduceScatter, "collectives: the global program states communication only through shardings"},
      {OpKind::kAllToAll, "collectives: the global program states communication only through shardings"},
      {OpKind::kCollectivePermute, "collectives: the global program states communication only through shardings"},
      {OpKind::kFusion, "compiler output: the pipeline fuses the partitioned module"},
  };
  return *ops;
}

// Exactness: `exact` programs must match bitwise. A program is inexact only where the partitioned
// program legitimately sums in another order than the global one: a float sum over a split dim
// (reduce sum, dot_general's contracting dims) is summed per shard, then across shards by the
// all_reduce / reduce_scatter; random annotations may also leave a float value a pending partial
// sum that a linear op (add, mul, dot, ...) carries. Everything else (elementwise ops, data
// movement, max/min/prod of ints, cumsum and sort along a whole dim) computes each element from
// the same inputs in the same order.
std::vector<Program> PrimitivePrograms() {
  std::vector<Program> ps;
  auto add = [&](std::string name, bool exact, std::function<void(Builder&)> build) {
    ps.push_back({std::move(name), exact, std::move(build)});
  };

  // Sources.
  add("parameter", true, [](Builder& b) {
    b.Return({b.Parameter(0, F32({7, 6})), b.Parameter(1, T(DType::kI32, {5, 8})),
              b.Parameter(2, T(DType::kBool, {9})), b.Parameter(3, F32({}))});
  });
  add("constant", true, [](Builder& b) {
    std::vector<float> cv(42);
    for (int k = 0; k < 42; ++k) cv[k] = static_cast<float>(k) * 0.25f - 3;
    Value* c = b.Constant(Literal::FromVector<float>(DType::kF32, Shape{7, 6}, cv));
    Value* s = b.Constant(Literal::Splat(F32({7, 6}), -0.0));
    Value* i = b.Constant(Literal::Splat(T(DType::kI32, {5, 9}), 3));
    b.Return({b.Add(b.Parameter(0, F32({7, 6})), c), s, i, b.Scalar(DType::kF32, 2)});
  });
  add("iota", true, [](Builder& b) {
    b.Return({b.Iota(F32({7, 6}), 0), b.Iota(T(DType::kI32, {5, 8}), 1), b.Iota(T(DType::kI8, {9, 4}), 0),
              b.Iota(T(DType::kU8, {4, 11}), 1), b.Iota(T(DType::kBF16, {12}), 0)});
  });

  // Elementwise unary, on floats (log, sqrt, ... of negative inputs give NaN: still bitwise equal).
  for (OpKind op : {OpKind::kNeg, OpKind::kAbs, OpKind::kExp, OpKind::kLog, OpKind::kLog1p, OpKind::kTanh,
                    OpKind::kLogistic, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kSin, OpKind::kCos, OpKind::kErf,
                    OpKind::kFloor, OpKind::kCeil, OpKind::kSign, OpKind::kIsFinite}) {
    add(std::string(ir::OpName(op)), true, [op](Builder& b) {
      Value* x = b.Parameter(0, F32({7, 6}));
      b.Return({b.Unary(op, x), b.Unary(op, b.Parameter(1, T(DType::kBF16, {5})))});
    });
  }
  add("neg_abs_sign_int", true, [](Builder& b) {
    Value* x = b.Parameter(0, T(DType::kI32, {9, 4}));
    b.Return({b.Unary(OpKind::kNeg, x), b.Unary(OpKind::kAbs, x), b.Unary(OpKind::kSign, x)});
  });
  add("not", true, [](Builder& b) {
    b.Return({b.Unary(OpKind::kNot, b.Parameter(0, T(DType::kBool, {7, 6}))),
              b.Unary(OpKind::kNot, b.Parameter(1, T(DType::kI32, {5, 8})))});
  });

  // Elementwise binary.
  for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kRem, OpKind::kPow,
                    OpKind::kMax, OpKind::kMin, OpKind::kAtan2}) {
    add(std::string(ir::OpName(op)), true, [op](Builder& b) {
      Value* x = b.Parameter(0, F32({7, 6}));
      Value* y = b.Parameter(1, F32({7, 6}));
      Value* i = b.Parameter(2, T(DType::kF64, {5, 8}));
      b.Return({b.Binary(op, x, y), b.Binary(op, y, b.Unary(OpKind::kNeg, x)), b.Binary(op, i, i)});
    });
  }
  add("binary_int", true, [](Builder& b) {  // integer division by zero is defined (docs/ir.md)
    Value* x = b.Parameter(0, T(DType::kI32, {9, 4}));
    Value* y = b.Parameter(1, T(DType::kI32, {9, 4}));
    b.Return({b.Add(x, y), b.Sub(x, y), b.Mul(x, y), b.Div(x, y), b.Binary(OpKind::kRem, x, y),
              b.Binary(OpKind::kPow, x, y), b.Max(x, y), b.Min(x, y)});
  });
  for (OpKind op : {OpKind::kAnd, OpKind::kOr, OpKind::kXor}) {
    add(std::string(ir::OpName(op)), true, [op](Builder& b) {
      Value* p = b.Parameter(0, T(DType::kBool, {7, 6}));
      Value* q = b.Parameter(1, T(DType::kBool, {7, 6}));
      Value* x = b.Parameter(2, T(DType::kU32, {5, 8}));
      Value* y = b.Parameter(3, T(DType::kU32, {5, 8}));
      b.Return({b.Binary(op, p, q), b.Binary(op, x, y)});
    });
  }
  add("compare", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* y = b.Parameter(1, F32({7, 6}));
    Value* i = b.Parameter(2, T(DType::kI32, {5, 8}));
    Value* j = b.Parameter(3, T(DType::kI32, {5, 8}));
    std::vector<Value*> out;
    for (ir::CompareDir d : {ir::CompareDir::kEq, ir::CompareDir::kNe, ir::CompareDir::kLt, ir::CompareDir::kLe,
                             ir::CompareDir::kGt, ir::CompareDir::kGe}) {
      out.push_back(b.Compare(d, x, y));
      out.push_back(b.Compare(d, i, j));
    }
    b.Return(out);
  });

  // Elementwise ternary (select's predicate and clamp's bounds may be scalars).
  add("select", true, [](Builder& b) {
    Value* p = b.Parameter(0, T(DType::kBool, {7, 6}));
    Value* x = b.Parameter(1, F32({7, 6}));
    Value* y = b.Parameter(2, F32({7, 6}));
    Value* s = b.Parameter(3, T(DType::kBool, {}));
    b.Return({b.Select(p, x, y), b.Select(s, x, y)});
  });
  add("clamp", true, [](Builder& b) {
    Value* lo = b.Parameter(0, F32({7, 6}));
    Value* x = b.Parameter(1, F32({7, 6}));
    Value* hi = b.Parameter(2, F32({7, 6}));
    Value* i = b.Parameter(3, T(DType::kI32, {9, 4}));
    b.Return({b.Build1(OpKind::kClamp, {lo, x, hi}),
              b.Build1(OpKind::kClamp, {b.Scalar(DType::kF32, -0.5), x, b.Scalar(DType::kF32, 0.75)}),
              b.Build1(OpKind::kClamp, {b.Scalar(DType::kI32, 2), i, b.Scalar(DType::kI32, 4)})});
  });

  // Element type changes.
  add("convert", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* i = b.Parameter(1, T(DType::kI32, {5, 8}));
    Value* p = b.Parameter(2, T(DType::kBool, {9, 4}));
    b.Return({b.Convert(x, DType::kI32), b.Convert(x, DType::kF64), b.Convert(x, DType::kBF16),
              b.Convert(x, DType::kBool), b.Convert(i, DType::kF32), b.Convert(i, DType::kU8), b.Convert(p, DType::kF32)});
  });
  add("bitcast_convert", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* i = b.Parameter(1, T(DType::kI32, {5, 8}));
    b.Return({b.Build1(OpKind::kBitcastConvert, {x}, ir::NoAttrs{}, {T(DType::kU32, {7, 6})}),
              b.Build1(OpKind::kBitcastConvert, {i}, ir::NoAttrs{}, {F32({5, 8})})});
  });

  // Data movement.
  add("broadcast_in_dim", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7}));
    Value* y = b.Parameter(1, F32({1, 6}));
    Value* z = b.Parameter(2, F32({5, 4}));
    b.Return({b.BroadcastInDim(x, Shape{7, 6}, {0}), b.BroadcastInDim(y, Shape{7, 6}, {0, 1}),
              b.BroadcastInDim(z, Shape{5, 3, 4}, {0, 2}), b.BroadcastInDim(b.Scalar(DType::kF32, 3), Shape{5, 9}, {}),
              b.BroadcastInDim(y, Shape{7, 5, 6}, {0, 2}), b.BroadcastInDim(x, Shape{7}, {0})});
  });
  add("reshape", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({8, 6}));
    Value* y = b.Parameter(1, F32({7, 6}));
    Value* z = b.Parameter(2, F32({1, 4, 1, 3}));
    Value* w = b.Parameter(3, F32({4, 2, 6}));
    b.Return({b.Reshape(x, Shape{48}), b.Reshape(x, Shape{4, 6, 2}), b.Reshape(x, Shape{2, 4, 3, 2}),
              b.Reshape(y, Shape{42}), b.Reshape(y, Shape{6, 7}), b.Reshape(z, Shape{12, 1}), b.Reshape(w, Shape{8, 6}),
              b.Reshape(w, Shape{4, 12})});
  });
  add("transpose", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6, 4}));
    Value* y = b.Parameter(1, T(DType::kI32, {5, 8}));
    b.Return({b.Transpose(x, {2, 0, 1}), b.Transpose(x, {1, 0, 2}), b.Transpose(y, {1, 0})});
  });
  add("slice", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* y = b.Parameter(1, F32({12, 5}));
    b.Return({b.Build1(OpKind::kSlice, {x}, ir::SliceAttrs{{1, 0}, {7, 6}, {2, 1}}),
              b.Build1(OpKind::kSlice, {x}, ir::SliceAttrs{{0, 2}, {7, 5}, {1, 1}}),
              b.Build1(OpKind::kSlice, {y}, ir::SliceAttrs{{0, 0}, {12, 5}, {1, 1}}),
              b.Build1(OpKind::kSlice, {y}, ir::SliceAttrs{{3, 1}, {11, 5}, {3, 2}})});
  });
  add("dynamic_slice", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* s = b.Parameter(1, T(DType::kI32, {}));  // 0..6: some starts are clamped
    Value* zero = b.Scalar(DType::kI32, 0);
    b.Return({b.Build1(OpKind::kDynamicSlice, {x, b.Scalar(DType::kI32, 2), b.Scalar(DType::kI64, 1)},
                       ir::DynamicSliceAttrs{{3, 4}}),
              b.Build1(OpKind::kDynamicSlice, {x, s, zero}, ir::DynamicSliceAttrs{{3, 6}}),
              b.Build1(OpKind::kDynamicSlice, {x, zero, s}, ir::DynamicSliceAttrs{{7, 4}}),
              b.Build1(OpKind::kDynamicSlice, {x, s, s}, ir::DynamicSliceAttrs{{7, 6}})});
  });
  add("dynamic_update_slice", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* u = b.Parameter(1, F32({3, 6}));
    Value* v = b.Parameter(2, F32({7, 2}));
    Value* s = b.Parameter(3, T(DType::kI32, {}));
    Value* zero = b.Scalar(DType::kI32, 0);
    b.Return({b.Build1(OpKind::kDynamicUpdateSlice, {x, u, s, zero}),
              b.Build1(OpKind::kDynamicUpdateSlice, {x, v, zero, s}),
              b.Build1(OpKind::kDynamicUpdateSlice, {x, b.Parameter(4, F32({2, 3})), s, b.Scalar(DType::kI32, 1)})});
  });
  add("pad", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* nine = b.Scalar(DType::kF32, 9);
    b.Return({b.Build1(OpKind::kPad, {x, nine}, ir::PadAttrs{{0, 1}, {0, -2}, {0, 1}}),
              b.Build1(OpKind::kPad, {x, nine}, ir::PadAttrs{{2, 0}, {1, 0}, {0, 0}}),
              b.Build1(OpKind::kPad, {x, b.Parameter(1, F32({}))}, ir::PadAttrs{{-1, 0}, {0, 3}, {2, 0}})});
  });
  add("concatenate", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* y = b.Parameter(1, F32({3, 6}));
    Value* z = b.Parameter(2, F32({7, 2}));
    b.Return({b.Build1(OpKind::kConcatenate, {x, y}, ir::ConcatenateAttrs{0}),
              b.Build1(OpKind::kConcatenate, {x, z, x}, ir::ConcatenateAttrs{1}),
              b.Build1(OpKind::kConcatenate, {y}, ir::ConcatenateAttrs{0})});
  });
  add("reverse", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6, 4}));
    b.Return({b.Build1(OpKind::kReverse, {x}, ir::ReverseAttrs{{1}}),
              b.Build1(OpKind::kReverse, {x}, ir::ReverseAttrs{{0, 2}}),
              b.Build1(OpKind::kReverse, {x}, ir::ReverseAttrs{{}})});
  });
  add("gather", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* idx = b.Parameter(1, T(DType::kI32, {4}));  // 0..6: some out of range for axis 1
    Value* idx2 = b.Parameter(2, T(DType::kI64, {5, 2}));
    Value* emb = b.Parameter(3, F32({5, 3, 4}));
    Value* ids = b.Parameter(4, T(DType::kI32, {5, 2, 3}));
    b.Return({b.Build1(OpKind::kGather, {x, idx}, ir::GatherAttrs{0, 0}),
              b.Build1(OpKind::kGather, {x, idx2}, ir::GatherAttrs{1, 0}),
              b.Build1(OpKind::kGather, {emb, ids}, ir::GatherAttrs{1, 1})});
  });
  add("scatter_add", true, [](Builder& b) {  // duplicate indices accumulate in the global order
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* idx = b.Parameter(1, T(DType::kI32, {4}));
    Value* upd = b.Parameter(2, F32({4, 6}));
    Value* emb = b.Parameter(3, F32({5, 3, 4}));
    Value* ids = b.Parameter(4, T(DType::kI32, {5, 2, 3}));
    Value* upd2 = b.Parameter(5, F32({5, 2, 3, 4}));
    Value* xi = b.Parameter(6, T(DType::kI32, {9, 4}));
    Value* idx3 = b.Parameter(7, T(DType::kI32, {4}));
    Value* upd3 = b.Parameter(8, T(DType::kI32, {9, 4}));
    b.Return({b.Build1(OpKind::kScatterAdd, {x, idx, upd}, ir::GatherAttrs{0, 0}),
              b.Build1(OpKind::kScatterAdd, {emb, ids, upd2}, ir::GatherAttrs{1, 1}),
              b.Build1(OpKind::kScatterAdd, {xi, idx3, upd3}, ir::GatherAttrs{1, 0})});
  });

  // Reductions and scans.
  add("reduce", false, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6, 5}));
    b.Return({b.Reduce(x, ir::ReduceKind::kSum, {0}), b.Reduce(x, ir::ReduceKind::kSum, {0, 2}),
              b.Reduce(x, ir::ReduceKind::kMax, {1}), b.Reduce(x, ir::ReduceKind::kMin, {0, 1, 2}),
              b.Reduce(x, ir::ReduceKind::kProd, {2})});
  });
  add("reduce_exact", true, [](Builder& b) {  // integers wrap, max/min/and/or are order-free
    Value* x = b.Parameter(0, T(DType::kI32, {7, 3}));
    Value* p = b.Parameter(1, T(DType::kBool, {5, 9}));
    Value* f = b.Parameter(2, F32({9, 4}));
    Value* u = b.Parameter(3, T(DType::kU8, {5, 3}));  // and/or of integers are bitwise
    b.Return({b.Reduce(x, ir::ReduceKind::kProd, {0}), b.Reduce(x, ir::ReduceKind::kSum, {0, 1}),
              b.Reduce(x, ir::ReduceKind::kAnd, {0}), b.Reduce(u, ir::ReduceKind::kAnd, {0}),
              b.Reduce(u, ir::ReduceKind::kOr, {0, 1}),
              b.Reduce(x, ir::ReduceKind::kMax, {1}), b.Reduce(x, ir::ReduceKind::kMin, {0}),
              b.Reduce(p, ir::ReduceKind::kAnd, {0}), b.Reduce(p, ir::ReduceKind::kOr, {1}),
              b.Reduce(f, ir::ReduceKind::kMax, {0}), b.Reduce(f, ir::ReduceKind::kMin, {0, 1})});
  });
  for (OpKind op : {OpKind::kArgMax, OpKind::kArgMin}) {
    add(std::string(ir::OpName(op)), true, [op](Builder& b) {
      Value* x = b.Parameter(0, F32({7, 6}));
      Value* i = b.Parameter(1, T(DType::kI32, {5, 9}));  // small ints: ties pick the first index
      b.Return({b.Build1(op, {x}, ir::ArgReduceAttrs{0, DType::kI32}), b.Build1(op, {x}, ir::ArgReduceAttrs{1, DType::kI64}),
                b.Build1(op, {i}, ir::ArgReduceAttrs{1, DType::kI32})});
    });
  }
  add("cumsum", true, [](Builder& b) {  // along a whole dim, in the global order
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* i = b.Parameter(1, T(DType::kI32, {5, 9}));
    b.Return({b.Build1(OpKind::kCumsum, {x}, ir::CumsumAttrs{0, false}),
              b.Build1(OpKind::kCumsum, {x}, ir::CumsumAttrs{1, true}),
              b.Build1(OpKind::kCumsum, {i}, ir::CumsumAttrs{1, false})});
  });
  add("sort", true, [](Builder& b) {  // stable: int keys with ties check the order of the values
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* k = b.Parameter(1, T(DType::kI32, {5, 9}));
    Value* v = b.Parameter(2, F32({5, 9}));
    std::vector<Value*> s0 = b.Build(OpKind::kSort, {x}, ir::SortAttrs{0, false});
    std::vector<Value*> s1 = b.Build(OpKind::kSort, {x, b.Unary(OpKind::kNeg, x)}, ir::SortAttrs{1, true});
    std::vector<Value*> s2 = b.Build(OpKind::kSort, {k, v}, ir::SortAttrs{1, false});
    b.Return({s0[0], s1[0], s1[1], s2[0], s2[1]});
  });

  // Contractions.
  add("dot_general", false, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 5}));
    Value* w = b.Parameter(1, F32({5, 6}));
    b.Return({b.DotGeneral(x, w, Dot({}, {}, {1}, {0}))});
  });
  add("dot_general_batch", false, [](Builder& b) {
    Value* x = b.Parameter(0, F32({4, 3, 7}));
    Value* y = b.Parameter(1, F32({4, 7, 2}));
    Value* z = b.Parameter(2, F32({3, 4, 6}));
    b.Return({b.DotGeneral(x, y, Dot({0}, {0}, {2}, {1})), b.DotGeneral(x, z, Dot({}, {}, {0, 1}, {1, 0})),
              b.DotGeneral(y, z, Dot({0}, {1}, {}, {}))});
  });
  add("dot_general_outer", true, [](Builder& b) {  // no contracting dim: each element is one product
    Value* x = b.Parameter(0, F32({7}));
    Value* y = b.Parameter(1, F32({6}));
    Value* i = b.Parameter(2, T(DType::kI32, {5, 4}));
    Value* j = b.Parameter(3, T(DType::kI32, {4, 9}));
    b.Return({b.DotGeneral(x, y, Dot({}, {}, {}, {})), b.DotGeneral(i, j, Dot({}, {}, {1}, {0}))});
  });

  // Random numbers: the bits of a position depend on the whole shape and the key/counter.
  add("rng_bit_generator", true, [](Builder& b) {
    Value* key = b.Parameter(0, T(DType::kU32, {2}));
    Value* ctr = b.Parameter(1, T(DType::kU32, {4}));
    b.Return({b.Build1(OpKind::kRngBitGenerator, {key, ctr}, ir::NoAttrs{}, {T(DType::kU32, {7, 6})}),
              b.Build1(OpKind::kRngBitGenerator, {key, ctr}, ir::NoAttrs{}, {T(DType::kU32, {5})})});
  });

  // Escapes.
  add("custom_call", true, [](Builder& b) {  // an opaque kernel: runs on whole operands
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* i = b.Parameter(1, T(DType::kI32, {5}));
    std::vector<Value*> r = b.Build(OpKind::kCustomCall, {b.Unary(OpKind::kNeg, x), i},
                                    ir::CustomCallAttrs{"axle.test.identity", ""}, {x->type(), i->type()});
    b.Return({b.Unary(OpKind::kAbs, r[0]), r[1]});
  });
  add("optimization_barrier", true, [](Builder& b) {
    Value* x = b.Parameter(0, F32({7, 6}));
    Value* i = b.Parameter(1, T(DType::kI32, {5, 8}));
    std::vector<Value*> r = b.Build(OpKind::kOptimizationBarrier, {b.Unary(OpKind::kNeg, x), i});
    b.Return({b.Unary(OpKind::kExp, r[0]), r[1]});
  });
  return ps;
}

// The ops each program holds, measured by building it.
std::set<OpKind> OpsOf(const Program& p) {
  Module m(p.name);
  m.set_mesh(Mesh({"x"}, {2}));
  Builder b(m.AddFunction("main"));
  p.build(b);
  std::set<OpKind> ops;
  for (const auto& n : m.entry()->nodes()) ops.insert(n->op());
  return ops;
}

TEST(PrimitiveCoverage, EveryOpIsCoveredOrExcluded) {
  std::set<OpKind> covered;
  for (const Program& p : PrimitivePrograms())
    for (OpKind op : OpsOf(p)) covered.insert(op);
  for (const ir::OpInfo& info : ir::AllOps()) {
    const bool excluded = ExcludedOps().count(info.kind) != 0;
    EXPECT_TRUE(covered.count(info.kind) != 0 || excluded)
        << "op " << info.name << " has no differential program in primitive_diff_test.cc: add one to "
        << "PrimitivePrograms(), or list it in ExcludedOps() with the reason the partitioner rejects it";
    EXPECT_FALSE(covered.count(info.kind) != 0 && excluded) << "op " << info.name << " is both covered and excluded";
  }
  // Program names are unique (they name the parameterized tests).
  std::set<std::string> names;
  for (const Program& p : PrimitivePrograms()) EXPECT_TRUE(names.insert(p.name).second) << p.name;
}

// Every excluded op, in an otherwise valid global program, makes Partition throw an axle::Error
// that names it.
TEST(PrimitiveCoverage, ExcludedOpsAreRejected) {
  for (const auto& [op, reason] : ExcludedOps()) {
    Module m("excluded");
    m.set_mesh(Mesh({"x"}, {2}));
    Builder b(m.AddFunction("main"), ir::ShapeContext{1});
    Value* x = b.Parameter(0, F32({4, 6}));
    Value* r = nullptr;
    const ir::ReplicaGroups all{{0}};
    switch (op) {
      case OpKind::kReplicaId: r = b.Build1(op, {}); break;
      case OpKind::kAllReduce: r = b.Build1(op, {x}, ir::AllReduceAttrs{ir::ReduceKind::kSum, all}); break;
      case OpKind::kAllGather: r = b.Build1(op, {x}, ir::AllGatherAttrs{0, all}); break;
      case OpKind::kReduceScatter: r = b.Build1(op, {x}, ir::ReduceScatterAttrs{ir::ReduceKind::kSum, 0, all}); break;
      case OpKind::kAllToAll: r = b.Build1(op, {x}, ir::AllToAllAttrs{0, 1, all}); break;
      case OpKind::kCollectivePermute: r = b.Build1(op, {x}, ir::CollectivePermuteAttrs{{}}); break;
      case OpKind::kFusion: {
        Builder cb(m.AddFunction("neg"));
        cb.Return({cb.Unary(OpKind::kNeg, cb.Parameter(0, F32({4, 6})))});
        r = b.Build1(op, {x}, ir::FusionAttrs{"loop", "neg"}, {F32({4, 6})});
        break;
      }
      default: FAIL() << "no rejection check for excluded op " << ir::OpName(op) << ": add one here";
    }
    b.Return({r});
    try {
      spmd::Partition(m);
      ADD_FAILURE() << "Partition accepted a global program with " << ir::OpName(op);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(ir::OpName(op))), std::string::npos) << e.what();
    }
  }
}

// A whole value made a pending partial sum holds the value on one device and -0 on the others
// (not +0): the sum then gives back every value bitwise, -0 included.
TEST(PartialSums, WholeToPartialKeepsNegativeZero) {
  Module m("zeros");
  m.set_mesh(Mesh({"x"}, {4}));
  Builder b(m.AddFunction("main"));
  Value* c = b.Unary(OpKind::kCeil, b.Parameter(0, F32({6})));
  c->set_sharding(ir::Sharding{{{}}, {"x"}});
  b.Return({c});
  Literal x = Literal::FromVector<float>(DType::kF32, Shape{6}, {-0.5f, 0.5f, -0.0f, 0.0f, -1.5f, 2.0f});
  Literal want = ir::Evaluate(*m.entry(), {x})[0];
  ASSERT_EQ(want.GetDouble(0), 0);
  ASSERT_TRUE(std::signbit(want.GetDouble(0)));
  std::unique_ptr<Module> part = spmd::Partition(m);
  std::vector<std::vector<Literal>> args(4, std::vector<Literal>{x});
  std::vector<std::vector<Literal>> got = ir::EvaluateReplicated(*part->entry(), args);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(got[d][0], want) << "device " << d << ": " << got[d][0].ToString();
}

class PrimitiveDiffTest : public ::testing::TestWithParam<Program> {
 protected:
  static void SetUpTestSuite() { testing::RegisterTestCustomCalls(); }
};

// Random shardings of the parameters and (half the time) of the results; propagation fills the
// rest, as a user of the partitioner would run it.
TEST_P(PrimitiveDiffTest, PropagatedFromRandomParameterAndResultShardings) {
  std::mt19937 rng(4242);
  for (const Mesh& mesh : Meshes()) CheckRandomShardings(GetParam(), mesh, 3, rng, Annotate::kParametersAndResults);
}

// Random shardings on every value (partial sums included): each op's rule meets operand and
// result layouts propagation would not choose.
TEST_P(PrimitiveDiffTest, RandomShardingsOnEveryValue) {
  std::mt19937 rng(777);
  for (const Mesh& mesh : Meshes()) CheckRandomShardings(GetParam(), mesh, 3, rng, Annotate::kEveryValue);
}

// Random programs of one op each (testing::RandomModule restricted to that op, plus the
// parameters, constants and iotas that make its operands): random ranks, dims, dtypes (bf16, f16,
// i8, u32, ...) and attributes, arguments and constants with NaN, inf, -0, subnormals and extreme
// integers. Trials whose partitioned program sums floats across devices are not compared (see
// CheckRandomShardings: sums do not distribute over those values; the hand-written programs
// above cover them); every other trial must match bitwise.
class RandomOpProgramTest : public ::testing::TestWithParam<OpKind> {
 protected:
  static void SetUpTestSuite() { testing::RegisterTestCustomCalls(); }
};

TEST_P(RandomOpProgramTest, MatchesGlobalProgramBitwise) {
  const OpKind op = GetParam();
  const std::vector<Mesh> meshes = Meshes();
  std::mt19937 rng(static_cast<uint32_t>(op) + 1);
  int compared = 0;
  for (size_t mi = 0; mi < meshes.size(); ++mi)
    for (int trial = 0; trial < 12; ++trial) {
      testing::RandomModuleOptions o;
      o.ops = {op};
      o.num_nodes = 3;
      o.max_dim = 9;
      o.allow_zero_sized = true;
      o.max_functions = 1;
      o.sharding_percent = 0;
      o.name_percent = 0;
      const uint64_t seed = static_cast<uint64_t>(op) * 1000 + mi * 10 + static_cast<uint64_t>(trial);
      std::unique_ptr<Module> m;
      try {
        m = testing::RandomModule(seed, o);
      } catch (const Error&) {
        continue;  // the generator found no valid node of `op` for this seed (its limitation, not ours)
      }
      m->set_mesh(meshes[mi]);
      spmd_test::AnnotateAtRandom(*m, trial % 2 == 0 ? Annotate::kParametersAndResults : Annotate::kEveryValue, rng);
      std::unique_ptr<Module> part;
      try {
        part = spmd::Partition(*m);
      } catch (const Error& e) {
        FAIL() << ir::OpName(op) << " seed " << seed << " on " << meshes[mi].ToString() << ": " << e.what() << "\n"
               << ir::PrintModule(*m);
      }
      if (spmd_test::HasFloatSums(*part)) continue;
      spmd_test::CheckPartitioned(*m, *part, testing::RandomArguments(*m->entry(), seed), /*exact=*/true,
                                  /*signed_zeros_free=*/false, /*pipeline=*/trial >= 2);
      if (HasFatalFailure()) return;
      ++compared;
    }
  EXPECT_GT(compared, 0) << "every random program of " << ir::OpName(op) << " summed floats across devices";
}

std::vector<OpKind> CoveredOps() {
  std::vector<OpKind> ops;
  for (const ir::OpInfo& info : ir::AllOps())
    if (ExcludedOps().count(info.kind) == 0) ops.push_back(info.kind);
  return ops;
}

INSTANTIATE_TEST_SUITE_P(Ops, RandomOpProgramTest, ::testing::ValuesIn(CoveredOps()),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(ir::OpName(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Ops, PrimitiveDiffTest, ::testing::ValuesIn(PrimitivePrograms()),
                         [](const ::testing::TestParamInfo<Program>& info) { return info.param.name; });

}  // namespace
}  // namespace axle
