// The op mix of the f32/f64 elementwise-heavy random programs, shared by codegen_test.cc and
// compiler_fuzz_test.cc (what fusion groups: unary/binary float math, compare/select, bool
// logic, and the movement ops and reductions around them).
#pragma once

#include <vector>

#include "ir/op.h"

namespace axle::testing {

inline const std::vector<ir::OpKind>& ElementwiseHeavyOps() {
  using ir::OpKind;
  static const std::vector<OpKind> ops = {
      OpKind::kNeg, OpKind::kAbs, OpKind::kExp, OpKind::kLog, OpKind::kLog1p,
      OpKind::kTanh, OpKind::kLogistic, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kSin,
      OpKind::kCos, OpKind::kErf, OpKind::kFloor, OpKind::kCeil, OpKind::kSign,
      OpKind::kIsFinite, OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv,
      OpKind::kRem, OpKind::kPow, OpKind::kMax, OpKind::kMin, OpKind::kAtan2,
      OpKind::kCompare, OpKind::kSelect, OpKind::kClamp, OpKind::kConvert,
      OpKind::kBroadcastInDim, OpKind::kReshape, OpKind::kReduce, OpKind::kTranspose,
      OpKind::kNot, OpKind::kAnd, OpKind::kOr, OpKind::kXor, OpKind::kSlice};
  return ops;
}

}  // namespace axle::testing
