// Op samples of reduce, argmax, argmin, cumsum, sort and dot_general. Small exact integers run in
// every numeric dtype; then the float accumulation (in double, rounded once), NaN, signed-zero,
// wrap and empty cases.
#include <cmath>
#include <limits>

#include "testing/op_samples.h"

namespace axle::ir::samples {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kU32Max = std::numeric_limits<uint32_t>::max();

OpSample Red(std::string what, ReduceKind kind, std::vector<int64_t> dims, Literal x, Literal expected) {
  std::string name = fmt::format("reduce.{}.{}.{}", EnumName(kind), what, Name(x.dtype()));
  return Sample(std::move(name), OpKind::kReduce, ReduceAttrs{kind, std::move(dims)}, {std::move(x)},
                {std::move(expected)});
}

void AddReduceGeneric(std::vector<OpSample>& out) {
  using K = ReduceKind;
  for (DType t : kNumericDTypes) {
    const Literal x = Lit(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    out.push_back(Red("rows", K::kSum, {1}, x, Lit(t, {2}, {6, 15})));
    out.push_back(Red("cols", K::kSum, {0}, x, Lit(t, {3}, {5, 7, 9})));
    out.push_back(Red("all", K::kSum, {0, 1}, x, Lit(t, {}, {21})));
    out.push_back(Red("none", K::kSum, {}, x, x));
    out.push_back(Red("rows", K::kProd, {1}, x, Lit(t, {2}, {6, 120})));
    out.push_back(Red("rows", K::kMax, {1}, Lit(t, {2, 3}, {1, 5, 3, 4, 2, 6}), Lit(t, {2}, {5, 6})));
    out.push_back(Red("cols", K::kMin, {0}, Lit(t, {2, 3}, {1, 5, 3, 4, 2, 6}), Lit(t, {3}, {1, 2, 3})));
    // Empty reductions give the identity.
    const Literal e = Lit(t, {0, 3}, {});
    out.push_back(Red("empty", K::kSum, {0}, e, Lit(t, {3}, {0, 0, 0})));
    out.push_back(Red("empty", K::kProd, {0}, e, Lit(t, {3}, {1, 1, 1})));
    out.push_back(Red("empty_result", K::kSum, {1}, e, Lit(t, {0}, {})));
  }
  for (DType t : kFloatDTypes) {
    out.push_back(Red("empty", K::kMax, {0}, Lit(t, {0}, {}), Lit(t, {}, {-kInf})));
    out.push_back(Red("empty", K::kMin, {0}, Lit(t, {0}, {}), Lit(t, {}, {kInf})));
  }
  const std::vector<std::pair<DType, std::pair<int64_t, int64_t>>> int_ranges = {
      {DType::kI8, {-128, 127}}, {DType::kI32, {kI32Min, kI32Max}}, {DType::kI64, {kI64Min, kI64Max}},
      {DType::kU8, {0, 255}}, {DType::kU32, {0, kU32Max}}};
  for (const auto& [t, range] : int_ranges) {
    out.push_back(Red("empty", K::kMax, {0}, Ints(t, {0}, {}), Ints(t, {}, {range.first})));
    out.push_back(Red("empty", K::kMin, {0}, Ints(t, {0}, {}), Ints(t, {}, {range.second})));
    out.push_back(Red("rows", K::kAnd, {1}, Ints(t, {2, 2}, {12, 10, 6, 7}), Ints(t, {2}, {8, 6})));
    out.push_back(Red("rows", K::kOr, {1}, Ints(t, {2, 2}, {12, 10, 6, 0}), Ints(t, {2}, {14, 6})));
    out.push_back(Red("empty", K::kAnd, {0}, Ints(t, {0}, {}), Ints(t, {}, {IsSigned(t) ? -1 : range.second})));
    out.push_back(Red("empty", K::kOr, {0}, Ints(t, {0}, {}), Ints(t, {}, {0})));
  }
  const Literal b = Bools({2, 2}, {true, false, true, true});
  out.push_back(Red("rows", K::kAnd, {1}, b, Bools({2}, {false, true})));
  out.push_back(Red("rows", K::kOr, {1}, Bools({2, 2}, {false, false, true, false}), Bools({2}, {false, true})));
  out.push_back(Red("all", K::kAnd, {0, 1}, b, Bools({}, {false})));
  out.push_back(Red("empty", K::kAnd, {0}, Bools({0}, {}), Bools({}, {true})));
  out.push_back(Red("empty", K::kOr, {0}, Bools({0}, {}), Bools({}, {false})));
}

void AddReduceEdges(std::vector<OpSample>& out) {
  using K = ReduceKind;
  using D = DType;
  // Float sums accumulate in double and round once.
  out.push_back(Red("double_acc", K::kSum, {0}, Lit(D::kF32, {3}, {1e8, 1, -1e8}), Lit(D::kF32, {}, {1})));
  out.push_back(Red("double_acc", K::kSum, {0}, Lit(D::kBF16, {3}, {256, 1, 1}), Lit(D::kBF16, {}, {258})));
  out.push_back(Red("double_acc", K::kSum, {0}, Lit(D::kF16, {3}, {65504, 65504, -65504}), Lit(D::kF16, {}, {65504})));
  out.push_back(Red("double_acc", K::kProd, {0}, Lit(D::kF32, {3}, {std::ldexp(1.0, 100), std::ldexp(1.0, 100), std::ldexp(1.0, -100)}),
                    Lit(D::kF32, {}, {std::ldexp(1.0, 100)})));
  // 2^-149 * 0.5 * 2 underflows to 0 in f32 steps but not in double.
  out.push_back(Red("double_acc_underflow", K::kProd, {0}, Lit(D::kF32, {3}, {std::ldexp(1.0, -149), 0.5, 2}),
                    Lit(D::kF32, {}, {std::ldexp(1.0, -149)})));
  for (DType t : kFloatDTypes) {
    out.push_back(Red("nan", K::kSum, {0}, Lit(t, {3}, {1, kNaN, 2}), Lit(t, {}, {kNaN})));
    out.push_back(Red("inf", K::kSum, {0}, Lit(t, {2}, {kInf, -kInf}), Lit(t, {}, {kNaN})));
    out.push_back(Red("nan", K::kMax, {0}, Lit(t, {3}, {1, kNaN, 3}), Lit(t, {}, {kNaN})));
    out.push_back(Red("nan", K::kMin, {0}, Lit(t, {3}, {kNaN, 1, -kInf}), Lit(t, {}, {kNaN})));
    out.push_back(Red("signed_zero", K::kMax, {0}, Lit(t, {2}, {-0.0, 0}), Lit(t, {}, {0})));
    out.push_back(Red("signed_zero", K::kMin, {0}, Lit(t, {2}, {0, -0.0}), Lit(t, {}, {-0.0})));
    out.push_back(Red("negative_zeros", K::kSum, {0}, Lit(t, {2}, {-0.0, -0.0}), Lit(t, {}, {-0.0})));
    out.push_back(Red("empty_zero", K::kSum, {0}, Lit(t, {0}, {}), Lit(t, {}, {0})));
    out.push_back(Red("infs", K::kMax, {0}, Lit(t, {2}, {-kInf, -kInf}), Lit(t, {}, {-kInf})));
  }
  // Integers wrap.
  out.push_back(Red("wrap", K::kSum, {0}, Ints(D::kI32, {2}, {kI32Max, 1}), Ints(D::kI32, {}, {kI32Min})));
  out.push_back(Red("wrap", K::kSum, {0}, Ints(D::kU8, {2}, {200, 100}), Ints(D::kU8, {}, {44})));
  out.push_back(Red("wrap", K::kSum, {0}, Ints(D::kI64, {3}, {kI64Max, 1, 1}), Ints(D::kI64, {}, {kI64Min + 1})));
  out.push_back(Red("wrap", K::kProd, {0}, Ints(D::kI8, {2}, {16, 16}), Ints(D::kI8, {}, {0})));
  out.push_back(Red("wrap", K::kProd, {0}, Ints(D::kU32, {2}, {65536, 65537}), Ints(D::kU32, {}, {65536})));
  out.push_back(Red("extremes", K::kMax, {0}, Ints(D::kU32, {2}, {kU32Max, 0}), Ints(D::kU32, {}, {kU32Max})));
  out.push_back(Red("extremes", K::kMin, {0}, Ints(D::kI8, {2}, {-128, 127}), Ints(D::kI8, {}, {-128})));
  out.push_back(Red("3d", K::kSum, {0, 2}, Lit(D::kI32, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), Lit(D::kI32, {2}, {14, 22})));
  out.push_back(Red("scalar", K::kSum, {}, Lit(D::kF32, {}, {3}), Lit(D::kF32, {}, {3})));
}

void AddArgReduce(std::vector<OpSample>& out) {
  for (DType t : kNumericDTypes) {
    const Literal x = Lit(t, {2, 3}, {1, 5, 5, 4, 2, 4});
    for (DType it : {DType::kI32, DType::kI64}) {
      const std::string n = Name(t) + "." + Name(it);
      out.push_back(Sample("argmax.rows." + n, OpKind::kArgMax, ArgReduceAttrs{1, it}, {x}, {Ints(it, {2}, {1, 0})}));
      out.push_back(Sample("argmin.rows." + n, OpKind::kArgMin, ArgReduceAttrs{1, it}, {x}, {Ints(it, {2}, {0, 1})}));
      out.push_back(Sample("argmax.cols." + n, OpKind::kArgMax, ArgReduceAttrs{0, it}, {x}, {Ints(it, {3}, {1, 0, 0})}));
      out.push_back(Sample("argmin.cols." + n, OpKind::kArgMin, ArgReduceAttrs{0, it}, {x}, {Ints(it, {3}, {0, 1, 1})}));
    }
    out.push_back(Sample("argmax.empty_result." + Name(t), OpKind::kArgMax, ArgReduceAttrs{1, DType::kI32},
                         {Lit(t, {0, 3}, {})}, {Ints(DType::kI32, {0}, {})}));
    out.push_back(Sample("argmin.single." + Name(t), OpKind::kArgMin, ArgReduceAttrs{0, DType::kI64},
                         {Lit(t, {1}, {7})}, {Ints(DType::kI64, {}, {0})}));
  }
  for (DType t : kFloatDTypes) {
    const Literal x = Lit(t, {5}, {1, kNaN, 3, kNaN, -kInf});
    out.push_back(Sample("argmax.nan." + Name(t), OpKind::kArgMax, ArgReduceAttrs{0, DType::kI32}, {x}, {Ints(DType::kI32, {}, {1})}));
    out.push_back(Sample("argmin.nan." + Name(t), OpKind::kArgMin, ArgReduceAttrs{0, DType::kI32}, {x}, {Ints(DType::kI32, {}, {1})}));
    const Literal z = Lit(t, {3}, {-0.0, 0, -kInf});
    out.push_back(Sample("argmax.signed_zero." + Name(t), OpKind::kArgMax, ArgReduceAttrs{0, DType::kI32}, {z}, {Ints(DType::kI32, {}, {0})}));
    out.push_back(Sample("argmin.inf." + Name(t), OpKind::kArgMin, ArgReduceAttrs{0, DType::kI32}, {z}, {Ints(DType::kI32, {}, {2})}));
  }
  out.push_back(Sample("argmax.u32.high", OpKind::kArgMax, ArgReduceAttrs{0, DType::kI32},
                       {Ints(DType::kU32, {3}, {5, kU32Max, 0})}, {Ints(DType::kI32, {}, {1})}));
  out.push_back(Sample("argmin.i8.low", OpKind::kArgMin, ArgReduceAttrs{0, DType::kI32},
                       {Ints(DType::kI8, {3}, {5, 127, -128})}, {Ints(DType::kI32, {}, {2})}));
}

void AddCumsum(std::vector<OpSample>& out) {
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    const Literal x = Lit(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    out.push_back(Sample("cumsum.rows." + n, OpKind::kCumsum, CumsumAttrs{1, false}, {x}, {Lit(t, {2, 3}, {1, 3, 6, 4, 9, 15})}));
    out.push_back(Sample("cumsum.reverse." + n, OpKind::kCumsum, CumsumAttrs{1, true}, {x}, {Lit(t, {2, 3}, {6, 5, 3, 15, 11, 6})}));
    out.push_back(Sample("cumsum.cols." + n, OpKind::kCumsum, CumsumAttrs{0, false}, {x}, {Lit(t, {2, 3}, {1, 2, 3, 5, 7, 9})}));
    out.push_back(Sample("cumsum.cols_reverse." + n, OpKind::kCumsum, CumsumAttrs{0, true}, {x}, {Lit(t, {2, 3}, {5, 7, 9, 4, 5, 6})}));
    out.push_back(Sample("cumsum.empty." + n, OpKind::kCumsum, CumsumAttrs{0, false}, {Lit(t, {0}, {})}, {Lit(t, {0}, {})}));
  }
  // Floats accumulate in double; each output is rounded once.
  out.push_back(Sample("cumsum.double_acc.bf16", OpKind::kCumsum, CumsumAttrs{0, false}, {Lit(DType::kBF16, {3}, {256, 1, 1})},
                       {Lit(DType::kBF16, {3}, {256, 256, 258})}));
  out.push_back(Sample("cumsum.double_acc.f32", OpKind::kCumsum, CumsumAttrs{0, false}, {Lit(DType::kF32, {3}, {1e8, 1, -1e8})},
                       {Lit(DType::kF32, {3}, {1e8, 1e8, 1})}));
  out.push_back(Sample("cumsum.nan.f32", OpKind::kCumsum, CumsumAttrs{0, false}, {Lit(DType::kF32, {3}, {1, kNaN, 1})},
                       {Lit(DType::kF32, {3}, {1, kNaN, kNaN})}));
  out.push_back(Sample("cumsum.negative_zero.f64", OpKind::kCumsum, CumsumAttrs{0, false}, {Lit(DType::kF64, {2}, {-0.0, -0.0})},
                       {Lit(DType::kF64, {2}, {-0.0, -0.0})}));
  out.push_back(Sample("cumsum.wrap.i8", OpKind::kCumsum, CumsumAttrs{0, false}, {Ints(DType::kI8, {3}, {100, 100, -100})},
                       {Ints(DType::kI8, {3}, {100, -56, 100})}));
  out.push_back(Sample("cumsum.wrap.u32", OpKind::kCumsum, CumsumAttrs{0, true}, {Ints(DType::kU32, {2}, {kU32Max, 2})},
                       {Ints(DType::kU32, {2}, {1, 2})}));
}

void AddSort(std::vector<OpSample>& out) {
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    const Literal keys = Lit(t, {4}, {3, 1, 2, 1});
    const Literal payload = Ints(DType::kI32, {4}, {0, 1, 2, 3});
    const Literal flags = Bools({4}, {true, false, false, true});
    out.push_back(Sample("sort.asc." + n, OpKind::kSort, SortAttrs{0, false}, {keys, payload, flags},
                         {Lit(t, {4}, {1, 1, 2, 3}), Ints(DType::kI32, {4}, {1, 3, 2, 0}), Bools({4}, {false, true, false, true})}));
    out.push_back(Sample("sort.desc." + n, OpKind::kSort, SortAttrs{0, true}, {keys, payload},
                         {Lit(t, {4}, {3, 2, 1, 1}), Ints(DType::kI32, {4}, {0, 2, 1, 3})}));
    // Along dim 0 of [3, 2]: each column sorts on its own.
    out.push_back(Sample("sort.dim0." + n, OpKind::kSort, SortAttrs{0, false}, {Lit(t, {3, 2}, {3, 1, 1, 2, 2, 0})},
                         {Lit(t, {3, 2}, {1, 0, 2, 1, 3, 2})}));
    out.push_back(Sample("sort.dim1." + n, OpKind::kSort, SortAttrs{1, true}, {Lit(t, {2, 3}, {1, 3, 2, 6, 4, 5})},
                         {Lit(t, {2, 3}, {3, 2, 1, 6, 5, 4})}));
    out.push_back(Sample("sort.empty." + n, OpKind::kSort, SortAttrs{0, false}, {Lit(t, {0}, {})}, {Lit(t, {0}, {})}));
  }
  // -inf < ... < -0 == +0 < ... < +inf < NaN; ties (±0, NaNs) keep their order.
  for (DType t : kFloatDTypes) {
    const Literal keys = Lit(t, {8}, {kNaN, 1, -0.0, 0, -kInf, kInf, kNaN, -1});
    const Literal payload = Ints(DType::kI32, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
    out.push_back(Sample("sort.special_asc." + Name(t), OpKind::kSort, SortAttrs{0, false}, {keys, payload},
                         {Lit(t, {8}, {-kInf, -1, -0.0, 0, 1, kInf, kNaN, kNaN}), Ints(DType::kI32, {8}, {4, 7, 2, 3, 1, 5, 0, 6})}));
    out.push_back(Sample("sort.special_desc." + Name(t), OpKind::kSort, SortAttrs{0, true}, {keys, payload},
                         {Lit(t, {8}, {kNaN, kNaN, kInf, 1, -0.0, 0, -1, -kInf}), Ints(DType::kI32, {8}, {0, 6, 5, 1, 2, 3, 7, 4})}));
    const Literal zeros = Lit(t, {3}, {0, -0.0, 0});
    out.push_back(Sample("sort.zeros_stable." + Name(t), OpKind::kSort, SortAttrs{0, false}, {zeros, Ints(DType::kI32, {3}, {0, 1, 2})},
                         {zeros, Ints(DType::kI32, {3}, {0, 1, 2})}));
  }
  out.push_back(Sample("sort.u32.high", OpKind::kSort, SortAttrs{0, false}, {Ints(DType::kU32, {3}, {kU32Max, 0, 5})},
                       {Ints(DType::kU32, {3}, {0, 5, kU32Max})}));
  out.push_back(Sample("sort.i64.extremes", OpKind::kSort, SortAttrs{0, true}, {Ints(DType::kI64, {3}, {0, kI64Min, kI64Max})},
                       {Ints(DType::kI64, {3}, {kI64Max, 0, kI64Min})}));
}

OpSample Dot(std::string what, DotGeneralAttrs d, Literal lhs, Literal rhs, Literal expected) {
  std::string name = fmt::format("dot_general.{}.{}", what, Name(lhs.dtype()));
  // A result dtype other than the operands' (f32 from halves) is stated on the node.
  std::vector<TensorType> declared;
  if (expected.dtype() != lhs.dtype()) declared.push_back(expected.type());
  OpSample s = Sample(std::move(name), OpKind::kDotGeneral, std::move(d), {std::move(lhs), std::move(rhs)},
                      {std::move(expected)});
  s.declared = std::move(declared);
  return s;
}

void AddDotGeneral(std::vector<OpSample>& out) {
  using DG = DotGeneralAttrs;
  for (DType t : kNumericDTypes) {
    const Literal a = Lit(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Literal b = Lit(t, {3, 2}, {1, 2, 3, 4, 5, 6});
    out.push_back(Dot("matmul", DG{{}, {}, {1}, {0}}, a, b, Lit(t, {2, 2}, {22, 28, 49, 64})));
    // lhs free dims come before rhs free dims: result = b^T b.
    out.push_back(Dot("lhs_contract_0", DG{{}, {}, {0}, {0}}, b, b, Lit(t, {2, 2}, {35, 44, 44, 56})));
    // Batch dims first: [2,1,2] x [2,2,1] -> [2,1,1].
    out.push_back(Dot("batch", DG{{0}, {0}, {2}, {1}}, Lit(t, {2, 1, 2}, {1, 2, 3, 4}), Lit(t, {2, 2, 1}, {1, 2, 3, 4}),
                      Lit(t, {2, 1, 1}, {5, 25})));
    // rhs batch dim not leading: rhs [3, 2] with batch dim 1.
    out.push_back(Dot("batch_inner", DG{{0}, {1}, {}, {}}, Lit(t, {2}, {1, 2}), Lit(t, {3, 2}, {1, 2, 3, 4, 5, 6}),
                      Lit(t, {2, 3}, {1, 3, 5, 4, 8, 12})));
    out.push_back(Dot("outer", DG{}, Lit(t, {2}, {1, 2}), Lit(t, {3}, {1, 2, 3}), Lit(t, {2, 3}, {1, 2, 3, 2, 4, 6})));
    out.push_back(Dot("vector", DG{{}, {}, {0}, {0}}, Lit(t, {3}, {1, 2, 3}), Lit(t, {3}, {4, 5, 6}), Lit(t, {}, {32})));
    out.push_back(Dot("two_contracting", DG{{}, {}, {0, 1}, {1, 0}}, a, b, Lit(t, {}, {1 + 6 + 15 + 8 + 20 + 36})));
    out.push_back(Dot("empty_contraction", DG{{}, {}, {1}, {0}}, Lit(t, {2, 0}, {}), Lit(t, {0, 3}, {}), Lit(t, {2, 3}, {0, 0, 0, 0, 0, 0})));
    out.push_back(Dot("empty_result", DG{{}, {}, {1}, {0}}, Lit(t, {0, 2}, {}), Lit(t, {2, 3}, {1, 2, 3, 4, 5, 6}), Lit(t, {0, 3}, {})));
    out.push_back(Dot("scalars", DG{}, Lit(t, {}, {3}), Lit(t, {}, {4}), Lit(t, {}, {12})));
  }
  const Literal ones3_f32 = Lit(DType::kF32, {3}, {1, 1, 1});
  out.push_back(Dot("double_acc", DG{{}, {}, {0}, {0}}, Lit(DType::kF32, {3}, {1e8, 1, -1e8}), ones3_f32, Lit(DType::kF32, {}, {1})));
  out.push_back(Dot("double_acc", DG{{}, {}, {0}, {0}}, Lit(DType::kBF16, {3}, {256, 1, 1}), Lit(DType::kBF16, {3}, {1, 1, 1}),
                    Lit(DType::kBF16, {}, {258})));
  out.push_back(Dot("double_acc", DG{{}, {}, {0}, {0}}, Lit(DType::kF16, {2}, {256, 256}), Lit(DType::kF16, {2}, {256, -255}),
                    Lit(DType::kF16, {}, {256})));
  // An f32 result from halves (Note [Partial products of halves]): the sum unrounded to the half
  // (257.5 would be 258 in bf16, 2049.5 would be 2050 in f16).
  out.push_back(Dot("f32_result", DG{{}, {}, {0}, {0}}, Lit(DType::kBF16, {3}, {256, 1, 0.5}), Lit(DType::kBF16, {3}, {1, 1, 1}),
                    Lit(DType::kF32, {}, {257.5})));
  out.push_back(Dot("f32_result", DG{{}, {}, {1}, {0}}, Lit(DType::kF16, {2, 3}, {2048, 1, 0.5, 1, 2, 3}),
                    Lit(DType::kF16, {3, 2}, {1, 0, 1, 0, 1, 1}), Lit(DType::kF32, {2, 2}, {2049.5, 0.5, 6, 3})));
  out.push_back(Dot("nan", DG{{}, {}, {0}, {0}}, Lit(DType::kF32, {2}, {kInf, 1}), Lit(DType::kF32, {2}, {0, 1}), Lit(DType::kF32, {}, {kNaN})));
  out.push_back(Dot("wrap", DG{{}, {}, {0}, {0}}, Ints(DType::kI32, {2}, {65536, 3}), Ints(DType::kI32, {2}, {65536, 1}), Ints(DType::kI32, {}, {3})));
  out.push_back(Dot("wrap", DG{{}, {}, {0}, {0}}, Ints(DType::kU8, {2}, {16, 255}), Ints(DType::kU8, {2}, {16, 1}), Ints(DType::kU8, {}, {255})));
  out.push_back(Dot("wrap", DG{{}, {}, {0}, {0}}, Ints(DType::kI8, {2}, {-128, 1}), Ints(DType::kI8, {2}, {-1, 0}), Ints(DType::kI8, {}, {-128})));
}

}  // namespace

void AddReduceSamples(std::vector<OpSample>& out) {
  AddReduceGeneric(out);
  AddReduceEdges(out);
  AddArgReduce(out);
  AddCumsum(out);
  AddSort(out);
  AddDotGeneral(out);
}

}  // namespace axle::ir::samples
