// Op samples of the sources (constant, iota, parameter), rng_bit_generator, the collectives
// (per-replica operands and results, 2 and 4 replicas, non-trivial groups), custom_call and
// optimization_barrier.
#include <limits>

#include "testing/op_samples.h"

namespace axle::ir::samples {
namespace {

void AddSources(std::vector<OpSample>& out) {
  for (DType t : kAllDTypes) {
    const std::string n = Name(t);
    for (const Literal& v : {Seq(t, {2, 2}), Seq(t, {}), Seq(t, {0, 3})})
      out.push_back(Sample(fmt::format("constant.{}.{}", v.shape().ToString(), n), OpKind::kConstant,
                           ConstantAttrs{v}, {}, {v}));
    out.push_back(Sample("parameter." + n, OpKind::kParameter, ParameterAttrs{0}, {Seq(t, {3})}, {Seq(t, {3})}));
    out.push_back(Sample("parameter.scalar." + n, OpKind::kParameter, ParameterAttrs{0}, {Seq(t, {})}, {Seq(t, {})}));
  }
  for (DType t : kNumericDTypes) {
    const std::string n = Name(t);
    out.push_back(Sample("iota.inner." + n, OpKind::kIota, IotaAttrs{1}, {}, {Lit(t, {2, 3}, {0, 1, 2, 0, 1, 2})}));
    out.push_back(Sample("iota.outer." + n, OpKind::kIota, IotaAttrs{0}, {}, {Lit(t, {2, 3}, {0, 0, 0, 1, 1, 1})}));
    out.push_back(Sample("iota.empty." + n, OpKind::kIota, IotaAttrs{1}, {}, {Lit(t, {0, 3}, {})}));
  }
  // Large iotas convert as `convert` does: integers wrap, floats round to nearest even.
  std::vector<int64_t> i8(300), u8(300);
  for (int64_t i = 0; i < 300; ++i) {
    i8[i] = i < 128 ? i : i - 256;
    u8[i] = i % 256;
  }
  out.push_back(Sample("iota.wrap.i8", OpKind::kIota, IotaAttrs{0}, {}, {Ints(DType::kI8, {300}, i8)}));
  out.push_back(Sample("iota.wrap.u8", OpKind::kIota, IotaAttrs{0}, {}, {Ints(DType::kU8, {300}, u8)}));
  std::vector<double> bf16(260), f16(2052);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<double>(i);
  bf16[257] = 256;  // tie between 256 and 258: even mantissa
  bf16[259] = 260;  // tie between 258 and 260
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<double>(i);
  f16[2049] = 2048;
  f16[2051] = 2052;
  out.push_back(Sample("iota.round.bf16", OpKind::kIota, IotaAttrs{0}, {}, {Lit(DType::kBF16, {260}, bf16)}));
  out.push_back(Sample("iota.round.f16", OpKind::kIota, IotaAttrs{0}, {}, {Lit(DType::kF16, {2052}, f16)}));
}

// Random123's known-answer vectors (tests/kat_vectors, "philox4x32 10"): counter, key -> output.
void AddRng(std::vector<OpSample>& out) {
  auto rng = [&](std::string what, std::vector<uint64_t> key, std::vector<uint64_t> counter, Shape shape,
                 std::vector<uint64_t> expected) {
    out.push_back(Sample("rng_bit_generator." + what, OpKind::kRngBitGenerator, NoAttrs{},
                         {Bits(DType::kU32, {2}, key), Bits(DType::kU32, {4}, counter)},
                         {Bits(DType::kU32, std::move(shape), expected)}));
  };
  rng("kat_zeros", {0, 0}, {0, 0, 0, 0}, {4}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  rng("kat_ones", {0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {4},
      {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  rng("kat_pi", {0xa4093822, 0x299f31d0}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {2, 2},
      {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  rng("scalar", {0, 0}, {0, 0, 0, 0}, {}, {0x6627e8d5});
  rng("partial_block", {0, 0}, {0, 0, 0, 0}, {3}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c});
  rng("empty", {0, 0}, {0, 0, 0, 0}, {0, 4}, {});
}

// Per-replica literals for the collectives: replica r's operand and expected result.
using PerReplica = std::vector<std::vector<Literal>>;
PerReplica Each(std::vector<Literal> lits) {
  PerReplica out;
  for (Literal& l : lits) out.push_back({std::move(l)});
  return out;
}

void AddReplicaId(std::vector<OpSample>& out) {
  auto id = [](int32_t r) { return Literal::FromVector<int32_t>(DType::kI32, Shape({}), {r}); };
  out.push_back(ReplicaSample("replica_id.r3", OpKind::kReplicaId, NoAttrs{}, {{}, {}, {}}, Each({id(0), id(1), id(2)})));
}

void AddAllReduce(std::vector<OpSample>& out) {
  using K = ReduceKind;
  auto ar = [&](std::string what, K kind, ReplicaGroups groups, std::vector<Literal> in, std::vector<Literal> want) {
    std::string name = fmt::format("all_reduce.{}.{}.{}", EnumName(kind), what, Name(in[0].dtype()));
    out.push_back(ReplicaSample(std::move(name), OpKind::kAllReduce, AllReduceAttrs{kind, std::move(groups)},
                                Each(std::move(in)), Each(std::move(want))));
  };
  for (DType t : kNumericDTypes) {
    auto L = [&](std::vector<double> v) { return Lit(t, {static_cast<int64_t>(v.size())}, v); };
    ar("r2", K::kSum, {}, {L({1, 2}), L({3, 4})}, {L({4, 6}), L({4, 6})});
    ar("r4_groups", K::kSum, {{0, 2}, {1, 3}}, {L({1, 2}), L({3, 4}), L({5, 6}), L({7, 8})},
       {L({6, 8}), L({10, 12}), L({6, 8}), L({10, 12})});
    ar("r4", K::kMax, {}, {L({1, 8}), L({3, 4}), L({7, 6}), L({5, 2})}, {L({7, 8}), L({7, 8}), L({7, 8}), L({7, 8})});
    ar("r2", K::kProd, {{1, 0}}, {L({2, 3}), L({4, 5})}, {L({8, 15}), L({8, 15})});
    ar("r4_groups", K::kMin, {{3, 0}, {2, 1}}, {L({1, 5}), L({4, 2}), L({3, 3}), L({2, 9})},
       {L({1, 5}), L({3, 2}), L({3, 2}), L({1, 5})});
    ar("empty", K::kSum, {}, {L({}), L({})}, {L({}), L({})});
  }
  for (DType t : kIntDTypes) {
    ar("r2", K::kAnd, {}, {Ints(t, {2}, {12, 6}), Ints(t, {2}, {10, 3})}, {Ints(t, {2}, {8, 2}), Ints(t, {2}, {8, 2})});
    ar("r2", K::kOr, {}, {Ints(t, {2}, {12, 6}), Ints(t, {2}, {10, 3})}, {Ints(t, {2}, {14, 7}), Ints(t, {2}, {14, 7})});
  }
  const Literal ba = Bools({3}, {true, true, false}), bb = Bools({3}, {true, false, false});
  ar("r2", K::kAnd, {}, {ba, bb}, {Bools({3}, {true, false, false}), Bools({3}, {true, false, false})});
  ar("r2", K::kOr, {}, {ba, bb}, {Bools({3}, {true, true, false}), Bools({3}, {true, true, false})});
  // Float sums combine in double and round once; NaN propagates through max; ints wrap.
  const Literal one_f32 = Lit(DType::kF32, {}, {1});
  ar("double_acc", K::kSum, {{3, 2, 1, 0}},
     {Lit(DType::kF32, {}, {1e8}), Lit(DType::kF32, {}, {1}), Lit(DType::kF32, {}, {-1e8}), Lit(DType::kF32, {}, {0})},
     {one_f32, one_f32, one_f32, one_f32});
  const Literal b258 = Lit(DType::kBF16, {}, {258});
  ar("double_acc", K::kSum, {},
     {Lit(DType::kBF16, {}, {256}), Lit(DType::kBF16, {}, {1}), Lit(DType::kBF16, {}, {1}), Lit(DType::kBF16, {}, {0})},
     {b258, b258, b258, b258});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ar("nan", K::kMax, {}, {Lit(DType::kF32, {2}, {nan, 1}), Lit(DType::kF32, {2}, {1, 2})},
     {Lit(DType::kF32, {2}, {nan, 2}), Lit(DType::kF32, {2}, {nan, 2})});
  ar("wrap", K::kSum, {}, {Ints(DType::kI8, {1}, {100}), Ints(DType::kI8, {1}, {100})},
     {Ints(DType::kI8, {1}, {-56}), Ints(DType::kI8, {1}, {-56})});
}

void AddReduceScatter(std::vector<OpSample>& out) {
  using K = ReduceKind;
  auto rs = [&](std::string what, K kind, int64_t dim, ReplicaGroups groups, std::vector<Literal> in,
                std::vector<Literal> want) {
    std::string name = fmt::format("reduce_scatter.{}.{}.{}", EnumName(kind), what, Name(in[0].dtype()));
    out.push_back(ReplicaSample(std::move(name), OpKind::kReduceScatter, ReduceScatterAttrs{kind, dim, std::move(groups)},
                                Each(std::move(in)), Each(std::move(want))));
  };
  for (DType t : kNumericDTypes) {
    auto L = [&](Shape s, std::vector<double> v) { return Lit(t, std::move(s), v); };
    rs("r2", K::kSum, 0, {}, {L({4}, {1, 2, 3, 4}), L({4}, {10, 20, 30, 40})}, {L({2}, {11, 22}), L({2}, {33, 44})});
    // Group [1, 0]: replica 1 is member 0 and keeps chunk 0.
    rs("r4_groups", K::kSum, 1, {{1, 0}, {2, 3}}, {L({1, 2}, {1, 2}), L({1, 2}, {3, 4}), L({1, 2}, {5, 6}), L({1, 2}, {7, 8})},
       {L({1, 1}, {6}), L({1, 1}, {4}), L({1, 1}, {12}), L({1, 1}, {14})});
    rs("r4", K::kMax, 0, {}, {L({4}, {1, 2, 3, 4}), L({4}, {4, 3, 2, 1}), L({4}, {0, 0, 9, 0}), L({4}, {1, 1, 1, 1})},
       {L({1}, {4}), L({1}, {3}), L({1}, {9}), L({1}, {4})});
    rs("r2", K::kMin, 0, {{0, 1}}, {L({2, 2}, {1, 5, 3, 3}), L({2, 2}, {4, 2, 1, 7})}, {L({1, 2}, {1, 2}), L({1, 2}, {1, 3})});
  }
  rs("r2", K::kAnd, 0, {}, {Bools({2}, {true, true}), Bools({2}, {false, true})}, {Bools({1}, {false}), Bools({1}, {true})});
  rs("r2", K::kOr, 0, {}, {Ints(DType::kU32, {2}, {1, 4}), Ints(DType::kU32, {2}, {2, 4})},
     {Ints(DType::kU32, {1}, {3}), Ints(DType::kU32, {1}, {4})});
  std::vector<Literal> in, want;
  for (double v : {256, 1, 1, 0}) {
    in.push_back(Lit(DType::kBF16, {4}, {v, v, v, v}));
    want.push_back(Lit(DType::kBF16, {1}, {258}));
  }
  rs("double_acc", K::kSum, 0, {}, std::move(in), std::move(want));
}

// Data-moving collectives in every dtype: replica operands and results pick from one source.
void AddMovingCollectives(std::vector<OpSample>& out) {
  for (DType t : kAllDTypes) {
    const std::string n = Name(t);
    const Literal s = Seq(t, {16});
    auto P = [&](Shape shape, std::vector<int64_t> idx) { return Pick(std::move(shape), s, idx); };
    auto add = [&](std::string what, OpKind op, Attrs attrs, std::vector<Literal> in, std::vector<Literal> want) {
      out.push_back(ReplicaSample(fmt::format("{}.{}.{}", OpName(op), what, n), op, std::move(attrs), Each(std::move(in)),
                                  Each(std::move(want))));
    };
    const OpKind kAG = OpKind::kAllGather;
    add("r2", kAG, AllGatherAttrs{0, {}}, {P({2}, {0, 1}), P({2}, {2, 3})}, {P({4}, {0, 1, 2, 3}), P({4}, {0, 1, 2, 3})});
    add("r4_groups", kAG, AllGatherAttrs{1, {{0, 1}, {2, 3}}}, {P({1, 2}, {0, 1}), P({1, 2}, {2, 3}), P({1, 2}, {4, 5}), P({1, 2}, {6, 7})},
        {P({1, 4}, {0, 1, 2, 3}), P({1, 4}, {0, 1, 2, 3}), P({1, 4}, {4, 5, 6, 7}), P({1, 4}, {4, 5, 6, 7})});
    add("r4_group_order", kAG, AllGatherAttrs{0, {{1, 0}, {3, 2}}}, {P({1}, {0}), P({1}, {1}), P({1}, {2}), P({1}, {3})},
        {P({2}, {1, 0}), P({2}, {1, 0}), P({2}, {3, 2}), P({2}, {3, 2})});
    add("r4", kAG, AllGatherAttrs{0, {}}, {P({2}, {0, 1}), P({2}, {2, 3}), P({2}, {4, 5}), P({2}, {6, 7})},
        {P({8}, {0, 1, 2, 3, 4, 5, 6, 7}), P({8}, {0, 1, 2, 3, 4, 5, 6, 7}), P({8}, {0, 1, 2, 3, 4, 5, 6, 7}),
         P({8}, {0, 1, 2, 3, 4, 5, 6, 7})});

    const OpKind kA2A = OpKind::kAllToAll;
    add("r2", kA2A, AllToAllAttrs{0, 0, {}}, {P({2}, {0, 1}), P({2}, {2, 3})}, {P({2}, {0, 2}), P({2}, {1, 3})});
    add("r2_split1", kA2A, AllToAllAttrs{1, 0, {}}, {P({1, 2}, {0, 1}), P({1, 2}, {2, 3})}, {P({2, 1}, {0, 2}), P({2, 1}, {1, 3})});
    // Group [0, 3]: replica 0 is member 0, replica 3 member 1.
    add("r4_groups", kA2A, AllToAllAttrs{0, 1, {{0, 3}, {1, 2}}},
        {P({2, 1}, {0, 1}), P({2, 1}, {2, 3}), P({2, 1}, {4, 5}), P({2, 1}, {6, 7})},
        {P({1, 2}, {0, 6}), P({1, 2}, {2, 4}), P({1, 2}, {3, 5}), P({1, 2}, {1, 7})});
    add("r4", kA2A, AllToAllAttrs{0, 0, {}},
        {P({4}, {0, 1, 2, 3}), P({4}, {4, 5, 6, 7}), P({4}, {8, 9, 10, 11}), P({4}, {12, 13, 14, 15})},
        {P({4}, {0, 4, 8, 12}), P({4}, {1, 5, 9, 13}), P({4}, {2, 6, 10, 14}), P({4}, {3, 7, 11, 15})});

    const OpKind kCP = OpKind::kCollectivePermute;
    add("swap", kCP, CollectivePermuteAttrs{{{0, 1}, {1, 0}}}, {P({2}, {0, 1}), P({2}, {2, 3})}, {P({2}, {2, 3}), P({2}, {0, 1})});
    const Literal zero = Literal(TensorType(t, Shape{1}));
    add("shift", kCP, CollectivePermuteAttrs{{{0, 1}, {1, 2}, {2, 3}}}, {P({1}, {0}), P({1}, {1}), P({1}, {2}), P({1}, {3})},
        {zero, P({1}, {0}), P({1}, {1}), P({1}, {2})});
    add("none", kCP, CollectivePermuteAttrs{{}}, {P({1}, {0}), P({1}, {1}), P({1}, {2}), P({1}, {3})}, {zero, zero, zero, zero});
  }
}

void AddEscapes(std::vector<OpSample>& out) {
  out.push_back(Sample("custom_call.scale2", OpKind::kCustomCall, CustomCallAttrs{"sample.scale2", ""},
                       {Lit(DType::kF32, {3}, {1, -2, 3.5})}, {Lit(DType::kF32, {3}, {2, -4, 7})}));
  out.push_back(Sample("custom_call.two_results", OpKind::kCustomCall, CustomCallAttrs{"sample.sum_and_count", "cfg"},
                       {Lit(DType::kF32, {4}, {1, 2, 3, 4})}, {Lit(DType::kF32, {}, {10}), Ints(DType::kI32, {}, {4})}));
  for (DType t : kAllDTypes) {
    out.push_back(Sample("optimization_barrier." + Name(t), OpKind::kOptimizationBarrier, NoAttrs{},
                         {Seq(t, {2}), Seq(DType::kI32, {3})}, {Seq(t, {2}), Seq(DType::kI32, {3})}));
  }
  // Fused kernels of each kind, as the fuse pass writes them (their callee in `functions`).
  auto fusion = [&](std::string name, const char* kind, std::vector<Literal> operands, std::vector<Literal> expected,
                    std::string callee) {
    OpSample s = Sample("fusion.f32." + name, OpKind::kFusion, FusionAttrs{kind, "fused"}, std::move(operands),
                        std::move(expected));
    s.functions = std::move(callee);
    out.push_back(std::move(s));
  };
  // Two outputs; 0 * -2 is -0.
  fusion("loop", "loop", {Lit(DType::kF32, {4}, {1, -2, 3.5, 0.5}), Lit(DType::kF32, {4}, {2, 2, -1, 4})},
         {Lit(DType::kF32, {4}, {3, -0.0, 8.75, 2.25}), Lit(DType::kF32, {4}, {3, 0, 2.5, 4.5})},
         "func @fused {\n"
         "  %p0 = parameter() {index=0} : f32[4]\n"
         "  %p1 = parameter() {index=1} : f32[4]\n"
         "  %a = add(%p0, %p1) : f32[4]\n"
         "  %m = mul(%a, %p0) : f32[4]\n"
         "  return %m, %a\n"
         "}");
  fusion("reduce", "reduce", {Lit(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6})}, {Lit(DType::kF32, {2}, {14, 77})},
         "func @fused {\n"
         "  %p0 = parameter() {index=0} : f32[2,3]\n"
         "  %s = mul(%p0, %p0) : f32[2,3]\n"
         "  %r = reduce(%s) {kind=sum, dims=[1]} : f32[2]\n"
         "  return %r\n"
         "}");
  fusion("rows", "rows", {Lit(DType::kF32, {2, 3}, {1, 5, 3, -2, 0, 4})},
         {Lit(DType::kF32, {2, 3}, {-4, 0, -2, -6, -4, 0}), Lit(DType::kF32, {2}, {5, 4})},
         "func @fused {\n"
         "  %p0 = parameter() {index=0} : f32[2,3]\n"
         "  %mx = reduce(%p0) {kind=max, dims=[1]} : f32[2]\n"
         "  %b = broadcast_in_dim(%mx) {dims=[0]} : f32[2,3]\n"
         "  %d = sub(%p0, %b) : f32[2,3]\n"
         "  return %d, %mx\n"
         "}");
  out.push_back(Sample("optimization_barrier.single", OpKind::kOptimizationBarrier, NoAttrs{},
                       {Lit(DType::kF32, {0}, {})}, {Lit(DType::kF32, {0}, {})}));
}

}  // namespace

void AddMiscSamples(std::vector<OpSample>& out) {
  AddSources(out);
  AddRng(out);
  AddReplicaId(out);
  AddAllReduce(out);
  AddReduceScatter(out);
  AddMovingCollectives(out);
  AddEscapes(out);
}

}  // namespace axle::ir::samples
