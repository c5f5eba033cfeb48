// Op samples of the data-movement ops. Each case states which operand element lands where (flat
// indices worked out by hand), so it runs in every dtype the op accepts.
#include "testing/op_samples.h"

namespace axle::ir::samples {
namespace {

// A one-operand movement sample in every dtype: operand = Seq(t, in), expected picks `indices`.
void Moves(std::vector<OpSample>& out, const std::string& what, OpKind op, Attrs attrs, Shape in,
           Shape result, const std::vector<int64_t>& indices) {
  for (DType t : kAllDTypes) {
    const Literal x = Seq(t, in);
    out.push_back(Sample(fmt::format("{}.{}.{}", OpName(op), what, Name(t)), op, attrs, {x},
                         {Pick(result, x, indices)}));
  }
}

void AddBroadcastReshapeTranspose(std::vector<OpSample>& out) {
  using B = BroadcastInDimAttrs;
  const OpKind kB = OpKind::kBroadcastInDim;
  Moves(out, "rows", kB, B{{1}}, {3}, {2, 3}, {0, 1, 2, 0, 1, 2});
  Moves(out, "cols", kB, B{{0}}, {2}, {2, 3}, {0, 0, 0, 1, 1, 1});
  Moves(out, "scalar", kB, B{{}}, {}, {2, 2}, {0, 0, 0, 0});
  Moves(out, "size1", kB, B{{0, 1}}, {1, 3}, {2, 3}, {0, 1, 2, 0, 1, 2});
  Moves(out, "size1_inner", kB, B{{0, 2}}, {2, 1}, {2, 2, 3}, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  Moves(out, "identity", kB, B{{0, 1}}, {2, 2}, {2, 2}, {0, 1, 2, 3});
  Moves(out, "empty", kB, B{{1}}, {0}, {2, 0}, {});
  Moves(out, "to_empty", kB, B{{1}}, {3}, {0, 3}, {});

  const OpKind kR = OpKind::kReshape;
  Moves(out, "2d", kR, NoAttrs{}, {2, 3}, {3, 2}, {0, 1, 2, 3, 4, 5});
  Moves(out, "flatten", kR, NoAttrs{}, {2, 2, 2}, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
  Moves(out, "scalar", kR, NoAttrs{}, {}, {1, 1}, {0});
  Moves(out, "to_scalar", kR, NoAttrs{}, {1}, {}, {0});
  Moves(out, "empty", kR, NoAttrs{}, {0, 3}, {3, 0}, {});

  const OpKind kT = OpKind::kTranspose;
  Moves(out, "2d", kT, TransposeAttrs{{1, 0}}, {2, 3}, {3, 2}, {0, 3, 1, 4, 2, 5});
  // result[i, j, k] = x[j, k, i]; x strides (6, 2, 1).
  Moves(out, "3d", kT, TransposeAttrs{{2, 0, 1}}, {2, 3, 2}, {2, 2, 3}, {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
  Moves(out, "identity", kT, TransposeAttrs{{0, 1}}, {2, 2}, {2, 2}, {0, 1, 2, 3});
  Moves(out, "scalar", kT, TransposeAttrs{{}}, {}, {}, {0});
  Moves(out, "empty", kT, TransposeAttrs{{1, 0}}, {0, 2}, {2, 0}, {});
}

void AddSliceReverse(std::vector<OpSample>& out) {
  const OpKind kS = OpKind::kSlice;
  // x [2, 5] = 0..9; columns 1 and 3.
  Moves(out, "strided", kS, SliceAttrs{{0, 1}, {2, 5}, {1, 2}}, {2, 5}, {2, 2}, {1, 3, 6, 8});
  Moves(out, "1d", kS, SliceAttrs{{1}, {6}, {2}}, {6}, {3}, {1, 3, 5});
  Moves(out, "window", kS, SliceAttrs{{1, 1}, {2, 4}, {1, 1}}, {2, 5}, {1, 3}, {6, 7, 8});
  Moves(out, "empty", kS, SliceAttrs{{2}, {2}, {1}}, {4}, {0}, {});
  Moves(out, "scalar", kS, SliceAttrs{{}, {}, {}}, {}, {}, {0});

  const OpKind kV = OpKind::kReverse;
  Moves(out, "inner", kV, ReverseAttrs{{1}}, {2, 3}, {2, 3}, {2, 1, 0, 5, 4, 3});
  Moves(out, "both", kV, ReverseAttrs{{0, 1}}, {2, 3}, {2, 3}, {5, 4, 3, 2, 1, 0});
  Moves(out, "outer", kV, ReverseAttrs{{0}}, {2, 3}, {2, 3}, {3, 4, 5, 0, 1, 2});
  Moves(out, "none", kV, ReverseAttrs{{}}, {3}, {3}, {0, 1, 2});
  Moves(out, "empty", kV, ReverseAttrs{{0}}, {0}, {0}, {});
}

void AddDynamicSlices(std::vector<OpSample>& out) {
  // x [2, 5] = 0..9. Start indices are clamped to [0, dim - size] (XLA).
  struct Case {
    std::string what;
    DType index_dtype;
    int64_t r, c;
    std::vector<int64_t> picked;
  };
  const std::vector<Case> cases = {{"inside", DType::kI32, 1, 2, {7, 8}},
                                   {"clamp_high", DType::kI64, 5, 10, {8, 9}},
                                   {"clamp_low", DType::kI8, -3, -1, {0, 1}},
                                   {"unsigned", DType::kU32, 0, 4, {3, 4}},
                                   {"u8", DType::kU8, 200, 1, {6, 7}}};
  for (DType t : kAllDTypes) {
    const Literal x = Seq(t, {2, 5});
    for (const Case& c : cases)
      out.push_back(Sample(fmt::format("dynamic_slice.{}.{}", c.what, Name(t)), OpKind::kDynamicSlice,
                           DynamicSliceAttrs{{1, 2}}, {x, Ints(c.index_dtype, {}, {c.r}), Ints(c.index_dtype, {}, {c.c})},
                           {Pick({1, 2}, x, c.picked)}));
    out.push_back(Sample("dynamic_slice.empty." + Name(t), OpKind::kDynamicSlice, DynamicSliceAttrs{{0, 5}},
                         {x, Ints(DType::kI32, {}, {7}), Ints(DType::kI32, {}, {7})}, {Pick({0, 5}, x, {})}));
    out.push_back(Sample("dynamic_slice.scalar." + Name(t), OpKind::kDynamicSlice, DynamicSliceAttrs{{}},
                         {Seq(t, {})}, {Seq(t, {})}));

    // Update [1, 2] into x [2, 3] (elements 0..5); u = sources[1].
    const Literal y = Seq(t, {2, 3}, 1), u = Seq(t, {1, 2}, 10);
    auto dus = [&](const std::string& what, DType it, int64_t r, int64_t c, std::vector<From> from) {
      out.push_back(Sample(fmt::format("dynamic_update_slice.{}.{}", what, Name(t)), OpKind::kDynamicUpdateSlice,
                           NoAttrs{}, {y, u, Ints(it, {}, {r}), Ints(it, {}, {c})}, {Pick({2, 3}, {&y, &u}, from)}));
    };
    dus("inside", DType::kI32, 1, 0, {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {0, 5}});
    dus("clamp_high", DType::kI64, 9, 2, {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}});
    dus("clamp_low", DType::kI8, -1, -5, {{1, 0}, {1, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}});
    dus("u32", DType::kU32, 0, 1, {{0, 0}, {1, 0}, {1, 1}, {0, 3}, {0, 4}, {0, 5}});
  }
  out.push_back(Sample("dynamic_update_slice.empty_update.f32", OpKind::kDynamicUpdateSlice, NoAttrs{},
                       {Seq(DType::kF32, {2}), Lit(DType::kF32, {0}, {}), Ints(DType::kI32, {}, {1})},
                       {Seq(DType::kF32, {2})}));
}

void AddPadConcat(std::vector<OpSample>& out) {
  for (DType t : kAllDTypes) {
    const std::string n = Name(t);
    const Literal x = Seq(t, {2, 3}, 1), p = Seq(t, {}, 20);
    auto pad = [&](const std::string& what, const Literal& in, PadAttrs a, Shape s, std::vector<From> from) {
      out.push_back(Sample(fmt::format("pad.{}.{}", what, n), OpKind::kPad, std::move(a), {in, p},
                           {Pick(std::move(s), {&in, &p}, from)}));
    };
    const From P{1, 0};
    // dim 0: low 1, interior 1 -> rows land at 1 and 3 of 4; dim 1: low -1 crops column 0, high 2.
    pad("mixed", x, PadAttrs{{1, -1}, {0, 2}, {1, 0}}, {4, 4},
        {P, P, P, P, {0, 1}, {0, 2}, P, P, P, P, P, P, {0, 4}, {0, 5}, P, P});
    const Literal v = Seq(t, {4}, 1);
    pad("crop", v, PadAttrs{{-1}, {-2}, {0}}, {1}, {{0, 1}});
    pad("interior", Seq(t, {3}, 1), PadAttrs{{0}, {0}, {2}}, {7}, {{0, 0}, P, P, {0, 1}, P, P, {0, 2}});
    pad("crop_interior", Seq(t, {3}, 1), PadAttrs{{-1}, {-1}, {1}}, {3}, {P, {0, 1}, P});
    pad("empty_operand", Seq(t, {0}, 1), PadAttrs{{1}, {1}, {3}}, {2}, {P, P});
    pad("scalar", Seq(t, {}, 1), PadAttrs{{}, {}, {}}, {}, {{0, 0}});

    const Literal a = Seq(t, {2, 1}, 1), b = Seq(t, {2, 2}, 5), z = Seq(t, {2, 0}, 1);
    out.push_back(Sample("concatenate.inner." + n, OpKind::kConcatenate, ConcatenateAttrs{1}, {a, b, z},
                         {Pick({2, 3}, {&a, &b}, {{0, 0}, {1, 0}, {1, 1}, {0, 1}, {1, 2}, {1, 3}})}));
    out.push_back(Sample("concatenate.outer." + n, OpKind::kConcatenate, ConcatenateAttrs{0}, {b, b},
                         {Pick({4, 2}, b, {0, 1, 2, 3, 0, 1, 2, 3})}));
    out.push_back(Sample("concatenate.single." + n, OpKind::kConcatenate, ConcatenateAttrs{0}, {a}, {a}));
  }
}

void AddGather(std::vector<OpSample>& out) {
  using G = GatherAttrs;
  for (DType t : kAllDTypes) {
    const std::string n = Name(t);
    const Literal x = Seq(t, {3, 2}, 1);  // rows [0 1] [2 3] [4 5]
    auto gather = [&](const std::string& what, const Literal& in, Literal idx, G g, Shape s, std::vector<int64_t> picked) {
      out.push_back(Sample(fmt::format("gather.{}.{}", what, n), OpKind::kGather, g, {in, std::move(idx)},
                           {Pick(std::move(s), in, picked)}));
    };
    gather("rows", x, Ints(DType::kI32, {2}, {2, 0}), G{0, 0}, {2, 2}, {4, 5, 0, 1});
    gather("clamped", x, Ints(DType::kI64, {3}, {-1, 5, 1}), G{0, 0}, {3, 2}, {0, 1, 4, 5, 2, 3});
    // result[a, i, j] = x[a, idx[i, j]].
    gather("axis1", x, Ints(DType::kU8, {2, 2}, {1, 0, 0, 0}), G{1, 0}, {3, 2, 2}, {1, 0, 0, 0, 3, 2, 2, 2, 5, 4, 4, 4});
    gather("scalar_index", x, Ints(DType::kU32, {}, {1}), G{0, 0}, {2}, {2, 3});
    gather("empty_indices", x, Ints(DType::kI8, {0}, {}), G{0, 0}, {0, 2}, {});
    // batch_dims 1: y [2, 3]; result[b, i] = y[b, idx[b, i]].
    const Literal y = Seq(t, {2, 3}, 1);
    gather("batch", y, Ints(DType::kI32, {2, 2}, {2, 0, 1, 1}), G{1, 1}, {2, 2}, {2, 0, 4, 4});
  }
}

void AddScatterAdd(std::vector<OpSample>& out) {
  using G = GatherAttrs;
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    const Literal x = Lit(t, {3, 2}, {1, 2, 3, 4, 5, 6});
    const Literal u = Lit(t, {3, 2}, {10, 20, 30, 40, 50, 60});
    out.push_back(Sample("scatter_add.duplicates." + n, OpKind::kScatterAdd, G{0, 0}, {x, Ints(DType::kI32, {3}, {2, 0, 2}), u},
                         {Lit(t, {3, 2}, {31, 42, 3, 4, 65, 86})}));
    out.push_back(Sample("scatter_add.out_of_range." + n, OpKind::kScatterAdd, G{0, 0}, {x, Ints(DType::kI64, {3}, {-1, 3, 1}), u},
                         {Lit(t, {3, 2}, {1, 2, 53, 64, 5, 6})}));
    out.push_back(Sample("scatter_add.batch." + n, OpKind::kScatterAdd, G{1, 1},
                         {Lit(t, {2, 3}, {0, 0, 0, 0, 0, 0}), Ints(DType::kU8, {2, 1}, {2, 0}), Lit(t, {2, 1}, {5, 7})},
                         {Lit(t, {2, 3}, {0, 0, 5, 7, 0, 0})}));
    out.push_back(Sample("scatter_add.axis1." + n, OpKind::kScatterAdd, G{1, 0},
                         {Lit(t, {2, 2}, {1, 1, 1, 1}), Ints(DType::kU32, {}, {1}), Lit(t, {2}, {3, 4})},
                         {Lit(t, {2, 2}, {1, 4, 1, 5})}));
    out.push_back(Sample("scatter_add.empty." + n, OpKind::kScatterAdd, G{0, 0},
                         {Lit(t, {2}, {1, 2}), Ints(DType::kI8, {0}, {}), Lit(t, {0}, {})}, {Lit(t, {2}, {1, 2})}));
  }
  // Duplicates accumulate in order, rounding after each add: 256 + 1 + 1 stays 256 in bf16.
  out.push_back(Sample("scatter_add.in_order.bf16", OpKind::kScatterAdd, G{0, 0},
                       {Lit(DType::kBF16, {1}, {256}), Ints(DType::kI32, {2}, {0, 0}), Lit(DType::kBF16, {2}, {1, 1})},
                       {Lit(DType::kBF16, {1}, {256})}));
  out.push_back(Sample("scatter_add.wrap.i8", OpKind::kScatterAdd, G{0, 0},
                       {Ints(DType::kI8, {1}, {100}), Ints(DType::kI32, {1}, {0}), Ints(DType::kI8, {1}, {100})},
                       {Ints(DType::kI8, {1}, {-56})}));
}

}  // namespace

void AddMovementSamples(std::vector<OpSample>& out) {
  AddBroadcastReshapeTranspose(out);
  AddSliceReverse(out);
  AddDynamicSlices(out);
  AddPadConcat(out);
  AddGather(out);
  AddScatterAdd(out);
}

}  // namespace axle::ir::samples
