// Op samples of the elementwise ops (except convert: op_samples_convert.cc). Every expected
// value here is derived by hand; transcendental functions and random float arithmetic come from
// the NumPy goldens (op_samples_golden.cc).
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

OpSample Un(std::string name, OpKind op, Literal x, Literal expected) {
  return Sample(std::move(name), op, NoAttrs{}, {std::move(x)}, {std::move(expected)});
}
OpSample Bin(std::string name, OpKind op, Literal a, Literal b, Literal expected) {
  return Sample(std::move(name), op, NoAttrs{}, {std::move(a), std::move(b)}, {std::move(expected)});
}
OpSample Cmp(std::string name, CompareDir dir, Literal a, Literal b, Literal expected) {
  return Sample(std::move(name), OpKind::kCompare, CompareAttrs{dir}, {std::move(a), std::move(b)},
                {std::move(expected)});
}

void AddUnaryNumeric(std::vector<OpSample>& out) {
  for (DType t : kSignedDTypes) {
    const std::string n = Name(t);
    out.push_back(Un("neg." + n, OpKind::kNeg, Lit(t, {4}, {1, -2, 0, 3}), Lit(t, {4}, {-1, 2, -0.0, -3})));
    out.push_back(Un("abs." + n, OpKind::kAbs, Lit(t, {4}, {1, -2, 0, -3}), Lit(t, {4}, {1, 2, 0, 3})));
    out.push_back(Un("sign." + n, OpKind::kSign, Lit(t, {4}, {5, -2, 0, 1}), Lit(t, {4}, {1, -1, 0, 1})));
    out.push_back(Un("neg.scalar." + n, OpKind::kNeg, Lit(t, {}, {7}), Lit(t, {}, {-7})));
  }
  for (DType t : {DType::kU8, DType::kU32}) {
    const std::string n = Name(t);
    out.push_back(Un("abs." + n, OpKind::kAbs, Ints(t, {3}, {0, 200, 7}), Ints(t, {3}, {0, 200, 7})));
    out.push_back(Un("sign." + n, OpKind::kSign, Ints(t, {3}, {0, 200, 1}), Ints(t, {3}, {0, 1, 1})));
  }
  // Wrapping negation and abs of the most negative value.
  out.push_back(Un("neg.u8.wrap", OpKind::kNeg, Ints(DType::kU8, {3}, {1, 0, 255}), Ints(DType::kU8, {3}, {255, 0, 1})));
  out.push_back(Un("neg.u32.wrap", OpKind::kNeg, Ints(DType::kU32, {2}, {5, 0}), Ints(DType::kU32, {2}, {kU32Max - 4, 0})));
  out.push_back(Un("neg.i8.min", OpKind::kNeg, Ints(DType::kI8, {2}, {-128, 127}), Ints(DType::kI8, {2}, {-128, -127})));
  out.push_back(Un("neg.i32.min", OpKind::kNeg, Ints(DType::kI32, {1}, {kI32Min}), Ints(DType::kI32, {1}, {kI32Min})));
  out.push_back(Un("neg.i64.min", OpKind::kNeg, Ints(DType::kI64, {1}, {kI64Min}), Ints(DType::kI64, {1}, {kI64Min})));
  out.push_back(Un("abs.i8.min", OpKind::kAbs, Ints(DType::kI8, {2}, {-128, -127}), Ints(DType::kI8, {2}, {-128, 127})));
  out.push_back(Un("abs.i32.min", OpKind::kAbs, Ints(DType::kI32, {1}, {kI32Min}), Ints(DType::kI32, {1}, {kI32Min})));
  out.push_back(Un("abs.i64.min", OpKind::kAbs, Ints(DType::kI64, {2}, {kI64Min, -5}), Ints(DType::kI64, {2}, {kI64Min, 5})));
  out.push_back(Un("sign.i64.extremes", OpKind::kSign, Ints(DType::kI64, {2}, {kI64Min, kI64Max}), Ints(DType::kI64, {2}, {-1, 1})));
  // Floats: signed zeros, infinities, NaN.
  for (DType t : kFloatDTypes) {
    const std::string n = Name(t);
    out.push_back(Un("neg.special." + n, OpKind::kNeg, Lit(t, {4}, {0, -0.0, kInf, kNaN}),
                     Lit(t, {4}, {-0.0, 0, -kInf, kNaN})));
    out.push_back(Un("abs.special." + n, OpKind::kAbs, Lit(t, {4}, {-0.0, -kInf, kInf, kNaN}),
                     Lit(t, {4}, {0, kInf, kInf, kNaN})));
    out.push_back(Un("sign.special." + n, OpKind::kSign, Lit(t, {6}, {-0.0, 0, kNaN, -kInf, 2.5, -0.5}),
                     Lit(t, {6}, {-0.0, 0, kNaN, -1, 1, -1})));
  }
  out.push_back(Un("abs.f32.empty", OpKind::kAbs, Lit(DType::kF32, {0, 3}, {}), Lit(DType::kF32, {0, 3}, {})));
}

void AddUnaryFloat(std::vector<OpSample>& out) {
  for (DType t : kFloatDTypes) {
    const std::string n = Name(t);
    const std::vector<double> x = {-1.5, -0.5, -0.0, 0.5, 1.5, 2, kInf, -kInf, kNaN};
    out.push_back(Un("floor." + n, OpKind::kFloor, Lit(t, {9}, x),
                     Lit(t, {9}, {-2, -1, -0.0, 0, 1, 2, kInf, -kInf, kNaN})));
    out.push_back(Un("ceil." + n, OpKind::kCeil, Lit(t, {9}, x),
                     Lit(t, {9}, {-1, -0.0, -0.0, 1, 2, 2, kInf, -kInf, kNaN})));
    out.push_back(Un("is_finite." + n, OpKind::kIsFinite, Lit(t, {6}, {0, -1, kInf, -kInf, kNaN, 0.5}),
                     Bools({6}, {true, true, false, false, false, true})));
    // Exact cases of the transcendental ops (the goldens cover the rest).
    out.push_back(Un("exp.exact." + n, OpKind::kExp, Lit(t, {4}, {0, -0.0, -kInf, kInf}), Lit(t, {4}, {1, 1, 0, kInf})));
    out.push_back(Un("log.exact." + n, OpKind::kLog, Lit(t, {5}, {1, 0, -0.0, -1, kInf}),
                     Lit(t, {5}, {0, -kInf, -kInf, kNaN, kInf})));
    out.push_back(Un("log1p.exact." + n, OpKind::kLog1p, Lit(t, {4}, {0, -0.0, -1, -2}), Lit(t, {4}, {0, -0.0, -kInf, kNaN})));
    out.push_back(Un("tanh.exact." + n, OpKind::kTanh, Lit(t, {4}, {0, -0.0, kInf, -kInf}), Lit(t, {4}, {0, -0.0, 1, -1})));
    out.push_back(Un("logistic.exact." + n, OpKind::kLogistic, Lit(t, {4}, {0, kInf, -kInf, kNaN}), Lit(t, {4}, {0.5, 1, 0, kNaN})));
    out.push_back(Un("sqrt.exact." + n, OpKind::kSqrt, Lit(t, {6}, {4, 0.25, -0.0, -1, kInf, kNaN}),
                     Lit(t, {6}, {2, 0.5, -0.0, kNaN, kInf, kNaN})));
    out.push_back(Un("rsqrt.exact." + n, OpKind::kRsqrt, Lit(t, {6}, {4, 0.25, 0, -0.0, -1, kInf}),
                     Lit(t, {6}, {0.5, 2, kInf, -kInf, kNaN, 0})));
    out.push_back(Un("sin.exact." + n, OpKind::kSin, Lit(t, {3}, {0, -0.0, kInf}), Lit(t, {3}, {0, -0.0, kNaN})));
    out.push_back(Un("cos.exact." + n, OpKind::kCos, Lit(t, {3}, {0, -0.0, -kInf}), Lit(t, {3}, {1, 1, kNaN})));
    out.push_back(Un("erf.exact." + n, OpKind::kErf, Lit(t, {4}, {0, -0.0, kInf, -kInf}), Lit(t, {4}, {0, -0.0, 1, -1})));
  }
  out.push_back(Un("exp.f32.scalar", OpKind::kExp, Lit(DType::kF32, {}, {0}), Lit(DType::kF32, {}, {1})));
  out.push_back(Un("exp.f32.empty", OpKind::kExp, Lit(DType::kF32, {2, 0}, {}), Lit(DType::kF32, {2, 0}, {})));
}

void AddNot(std::vector<OpSample>& out) {
  out.push_back(Un("not.bool", OpKind::kNot, Bools({2}, {true, false}), Bools({2}, {false, true})));
  out.push_back(Un("not.i8", OpKind::kNot, Ints(DType::kI8, {3}, {0, -1, 5}), Ints(DType::kI8, {3}, {-1, 0, -6})));
  out.push_back(Un("not.i32", OpKind::kNot, Ints(DType::kI32, {2}, {0, kI32Max}), Ints(DType::kI32, {2}, {-1, kI32Min})));
  out.push_back(Un("not.i64", OpKind::kNot, Ints(DType::kI64, {2}, {0, kI64Min}), Ints(DType::kI64, {2}, {-1, kI64Max})));
  out.push_back(Un("not.u8", OpKind::kNot, Ints(DType::kU8, {3}, {0, 255, 5}), Ints(DType::kU8, {3}, {255, 0, 250})));
  out.push_back(Un("not.u32", OpKind::kNot, Ints(DType::kU32, {2}, {0, 1}), Ints(DType::kU32, {2}, {kU32Max, kU32Max - 1})));
}

// Small exact integers: the same values in every numeric dtype.
void AddBinaryGeneric(std::vector<OpSample>& out) {
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    out.push_back(Bin("add." + n, OpKind::kAdd, Lit(t, {3}, {1, 2, 3}), Lit(t, {3}, {4, 5, 6}), Lit(t, {3}, {5, 7, 9})));
    out.push_back(Bin("add.scalar." + n, OpKind::kAdd, Lit(t, {}, {1}), Lit(t, {}, {2}), Lit(t, {}, {3})));
    out.push_back(Bin("add.empty." + n, OpKind::kAdd, Lit(t, {0, 2}, {}), Lit(t, {0, 2}, {}), Lit(t, {0, 2}, {})));
    out.push_back(Bin("sub." + n, OpKind::kSub, Lit(t, {3}, {7, 5, 3}), Lit(t, {3}, {1, 2, 3}), Lit(t, {3}, {6, 3, 0})));
    out.push_back(Bin("mul." + n, OpKind::kMul, Lit(t, {2, 2}, {2, 3, 4, 7}), Lit(t, {2, 2}, {5, 6, 0, 1}),
                      Lit(t, {2, 2}, {10, 18, 0, 7})));
    out.push_back(Bin("div." + n, OpKind::kDiv, Lit(t, {3}, {8, 9, 6}), Lit(t, {3}, {2, 3, 6}), Lit(t, {3}, {4, 3, 1})));
    out.push_back(Bin("rem." + n, OpKind::kRem, Lit(t, {3}, {7, 8, 6}), Lit(t, {3}, {3, 5, 6}), Lit(t, {3}, {1, 3, 0})));
    out.push_back(Bin("pow." + n, OpKind::kPow, Lit(t, {4}, {2, 3, 5, 1}), Lit(t, {4}, {3, 2, 0, 7}), Lit(t, {4}, {8, 9, 1, 1})));
    out.push_back(Bin("max." + n, OpKind::kMax, Lit(t, {3}, {1, 5, 3}), Lit(t, {3}, {4, 2, 3}), Lit(t, {3}, {4, 5, 3})));
    out.push_back(Bin("min." + n, OpKind::kMin, Lit(t, {3}, {1, 5, 3}), Lit(t, {3}, {4, 2, 3}), Lit(t, {3}, {1, 2, 3})));
  }
  for (DType t : kSignedDTypes) {
    const std::string n = Name(t);
    out.push_back(Bin("max.signed." + n, OpKind::kMax, Lit(t, {2}, {-1, -5}), Lit(t, {2}, {-2, 3}), Lit(t, {2}, {-1, 3})));
    out.push_back(Bin("mul.signed." + n, OpKind::kMul, Lit(t, {2}, {-3, -2}), Lit(t, {2}, {4, -5}), Lit(t, {2}, {-12, 10})));
  }
}

void AddIntegerEdges(std::vector<OpSample>& out) {
  using D = DType;
  out.push_back(Bin("add.i32.wrap", OpKind::kAdd, Ints(D::kI32, {2}, {kI32Max, kI32Min}), Ints(D::kI32, {2}, {1, -1}),
                    Ints(D::kI32, {2}, {kI32Min, kI32Max})));
  out.push_back(Bin("add.i8.wrap", OpKind::kAdd, Ints(D::kI8, {2}, {127, -128}), Ints(D::kI8, {2}, {1, -1}), Ints(D::kI8, {2}, {-128, 127})));
  out.push_back(Bin("add.u8.wrap", OpKind::kAdd, Ints(D::kU8, {1}, {255}), Ints(D::kU8, {1}, {1}), Ints(D::kU8, {1}, {0})));
  out.push_back(Bin("add.u32.wrap", OpKind::kAdd, Ints(D::kU32, {1}, {kU32Max}), Ints(D::kU32, {1}, {2}), Ints(D::kU32, {1}, {1})));
  out.push_back(Bin("add.i64.wrap", OpKind::kAdd, Ints(D::kI64, {1}, {kI64Max}), Ints(D::kI64, {1}, {1}), Ints(D::kI64, {1}, {kI64Min})));
  out.push_back(Bin("sub.u8.wrap", OpKind::kSub, Ints(D::kU8, {1}, {0}), Ints(D::kU8, {1}, {1}), Ints(D::kU8, {1}, {255})));
  out.push_back(Bin("sub.i32.wrap", OpKind::kSub, Ints(D::kI32, {1}, {kI32Min}), Ints(D::kI32, {1}, {1}), Ints(D::kI32, {1}, {kI32Max})));
  out.push_back(Bin("sub.i64.wrap", OpKind::kSub, Ints(D::kI64, {1}, {kI64Min}), Ints(D::kI64, {1}, {1}), Ints(D::kI64, {1}, {kI64Max})));
  out.push_back(Bin("mul.i32.wrap", OpKind::kMul, Ints(D::kI32, {2}, {65536, kI32Min}), Ints(D::kI32, {2}, {65536, -1}),
                    Ints(D::kI32, {2}, {0, kI32Min})));
  out.push_back(Bin("mul.i8.wrap", OpKind::kMul, Ints(D::kI8, {3}, {16, -128, 77}), Ints(D::kI8, {3}, {16, -1, 3}),
                    Ints(D::kI8, {3}, {0, -128, -25})));
  out.push_back(Bin("mul.u8.wrap", OpKind::kMul, Ints(D::kU8, {1}, {255}), Ints(D::kU8, {1}, {255}), Ints(D::kU8, {1}, {1})));
  out.push_back(Bin("mul.u32.wrap", OpKind::kMul, Ints(D::kU32, {1}, {kU32Max}), Ints(D::kU32, {1}, {kU32Max}), Ints(D::kU32, {1}, {1})));
  out.push_back(Bin("mul.i64.wrap", OpKind::kMul, Ints(D::kI64, {2}, {int64_t{1} << 62, kI64Min}), Ints(D::kI64, {2}, {4, -1}),
                    Ints(D::kI64, {2}, {0, kI64Min})));
  // Truncating division; x / 0 = -1 (signed) or all ones (unsigned); INT_MIN / -1 = INT_MIN.
  out.push_back(Bin("div.i32.edges", OpKind::kDiv, Ints(D::kI32, {7}, {7, -7, 7, -7, 5, kI32Min, kI32Min}),
                    Ints(D::kI32, {7}, {2, 2, -2, -2, 0, -1, 1}), Ints(D::kI32, {7}, {3, -3, -3, 3, -1, kI32Min, kI32Min})));
  out.push_back(Bin("div.i8.edges", OpKind::kDiv, Ints(D::kI8, {3}, {-128, 0, -7}), Ints(D::kI8, {3}, {-1, 0, 0}), Ints(D::kI8, {3}, {-128, -1, -1})));
  out.push_back(Bin("div.i64.edges", OpKind::kDiv, Ints(D::kI64, {2}, {kI64Min, 9}), Ints(D::kI64, {2}, {-1, 0}), Ints(D::kI64, {2}, {kI64Min, -1})));
  out.push_back(Bin("div.u8.edges", OpKind::kDiv, Ints(D::kU8, {2}, {7, 255}), Ints(D::kU8, {2}, {0, 2}), Ints(D::kU8, {2}, {255, 127})));
  out.push_back(Bin("div.u32.edges", OpKind::kDiv, Ints(D::kU32, {2}, {7, kU32Max}), Ints(D::kU32, {2}, {0, 2}), Ints(D::kU32, {2}, {kU32Max, 2147483647})));
  // Remainder has the dividend's sign; x rem 0 = x; INT_MIN rem -1 = 0.
  out.push_back(Bin("rem.i32.edges", OpKind::kRem, Ints(D::kI32, {7}, {7, -7, 7, -7, 5, kI32Min, 0}),
                    Ints(D::kI32, {7}, {3, 3, -3, -3, 0, -1, 5}), Ints(D::kI32, {7}, {1, -1, 1, -1, 5, 0, 0})));
  out.push_back(Bin("rem.i8.edges", OpKind::kRem, Ints(D::kI8, {2}, {-128, -128}), Ints(D::kI8, {2}, {-1, 0}), Ints(D::kI8, {2}, {0, -128})));
  out.push_back(Bin("rem.i64.edges", OpKind::kRem, Ints(D::kI64, {2}, {kI64Min, -9}), Ints(D::kI64, {2}, {-1, 4}), Ints(D::kI64, {2}, {0, -1})));
  out.push_back(Bin("rem.u8.edges", OpKind::kRem, Ints(D::kU8, {2}, {7, 9}), Ints(D::kU8, {2}, {0, 4}), Ints(D::kU8, {2}, {7, 1})));
  out.push_back(Bin("rem.u32.edges", OpKind::kRem, Ints(D::kU32, {2}, {kU32Max, 9}), Ints(D::kU32, {2}, {0, 4}), Ints(D::kU32, {2}, {kU32Max, 1})));
  // Integer pow: repeated squaring with wrap; negative exponents give 0 except for bases ±1.
  out.push_back(Bin("pow.i32.edges", OpKind::kPow, Ints(D::kI32, {10}, {2, 2, 3, -2, 1, -1, -1, 0, 5, 0}),
                    Ints(D::kI32, {10}, {10, 31, 0, 3, -5, -3, -4, -1, -1, 0}),
                    Ints(D::kI32, {10}, {1024, kI32Min, 1, -8, 1, -1, 1, 0, 0, 1})));
  out.push_back(Bin("pow.i8.wrap", OpKind::kPow, Ints(D::kI8, {3}, {2, 3, -1}), Ints(D::kI8, {3}, {8, 5, 127}), Ints(D::kI8, {3}, {0, -13, -1})));
  out.push_back(Bin("pow.u8.wrap", OpKind::kPow, Ints(D::kU8, {2}, {3, 2}), Ints(D::kU8, {2}, {5, 9}), Ints(D::kU8, {2}, {243, 0})));
  out.push_back(Bin("pow.u32.wrap", OpKind::kPow, Ints(D::kU32, {1}, {3}), Ints(D::kU32, {1}, {21}), Ints(D::kU32, {1}, {1870418611})));
  out.push_back(Bin("pow.i64.wrap", OpKind::kPow, Ints(D::kI64, {2}, {3, -3}), Ints(D::kI64, {2}, {40, -2}),
                    Ints(D::kI64, {2}, {-6289078614652622815, 0})));
  out.push_back(Bin("max.i8.extremes", OpKind::kMax, Ints(D::kI8, {2}, {-128, 127}), Ints(D::kI8, {2}, {0, 0}), Ints(D::kI8, {2}, {0, 127})));
  out.push_back(Bin("min.u32.extremes", OpKind::kMin, Ints(D::kU32, {2}, {kU32Max, 0}), Ints(D::kU32, {2}, {1, 1}), Ints(D::kU32, {2}, {1, 0})));
  out.push_back(Bin("min.i64.extremes", OpKind::kMin, Ints(D::kI64, {2}, {kI64Min, kI64Max}), Ints(D::kI64, {2}, {0, 0}),
                    Ints(D::kI64, {2}, {kI64Min, 0})));
}

void AddFloatEdges(std::vector<OpSample>& out) {
  for (DType t : kFloatDTypes) {
    const std::string n = Name(t);
    out.push_back(Bin("div.special." + n, OpKind::kDiv, Lit(t, {6}, {1, -1, 0, 1, 7, kInf}), Lit(t, {6}, {0, 0, 0, -0.0, 2, kInf}),
                      Lit(t, {6}, {kInf, -kInf, kNaN, -kInf, 3.5, kNaN})));
    out.push_back(Bin("rem.special." + n, OpKind::kRem, Lit(t, {7}, {5.5, -5.5, 5.5, 1, kInf, 1, -0.0}),
                      Lit(t, {7}, {2, 2, -2, 0, 2, kInf, 1}), Lit(t, {7}, {1.5, -1.5, 1.5, kNaN, kNaN, 1, -0.0})));
    out.push_back(Bin("pow.special." + n, OpKind::kPow, Lit(t, {7}, {0, -2, -8, kNaN, 1, 2, 4}),
                      Lit(t, {7}, {-1, 3, 0.5, 0, kNaN, -1, 0.5}), Lit(t, {7}, {kInf, -8, kNaN, 1, 1, 0.5, 2})));
    out.push_back(Bin("add.special." + n, OpKind::kAdd, Lit(t, {4}, {kInf, -0.0, -0.0, kNaN}), Lit(t, {4}, {-kInf, 0, -0.0, 1}),
                      Lit(t, {4}, {kNaN, 0, -0.0, kNaN})));
    out.push_back(Bin("mul.special." + n, OpKind::kMul, Lit(t, {3}, {kInf, -0.0, -1}), Lit(t, {3}, {0, 5, 0}), Lit(t, {3}, {kNaN, -0.0, -0.0})));
    // max/min: NaN if either is NaN; +0 > -0 (in both operand orders).
    out.push_back(Bin("max.special." + n, OpKind::kMax, Lit(t, {6}, {kNaN, 1, -0.0, 0, -kInf, 3}),
                      Lit(t, {6}, {1, kNaN, 0, -0.0, 2, 3}), Lit(t, {6}, {kNaN, kNaN, 0, 0, 2, 3})));
    out.push_back(Bin("min.special." + n, OpKind::kMin, Lit(t, {6}, {kNaN, 1, -0.0, 0, -kInf, 3}),
                      Lit(t, {6}, {1, kNaN, 0, -0.0, 2, 3}), Lit(t, {6}, {kNaN, kNaN, -0.0, -0.0, -kInf, 3})));
    out.push_back(Bin("atan2.exact." + n, OpKind::kAtan2, Lit(t, {4}, {0, -0.0, 0, 1}), Lit(t, {4}, {1, 1, 0, kNaN}),
                      Lit(t, {4}, {0, -0.0, 0, kNaN})));
  }
  // bf16/f16 compute in float and round once: 256 + 1 is a tie in bf16 (-> 256), 257 is exact
  // in f16; 0.1 * 3 rounds differently than in f32.
  out.push_back(Bin("add.bf16.round", OpKind::kAdd, Lit(DType::kBF16, {3}, {256, 256, 256}), Lit(DType::kBF16, {3}, {1, 3, 2}),
                    Lit(DType::kBF16, {3}, {256, 260, 258})));
  out.push_back(Bin("add.f16.round", OpKind::kAdd, Lit(DType::kF16, {3}, {2048, 2048, 257}), Lit(DType::kF16, {3}, {1, 3, 1}),
                    Lit(DType::kF16, {3}, {2048, 2052, 258})));
  out.push_back(Bin("div.f32.round", OpKind::kDiv, Lit(DType::kF32, {1}, {1}), Lit(DType::kF32, {1}, {3}),
                    Bits(DType::kF32, {1}, {0x3eaaaaab})));
  out.push_back(Bin("div.f64.round", OpKind::kDiv, Lit(DType::kF64, {1}, {1}), Lit(DType::kF64, {1}, {3}),
                    Bits(DType::kF64, {1}, {0x3fd5555555555555})));
  out.push_back(Bin("div.bf16.round", OpKind::kDiv, Lit(DType::kBF16, {1}, {1}), Lit(DType::kBF16, {1}, {3}),
                    Bits(DType::kBF16, {1}, {0x3eab})));
  out.push_back(Bin("div.f16.round", OpKind::kDiv, Lit(DType::kF16, {1}, {1}), Lit(DType::kF16, {1}, {3}),
                    Bits(DType::kF16, {1}, {0x3555})));
}

void AddLogic(std::vector<OpSample>& out) {
  const Literal a = Bools({4}, {true, true, false, false}), b = Bools({4}, {true, false, true, false});
  out.push_back(Bin("and.bool", OpKind::kAnd, a, b, Bools({4}, {true, false, false, false})));
  out.push_back(Bin("or.bool", OpKind::kOr, a, b, Bools({4}, {true, true, true, false})));
  out.push_back(Bin("xor.bool", OpKind::kXor, a, b, Bools({4}, {false, true, true, false})));
  for (DType t : kIntDTypes) {
    const std::string n = Name(t);
    out.push_back(Bin("and." + n, OpKind::kAnd, Ints(t, {3}, {12, 6, 0}), Ints(t, {3}, {10, 3, 7}), Ints(t, {3}, {8, 2, 0})));
    out.push_back(Bin("or." + n, OpKind::kOr, Ints(t, {3}, {12, 6, 0}), Ints(t, {3}, {10, 3, 7}), Ints(t, {3}, {14, 7, 7})));
    out.push_back(Bin("xor." + n, OpKind::kXor, Ints(t, {3}, {12, 6, 0}), Ints(t, {3}, {10, 3, 7}), Ints(t, {3}, {6, 5, 7})));
  }
  out.push_back(Bin("and.i8.negative", OpKind::kAnd, Ints(DType::kI8, {2}, {-1, -128}), Ints(DType::kI8, {2}, {5, 127}), Ints(DType::kI8, {2}, {5, 0})));
  out.push_back(Bin("xor.i32.negative", OpKind::kXor, Ints(DType::kI32, {1}, {-1}), Ints(DType::kI32, {1}, {5}), Ints(DType::kI32, {1}, {-6})));
  out.push_back(Bin("or.u8.high", OpKind::kOr, Ints(DType::kU8, {1}, {128}), Ints(DType::kU8, {1}, {127}), Ints(DType::kU8, {1}, {255})));
  out.push_back(Bin("xor.u32.high", OpKind::kXor, Ints(DType::kU32, {1}, {kU32Max}), Ints(DType::kU32, {1}, {5}), Ints(DType::kU32, {1}, {kU32Max - 5})));
  out.push_back(Bin("and.i64.high", OpKind::kAnd, Ints(DType::kI64, {1}, {kI64Min}), Ints(DType::kI64, {1}, {-1}), Ints(DType::kI64, {1}, {kI64Min})));
}

void AddCompare(std::vector<OpSample>& out) {
  // a = [0, 1, 1], b = [1, 1, 0] in every dtype (bool: false < true).
  const std::vector<std::pair<CompareDir, std::vector<bool>>> dirs = {
      {CompareDir::kEq, {false, true, false}}, {CompareDir::kNe, {true, false, true}},
      {CompareDir::kLt, {true, false, false}}, {CompareDir::kLe, {true, true, false}},
      {CompareDir::kGt, {false, false, true}}, {CompareDir::kGe, {false, true, true}}};
  for (DType t : kAllDTypes)
    for (const auto& [dir, want] : dirs)
      out.push_back(Cmp(fmt::format("compare.{}.{}", EnumName(dir), Name(t)), dir, Lit(t, {3}, {0, 1, 1}),
                        Lit(t, {3}, {1, 1, 0}), Bools({3}, want)));
  // IEEE: every ordered comparison with NaN is false, ne is true; -0 == +0.
  const std::vector<std::pair<CompareDir, std::vector<bool>>> nan_dirs = {
      {CompareDir::kEq, {false, false, false, true}}, {CompareDir::kNe, {true, true, true, false}},
      {CompareDir::kLt, {false, false, false, false}}, {CompareDir::kLe, {false, false, false, true}},
      {CompareDir::kGt, {false, false, false, false}}, {CompareDir::kGe, {false, false, false, true}}};
  for (DType t : kFloatDTypes)
    for (const auto& [dir, want] : nan_dirs)
      out.push_back(Cmp(fmt::format("compare.{}.nan.{}", EnumName(dir), Name(t)), dir, Lit(t, {4}, {kNaN, kNaN, 1, -0.0}),
                        Lit(t, {4}, {kNaN, 1, kNaN, 0}), Bools({4}, want)));
  out.push_back(Cmp("compare.lt.u32.high", CompareDir::kLt, Ints(DType::kU32, {2}, {0, kU32Max}), Ints(DType::kU32, {2}, {kU32Max, 0}),
                    Bools({2}, {true, false})));
  out.push_back(Cmp("compare.lt.i8.negative", CompareDir::kLt, Ints(DType::kI8, {2}, {-128, 127}), Ints(DType::kI8, {2}, {127, -128}),
                    Bools({2}, {true, false})));
  out.push_back(Cmp("compare.gt.i64.extremes", CompareDir::kGt, Ints(DType::kI64, {2}, {kI64Max, kI64Min}), Ints(DType::kI64, {2}, {kI64Min, 0}),
                    Bools({2}, {true, false})));
  out.push_back(Cmp("compare.eq.f32.empty", CompareDir::kEq, Lit(DType::kF32, {0}, {}), Lit(DType::kF32, {0}, {}), Bools({0}, {})));
}

void AddSelectClamp(std::vector<OpSample>& out) {
  for (DType t : kAllDTypes) {
    const std::string n = Name(t);
    const Literal on_true = Seq(t, {3}, 1), on_false = Seq(t, {3}, 4);
    out.push_back(Sample("select.full." + n, OpKind::kSelect, NoAttrs{}, {Bools({3}, {true, false, true}), on_true, on_false},
                         {Pick({3}, {&on_true, &on_false}, {{0, 0}, {1, 1}, {0, 2}})}));
    out.push_back(Sample("select.scalar_true." + n, OpKind::kSelect, NoAttrs{}, {Bools({}, {true}), on_true, on_false}, {on_true}));
    out.push_back(Sample("select.scalar_false." + n, OpKind::kSelect, NoAttrs{}, {Bools({}, {false}), on_true, on_false}, {on_false}));
  }
  out.push_back(Sample("select.empty.f32", OpKind::kSelect, NoAttrs{},
                       {Bools({}, {true}), Lit(DType::kF32, {0}, {}), Lit(DType::kF32, {0}, {})}, {Lit(DType::kF32, {0}, {})}));
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    out.push_back(Sample("clamp.scalar_bounds." + n, OpKind::kClamp, NoAttrs{},
                         {Lit(t, {}, {2}), Lit(t, {5}, {1, 2, 3, 4, 5}), Lit(t, {}, {4})}, {Lit(t, {5}, {2, 2, 3, 4, 4})}));
    out.push_back(Sample("clamp.full_bounds." + n, OpKind::kClamp, NoAttrs{},
                         {Lit(t, {3}, {0, 5, 2}), Lit(t, {3}, {1, 1, 9}), Lit(t, {3}, {3, 6, 4})}, {Lit(t, {3}, {1, 5, 4})}));
    // min > max: min(max(x, lo), hi) = hi.
    out.push_back(Sample("clamp.inverted." + n, OpKind::kClamp, NoAttrs{}, {Lit(t, {}, {5}), Lit(t, {1}, {3}), Lit(t, {}, {1})},
                         {Lit(t, {1}, {1})}));
  }
  for (DType t : kFloatDTypes)
    out.push_back(Sample("clamp.nan." + Name(t), OpKind::kClamp, NoAttrs{},
                         {Lit(t, {3}, {0, kNaN, 0}), Lit(t, {3}, {kNaN, 0.5, -0.0}), Lit(t, {3}, {1, 1, 1})},
                         {Lit(t, {3}, {kNaN, kNaN, 0})}));
  out.push_back(Sample("clamp.i8.extremes", OpKind::kClamp, NoAttrs{},
                       {Ints(DType::kI8, {}, {-100}), Ints(DType::kI8, {2}, {-128, 127}), Ints(DType::kI8, {}, {100})},
                       {Ints(DType::kI8, {2}, {-100, 100})}));
}

}  // namespace

void AddElementwiseSamples(std::vector<OpSample>& out) {
  AddUnaryNumeric(out);
  AddUnaryFloat(out);
  AddNot(out);
  AddBinaryGeneric(out);
  AddIntegerEdges(out);
  AddFloatEdges(out);
  AddLogic(out);
  AddCompare(out);
  AddSelectClamp(out);
}

}  // namespace axle::ir::samples
