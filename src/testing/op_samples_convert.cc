// Op samples of convert and bitcast_convert: every (source, target) pair on values every type
// holds, then the edge cases: integer wrap, float -> integer truncation and saturation, NaN,
// -> bool, and single rounding to nearest even (see Note [Single rounding] in
// src/ir/interpreter_elementwise.cc).
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

double P2(int e) { return std::ldexp(1.0, e); }

OpSample Cvt(std::string what, Literal x, Literal expected) {
  std::string name = fmt::format("convert.{}.{}.{}", Name(x.dtype()), Name(expected.dtype()), what);
  return Sample(std::move(name), OpKind::kConvert, NoAttrs{}, {std::move(x)}, {std::move(expected)});
}
OpSample Bitcast(std::string what, Literal x, Literal expected) {
  std::string name = fmt::format("bitcast_convert.{}.{}.{}", Name(x.dtype()), Name(expected.dtype()), what);
  return Sample(std::move(name), OpKind::kBitcastConvert, NoAttrs{}, {std::move(x)}, {std::move(expected)});
}

void AddConvertMatrix(std::vector<OpSample>& out) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      out.push_back(Cvt("zero_one", Lit(from, {2, 2}, {0, 1, 1, 0}), Lit(to, {2, 2}, {0, 1, 1, 0})));
  for (DType from : kNumericDTypes)
    for (DType to : kNumericDTypes)
      out.push_back(Cvt("small", Lit(from, {5}, {0, 1, 2, 3, 100}), Lit(to, {5}, {0, 1, 2, 3, 100})));
  for (DType from : kSignedDTypes)
    for (DType to : kSignedDTypes)
      out.push_back(Cvt("negative", Lit(from, {2}, {-1, -100}), Lit(to, {2}, {-1, -100})));
  out.push_back(Cvt("scalar", Lit(DType::kF32, {}, {2}), Lit(DType::kI32, {}, {2})));
  out.push_back(Cvt("empty", Lit(DType::kF32, {0, 2}, {}), Lit(DType::kBF16, {0, 2}, {})));
}

// Integer -> integer: two's complement truncation (numpy's astype).
void AddIntWrap(std::vector<OpSample>& out) {
  using D = DType;
  const Literal i32 = Ints(D::kI32, {4}, {300, -1, 128, -129});
  out.push_back(Cvt("wrap", i32, Ints(D::kI8, {4}, {44, -1, -128, 127})));
  out.push_back(Cvt("wrap", i32, Ints(D::kU8, {4}, {44, 255, 128, 127})));
  out.push_back(Cvt("wrap", i32, Ints(D::kU32, {4}, {300, kU32Max, 128, 4294967167})));
  out.push_back(Cvt("wrap", i32, Ints(D::kI64, {4}, {300, -1, 128, -129})));
  const Literal i64 = Ints(D::kI64, {3}, {(int64_t{1} << 32) + 5, -1, kI64Max});
  out.push_back(Cvt("wrap", i64, Ints(D::kU32, {3}, {5, kU32Max, kU32Max})));
  out.push_back(Cvt("wrap", i64, Ints(D::kI32, {3}, {5, -1, -1})));
  out.push_back(Cvt("wrap", i64, Ints(D::kI8, {3}, {5, -1, -1})));
  out.push_back(Cvt("wrap", i64, Ints(D::kU8, {3}, {5, 255, 255})));
  const Literal u32 = Ints(D::kU32, {2}, {kU32Max, 2147483648});
  out.push_back(Cvt("wrap", u32, Ints(D::kI32, {2}, {-1, kI32Min})));
  out.push_back(Cvt("wrap", u32, Ints(D::kI64, {2}, {kU32Max, 2147483648})));
  out.push_back(Cvt("wrap", u32, Ints(D::kI8, {2}, {-1, 0})));
  out.push_back(Cvt("wrap", u32, Ints(D::kU8, {2}, {255, 0})));
  const Literal i8 = Ints(D::kI8, {2}, {-1, -128});
  out.push_back(Cvt("wrap", i8, Ints(D::kU32, {2}, {kU32Max, 4294967168})));
  out.push_back(Cvt("wrap", i8, Ints(D::kU8, {2}, {255, 128})));
  out.push_back(Cvt("wrap", i8, Ints(D::kI64, {2}, {-1, -128})));
  const Literal u8 = Ints(D::kU8, {2}, {255, 128});
  out.push_back(Cvt("wrap", u8, Ints(D::kI8, {2}, {-1, -128})));
  out.push_back(Cvt("wrap", u8, Ints(D::kI32, {2}, {255, 128})));
}

// Float -> integer: truncation toward zero, NaN -> 0, saturation at the target's range.
void AddFloatToInt(std::vector<OpSample>& out) {
  using D = DType;
  const Literal f32 = Lit(D::kF32, {10}, {1.75, -1.75, kNaN, kInf, -kInf, 3e9, -3e9, 2147483520, 0.5, -0.5});
  out.push_back(Cvt("trunc_sat", f32, Ints(D::kI32, {10}, {1, -1, 0, kI32Max, kI32Min, kI32Max, kI32Min, 2147483520, 0, 0})));
  out.push_back(Cvt("trunc_sat", f32, Ints(D::kI8, {10}, {1, -1, 0, 127, -128, 127, -128, 127, 0, 0})));
  out.push_back(Cvt("trunc_sat", f32, Ints(D::kU8, {10}, {1, 0, 0, 255, 0, 255, 0, 255, 0, 0})));
  out.push_back(Cvt("trunc_sat", f32, Ints(D::kU32, {10}, {1, 0, 0, kU32Max, 0, 3000000000, 0, 2147483520, 0, 0})));
  out.push_back(Cvt("trunc_sat", f32, Ints(D::kI64, {10}, {1, -1, 0, kI64Max, kI64Min, 3000000000, -3000000000, 2147483520, 0, 0})));
  const Literal f64 = Lit(D::kF64, {5}, {9.3e18, -9.3e18, 9223372036854774784.0, -P2(63), P2(63)});
  out.push_back(Cvt("trunc_sat", f64, Ints(D::kI64, {5}, {kI64Max, kI64Min, 9223372036854774784, kI64Min, kI64Max})));
  out.push_back(Cvt("trunc_sat", f64, Ints(D::kU32, {5}, {kU32Max, 0, kU32Max, 0, kU32Max})));
  out.push_back(Cvt("trunc_sat_u32", Lit(D::kF64, {3}, {4294967295.5, 4294967296.0, -0.99}), Ints(D::kU32, {3}, {kU32Max, kU32Max, 0})));
  const Literal bf16 = Lit(D::kBF16, {4}, {-2.5, 300, kNaN, -300});
  out.push_back(Cvt("trunc_sat", bf16, Ints(D::kI8, {4}, {-2, 127, 0, -128})));
  out.push_back(Cvt("trunc_sat", bf16, Ints(D::kU8, {4}, {0, 255, 0, 0})));
  const Literal f16 = Lit(D::kF16, {4}, {65504, -65504, 0.75, -kInf});
  out.push_back(Cvt("trunc_sat", f16, Ints(D::kI32, {4}, {65504, -65504, 0, kI32Min})));
  out.push_back(Cvt("trunc_sat", f16, Ints(D::kU8, {4}, {255, 0, 0, 0})));
  out.push_back(Cvt("trunc_sat", f16, Ints(D::kI8, {4}, {127, -128, 0, -128})));
}

// Anything -> bool is x != 0 (NaN -> true, -0 -> false).
void AddToBool(std::vector<OpSample>& out) {
  for (DType t : kFloatDTypes)
    out.push_back(Cvt("nonzero", Lit(t, {6}, {0, -0.0, kNaN, 0.5, kInf, -2}),
                      Bools({6}, {false, false, true, true, true, true})));
  out.push_back(Cvt("subnormal", Lit(DType::kF32, {1}, {P2(-149)}), Bools({1}, {true})));
  out.push_back(Cvt("nonzero", Ints(DType::kI32, {3}, {0, -5, 256}), Bools({3}, {false, true, true})));
  out.push_back(Cvt("nonzero", Ints(DType::kI64, {2}, {0, kI64Min}), Bools({2}, {false, true})));
  out.push_back(Cvt("nonzero", Ints(DType::kU8, {2}, {0, 255}), Bools({2}, {false, true})));
  out.push_back(Cvt("nonzero", Ints(DType::kU32, {2}, {kU32Max, 0}), Bools({2}, {true, false})));
  out.push_back(Cvt("nonzero", Ints(DType::kI8, {2}, {-128, 0}), Bools({2}, {true, false})));
}

// Integer -> float rounds once to nearest even.
void AddIntToFloat(std::vector<OpSample>& out) {
  using D = DType;
  out.push_back(Cvt("round", Ints(D::kI32, {4}, {16777217, 16777219, -16777217, kI32Max}),
                    Lit(D::kF32, {4}, {16777216, 16777220, -16777216, 2147483648.0})));
  out.push_back(Cvt("round", Ints(D::kI64, {3}, {(int64_t{1} << 53) + 1, (int64_t{1} << 53) + 3, kI64Max}),
                    Lit(D::kF64, {3}, {P2(53), P2(53) + 4, P2(63)})));
  // 2^60 + 2^36 + 1 is just above an f32 tie; through f64 it would land on the tie and round to
  // even (2^60).
  out.push_back(Cvt("single_round", Ints(D::kI64, {1}, {1152921573326323713}), Lit(D::kF32, {1}, {1152921642045800448.0})));
  // 2^30 + 2^22 + 1 is just above a bf16 tie; through f32 it would land on it and round to 2^30.
  out.push_back(Cvt("single_round", Ints(D::kI32, {6}, {257, 259, 65535, 1077936129, -1077936129, 255}),
                    Lit(D::kBF16, {6}, {256, 260, 65536, P2(30) + P2(23), -P2(30) - P2(23), 255})));
  out.push_back(Cvt("single_round", Ints(D::kI64, {1}, {1103806595073}), Lit(D::kBF16, {1}, {P2(40) + P2(33)})));
  out.push_back(Cvt("round_overflow", Ints(D::kI32, {6}, {2049, 2051, 65519, 65520, 70000, -65520}),
                    Lit(D::kF16, {6}, {2048, 2052, 65504, kInf, kInf, -kInf})));
  out.push_back(Cvt("round", Ints(D::kU32, {1}, {kU32Max}), Lit(D::kF16, {1}, {kInf})));
  out.push_back(Cvt("round", Ints(D::kU32, {1}, {kU32Max}), Lit(D::kBF16, {1}, {P2(32)})));
  out.push_back(Cvt("round", Ints(D::kU32, {1}, {kU32Max}), Lit(D::kF32, {1}, {P2(32)})));
  out.push_back(Cvt("exact", Ints(D::kU8, {2}, {255, 254}), Lit(D::kBF16, {2}, {255, 254})));
  out.push_back(Cvt("exact", Ints(D::kI8, {2}, {-128, 127}), Lit(D::kF16, {2}, {-128, 127})));
}

// Float -> float rounds the exact value once (f64 -> bf16/f16 never through a rounded f32).
void AddFloatToFloat(std::vector<OpSample>& out) {
  using D = DType;
  out.push_back(Cvt("round", Lit(D::kF64, {8}, {1 + P2(-24), 1 + P2(-24) + P2(-50), 1e300, 1e-50, -1e-50, kNaN, P2(-149), P2(-150)}),
                    Lit(D::kF32, {8}, {1, 1 + P2(-23), kInf, 0, -0.0, kNaN, P2(-149), 0})));
  out.push_back(Cvt("overflow", Lit(D::kF64, {4}, {0x1.ffffffp127, 0x1.fffffe8p127, -0x1.ffffffp127, 1e308}),
                    Lit(D::kF32, {4}, {kInf, 0x1.fffffep127, -kInf, kInf})));
  out.push_back(Cvt("single_round",
                    Lit(D::kF64, {9}, {1 + P2(-8) + P2(-30), 1 + P2(-8), 1 + 3 * P2(-8), 1e39, 3.4e38, -0.0, kNaN,
                                       3.3895313892515355e38, -1 - P2(-8) - P2(-40)}),
                    Lit(D::kBF16, {9}, {1 + P2(-7), 1, 1 + P2(-6), kInf, kInf, -0.0, kNaN, 3.3895313892515355e38, -1 - P2(-7)})));
  out.push_back(Cvt("single_round",
                    Lit(D::kF64, {8}, {1 + P2(-11) + P2(-40), 1 + P2(-11), 65519.99, 65520, P2(-25), P2(-25) + P2(-60), 3 * P2(-26), -P2(-25)}),
                    Lit(D::kF16, {8}, {1 + P2(-10), 1, 65504, kInf, 0, P2(-24), P2(-24), -0.0})));
  out.push_back(Cvt("round", Lit(D::kF32, {6}, {1 + P2(-8), 1 + 3 * P2(-8), kNaN, -0.0, 1 + P2(-8) + P2(-23), 3 * P2(-10)}),
                    Lit(D::kBF16, {6}, {1, 1 + P2(-6), kNaN, -0.0, 1 + P2(-7), 3 * P2(-10)})));
  out.push_back(Cvt("overflow", Bits(D::kF32, {1}, {0x7f7fffff}), Lit(D::kBF16, {1}, {kInf})));
  out.push_back(Cvt("round", Lit(D::kF32, {8}, {65504, 65520, P2(-26), 3 * P2(-26), 1 + P2(-11), 1 + P2(-11) + P2(-23), -0.0, kNaN}),
                    Lit(D::kF16, {8}, {65504, kInf, 0, P2(-24), 1, 1 + P2(-10), -0.0, kNaN})));
  out.push_back(Cvt("round", Lit(D::kBF16, {4}, {P2(17), P2(-30), 1.5, 1 + P2(-7)}), Lit(D::kF16, {4}, {kInf, 0, 1.5, 1 + P2(-7)})));
  out.push_back(Cvt("round", Lit(D::kF16, {4}, {1 + P2(-10), 65504, P2(-24), 1 + P2(-8) + P2(-10)}),
                    Lit(D::kBF16, {4}, {1, 65536, P2(-24), 1 + P2(-7)})));
  out.push_back(Cvt("exact", Bits(D::kF32, {1}, {0x3dcccccd}), Bits(D::kF64, {1}, {0x3fb99999a0000000})));
  out.push_back(Cvt("exact", Bits(D::kBF16, {2}, {0x3f81, 0xff80}), Bits(D::kF32, {2}, {0x3f810000, 0xff800000})));
  out.push_back(Cvt("exact", Bits(D::kF16, {2}, {0x0001, 0x7bff}), Lit(D::kF64, {2}, {P2(-24), 65504})));
}

void AddBitcast(std::vector<OpSample>& out) {
  using D = DType;
  out.push_back(Bitcast("one", Lit(D::kF32, {2}, {1, -2}), Ints(D::kU32, {2}, {0x3f800000, 0xc0000000})));
  out.push_back(Bitcast("one", Lit(D::kF32, {1}, {-0.0}), Ints(D::kI32, {1}, {kI32Min})));
  out.push_back(Bitcast("one", Ints(D::kU32, {1}, {0x7f800000}), Lit(D::kF32, {1}, {kInf})));
  out.push_back(Bitcast("one", Ints(D::kI32, {1}, {0x40490fdb}), Bits(D::kF32, {1}, {0x40490fdb})));
  out.push_back(Bitcast("same", Ints(D::kI32, {2}, {-1, 7}), Ints(D::kU32, {2}, {kU32Max, 7})));
  out.push_back(Bitcast("same", Ints(D::kU32, {1}, {kU32Max}), Ints(D::kI32, {1}, {-1})));
  out.push_back(Bitcast("one", Lit(D::kF64, {1}, {1}), Ints(D::kI64, {1}, {0x3ff0000000000000})));
  out.push_back(Bitcast("one", Ints(D::kI64, {1}, {kI64Min}), Lit(D::kF64, {1}, {-0.0})));
  out.push_back(Bitcast("one", Bits(D::kBF16, {2}, {0x3f80, 0x7fc0}), Bits(D::kF16, {2}, {0x3f80, 0x7fc0})));
  out.push_back(Bitcast("one", Bits(D::kF16, {1}, {0x3c00}), Bits(D::kBF16, {1}, {0x3c00})));
  out.push_back(Bitcast("same", Ints(D::kI8, {2}, {-1, -128}), Ints(D::kU8, {2}, {255, 128})));
  out.push_back(Bitcast("same", Ints(D::kU8, {1}, {200}), Ints(D::kI8, {1}, {-56})));
  out.push_back(Bitcast("identity", Lit(D::kF32, {2, 0}, {}), Lit(D::kF32, {2, 0}, {})));
  for (DType t : {D::kF32, D::kF64, D::kBF16, D::kF16, D::kI8, D::kI32, D::kI64, D::kU8, D::kU32})
    out.push_back(Bitcast("self", Seq(t, {3}), Seq(t, {3})));
}

}  // namespace

void AddConvertSamples(std::vector<OpSample>& out) {
  AddConvertMatrix(out);
  AddIntWrap(out);
  AddFloatToInt(out);
  AddToBool(out);
  AddIntToFloat(out);
  AddFloatToFloat(out);
  AddBitcast(out);
}

}  // namespace axle::ir::samples
