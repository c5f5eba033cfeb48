// Op samples generated once by scripts/make_op_goldens.py with NumPy and exact rational rounding
// (src/testing/op_goldens.inc): transcendental functions, float arithmetic, conversions
// near rounding ties, accumulating ops, and Philox counters with carries.
#include "testing/op_samples.h"

namespace axle::ir::samples {
namespace {

struct GoldenTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint64_t> bits;
};

struct GoldenCase {
  const char* name;
  const char* op;
  std::vector<GoldenTensor> operands;
  GoldenTensor expected;
  int64_t ulps;
};

const std::vector<GoldenCase>& Goldens() {
  static const std::vector<GoldenCase>* goldens = new std::vector<GoldenCase>{
#include "testing/op_goldens.inc"
  };
  return *goldens;
}

// The attributes the generator assumed for each op.
Attrs GoldenAttrs(OpKind op) {
  switch (op) {
    case OpKind::kReduce: return ReduceAttrs{ReduceKind::kSum, {1}};
    case OpKind::kDotGeneral: return DotGeneralAttrs{{}, {}, {1}, {0}};
    case OpKind::kCumsum: return CumsumAttrs{1, false};
    default: return DefaultAttrs(op);
  }
}

}  // namespace

void AddGoldenSamples(std::vector<OpSample>& out) {
  for (const GoldenCase& g : Goldens()) {
    const std::optional<OpKind> op = ParseOpKind(g.op);
    AXLE_CHECK(op.has_value(), "golden {} names unknown op {}", g.name, g.op);
    std::vector<Literal> operands;
    for (const GoldenTensor& t : g.operands) operands.push_back(Bits(t.dtype, Shape(t.shape), t.bits));
    out.push_back(Sample(std::string("golden.") + g.name, *op, GoldenAttrs(*op), std::move(operands),
                         {Bits(g.expected.dtype, Shape(g.expected.shape), g.expected.bits)}, g.ulps));
  }
}

}  // namespace axle::ir::samples
