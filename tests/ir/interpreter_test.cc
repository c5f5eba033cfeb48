// Tests of the reference interpreter: the op-sample table (one test per sample), table coverage,
// and whole programs (an MLP, replicated programs, argument and memory errors, custom calls).
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "core/flags.h"
#include "ir/builder.h"
#include "ir/shape_inference.h"
#include "testing/op_samples.h"

namespace axle::ir {
namespace {

using samples::AllOpSamples;
using samples::OpSample;

std::string TestName(const std::string& sample_name) {
  std::string out;
  for (char c : sample_name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// ---------------------------------------------------------------------------------------------
// The op-sample table.

class OpSampleTest : public ::testing::TestWithParam<const OpSample*> {
 protected:
  static void SetUpTestSuite() { samples::RegisterSampleCustomCalls(); }
};

TEST_P(OpSampleTest, MatchesExpected) {
  const OpSample& s = *GetParam();
  std::unique_ptr<Module> m = samples::BuildSampleModule(s);
  std::vector<std::vector<Literal>> got;
  if (s.num_replicas() == 1)
    got.push_back(Evaluate(*m->entry(), s.operands[0]));
  else
    got = EvaluateReplicated(*m->entry(), s.operands);
  ASSERT_EQ(got.size(), s.expected.size());
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), s.expected[r].size()) << "replica " << r;
    for (size_t i = 0; i < got[r].size(); ++i) {
      const std::string diff = samples::CompareLiterals(got[r][i], s.expected[r][i], s.ulps);
      EXPECT_TRUE(diff.empty()) << s.name << ", replica " << r << ", result " << i << ": " << diff;
    }
  }
}

std::vector<const OpSample*> SamplePointers() {
  std::vector<const OpSample*> out;
  for (const OpSample& s : AllOpSamples()) out.push_back(&s);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, OpSampleTest, ::testing::ValuesIn(SamplePointers()),
                         [](const ::testing::TestParamInfo<const OpSample*>& info) {
                           return TestName(info.param->name);
                         });

TEST(OpSampleTable, EveryOpHasAKernelAShapeRuleAndSamples) {
  std::map<OpKind, int> counts;
  for (const OpSample& s : AllOpSamples()) ++counts[s.op];
  for (const OpInfo& info : AllOps()) {
    EXPECT_TRUE(HasInterpreterKernel(info.kind)) << info.name << " has no interpreter kernel";
    EXPECT_NE(GetShapeRule(info.kind), nullptr) << info.name << " has no shape rule";
    EXPECT_GT(counts[info.kind], 0) << info.name << " has no op sample";
  }
}

TEST(OpSampleTable, NamesAreUnique) {
  std::set<std::string> names;
  for (const OpSample& s : AllOpSamples())
    EXPECT_TRUE(names.insert(TestName(s.name)).second) << "duplicate sample name " << s.name;
}

TEST(OpSampleTable, SamplesAreWellFormed) {
  for (const OpSample& s : AllOpSamples()) {
    ASSERT_GE(s.num_replicas(), 1) << s.name;
    EXPECT_EQ(s.expected.size(), s.operands.size()) << s.name;
    // replica_id is local but means something only on several replicas.
    EXPECT_EQ(GetOpInfo(s.op).Has(kCollective) || s.op == OpKind::kReplicaId, s.num_replicas() > 1) << s.name;
  }
}

// The dtype a sample is "about": the branches of select, the result of operand-less ops,
// otherwise operand 0.
DType KeyDType(const OpSample& s) {
  if (s.op == OpKind::kSelect) return s.operands[0][1].dtype();
  if (s.operands[0].empty()) return s.expected[0][0].dtype();
  return s.operands[0][0].dtype();
}

// For every op, every dtype its shape rule accepts (substituted for the key dtype of its first
// sample) must appear in some sample. custom_call and fusion accept anything by design (their
// types are declared; a fusion's are those of the function it calls) and are exempt.
TEST(OpSampleTable, CoversEveryDTypeTheShapeRuleAccepts) {
  std::map<OpKind, std::vector<const OpSample*>> by_op;
  for (const OpSample& s : AllOpSamples()) by_op[s.op].push_back(&s);
  for (const auto& [op, list] : by_op) {
    if (op == OpKind::kCustomCall || op == OpKind::kFusion) continue;
    std::set<DType> covered;
    for (const OpSample* s : list) covered.insert(KeyDType(*s));
    const OpSample& first = *list[0];
    const DType key = KeyDType(first);
    for (DType d : samples::kAllDTypes) {
      bool substituted = false;  // replica_id has no operands and a fixed result type
      auto substitute = [&](TensorType t) {
        if (t.dtype == key) t.dtype = d, substituted = true;
        return t;
      };
      std::vector<TensorType> operands, declared;
      for (const Literal& l : first.operands[0]) operands.push_back(substitute(l.type()));
      for (const TensorType& t : first.declared) declared.push_back(substitute(t));
      bool accepted = true;
      try {
        if (op != OpKind::kParameter)
          InferResultTypes(op, operands, first.attrs, declared, ShapeContext{first.num_replicas()});
      } catch (const Error&) {
        accepted = false;
      }
      if (accepted && substituted) {
        EXPECT_TRUE(covered.count(d)) << OpName(op) << " accepts " << DTypeName(d)
                                      << " but no sample uses it";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Whole programs.

Literal F32(Shape shape, std::vector<float> values) {
  return Literal::FromVector<float>(DType::kF32, std::move(shape), values);
}

Value* Broadcast(Builder& b, Value* x, Shape shape, std::vector<int64_t> dims) {
  return b.BroadcastInDim(x, std::move(shape), std::move(dims));
}

// y = relu(x w1 + b1) w2 + b2 with hand-computed values.
TEST(InterpreterProgram, TwoLayerMlp) {
  Module m("mlp");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, {DType::kF32, {2, 3}}, "x");    // x: [B=2, 3]
  Value* w1 = b.Parameter(1, {DType::kF32, {3, 4}}, "w1");  // w1: [3, H=4]
  Value* b1 = b.Parameter(2, {DType::kF32, {4}}, "b1");
  Value* w2 = b.Parameter(3, {DType::kF32, {4, 2}}, "w2");  // w2: [H, 2]
  Value* b2 = b.Parameter(4, {DType::kF32, {2}}, "b2");
  Value* h = b.Add(b.MatMul(x, w1), Broadcast(b, b1, {2, 4}, {1}));  // h: [2, 4]
  Value* zero = Broadcast(b, b.Scalar(DType::kF32, 0), {2, 4}, {});
  Value* relu = b.Max(h, zero);
  Value* y = b.Add(b.MatMul(relu, w2), Broadcast(b, b2, {2, 2}, {1}));  // y: [2, 2]
  b.Return({y, relu});

  std::vector<Literal> out = Evaluate(*m.entry(), {F32({2, 3}, {1, 2, 3, -1, 0, 1}),
                                                   F32({3, 4}, {1, 0, -1, 2, 0, 1, 1, -1, 1, 1, 0, 0}),
                                                   F32({4}, {0, -1, 1, 0.5}),
                                                   F32({4, 2}, {1, 0, 0, 1, 1, 1, 2, -2}),
                                                   F32({2}, {0.25, -0.25})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], F32({2, 2}, {7.25, 4.75, 2.25, 1.75})) << out[0].ToString();
  EXPECT_EQ(out[1], F32({2, 4}, {4, 4, 2, 0.5, 0, 0, 2, 0})) << out[1].ToString();
}

// Data parallel: each replica multiplies its shard, then all_reduce sums the partial products.
TEST(InterpreterProgram, ReplicatedMatmulWithAllReduce) {
  Module m("dp");
  m.set_num_replicas(2);
  Builder b(m.AddFunction("main"), ShapeContext{2});
  Value* x = b.Parameter(0, {DType::kF32, {1, 2}});
  Value* w = b.Parameter(1, {DType::kF32, {2, 1}});
  Value* partial = b.MatMul(x, w);
  Value* total = b.Build1(OpKind::kAllReduce, {partial}, AllReduceAttrs{ReduceKind::kSum, {}});
  b.Return({partial, total});
  auto out = EvaluateReplicated(*m.entry(), {{F32({1, 2}, {1, 2}), F32({2, 1}, {3, 4})},
                                             {F32({1, 2}, {5, 6}), F32({2, 1}, {1, 1})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0][0], F32({1, 1}, {11}));
  EXPECT_EQ(out[1][0], F32({1, 1}, {11}));
  EXPECT_EQ(out[0][1], F32({1, 1}, {22}));
  EXPECT_EQ(out[1][1], F32({1, 1}, {22}));
}

Module OneParamNeg(TensorType t) {
  Module m("neg");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, t, "x");
  b.Return({b.Unary(OpKind::kNeg, x)});
  return m;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(InterpreterErrors, ArgumentCount) {
  Module m = OneParamNeg({DType::kF32, {3}});
  const std::string e = ErrorOf([&] { Evaluate(*m.entry(), {}); });
  EXPECT_NE(e.find("expected 1 arguments, got 0"), std::string::npos) << e;
}

TEST(InterpreterErrors, ArgumentTypeNamesIndexAndTypes) {
  Module m("mlp");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, {DType::kF32, {4, 8}}, "x");
  Value* w = b.Parameter(1, {DType::kF32, {8, 2}}, "w");
  b.Return({b.MatMul(x, w)});
  const std::string e = ErrorOf([&] {
    Evaluate(*m.entry(), {Literal(TensorType(DType::kF32, {4, 8})), Literal(TensorType(DType::kF32, {3}))});
  });
  EXPECT_NE(e.find("argument 1 has type f32[3], but parameter 1 (%w) expects f32[8,2]"), std::string::npos) << e;
  const std::string e2 = ErrorOf([&] {
    Evaluate(*m.entry(), {Literal(TensorType(DType::kBF16, {4, 8})), Literal(TensorType(DType::kF32, {8, 2}))});
  });
  EXPECT_NE(e2.find("argument 0 has type bf16[4,8]"), std::string::npos) << e2;
}

TEST(InterpreterErrors, ReplicaArguments) {
  Module m = OneParamNeg({DType::kF32, {3}});
  EXPECT_NE(ErrorOf([&] { EvaluateReplicated(*m.entry(), {}); }).find("at least one replica"), std::string::npos);
  const std::string e = ErrorOf([&] {
    EvaluateReplicated(*m.entry(), {{Literal(TensorType(DType::kF32, {3}))}, {Literal(TensorType(DType::kI32, {3}))}});
  });
  EXPECT_NE(e.find("argument 0 (replica 1) has type i32[3]"), std::string::npos) << e;
}

TEST(InterpreterErrors, CollectiveBuiltForOtherReplicaCount) {
  Module m("ag");
  Builder b(m.AddFunction("main"), ShapeContext{2});
  Value* x = b.Parameter(0, {DType::kF32, {1}});
  b.Return({b.Build1(OpKind::kAllGather, {x}, AllGatherAttrs{0, {}})});
  const Literal one = F32({1}, {1});
  EXPECT_EQ(EvaluateReplicated(*m.entry(), {{one}, {one}})[1][0], F32({2}, {1, 1}));
  const std::string e = ErrorOf([&] { EvaluateReplicated(*m.entry(), {{one}, {one}, {one}, {one}}); });
  EXPECT_NE(e.find("all_gather"), std::string::npos) << e;
  EXPECT_NE(e.find("4 replica"), std::string::npos) << e;
}

TEST(InterpreterErrors, MalformedNodeIsRejected) {
  Module m("bad");
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, {DType::kF32, {2}}, "x");
  Node* n = f->AddNode(OpKind::kAdd, {x, x}, NoAttrs{}, {TensorType(DType::kF32, {3})});  // wrong type
  f->set_results({n->result()});
  const std::string e = ErrorOf([&] { Evaluate(*f, {F32({2}, {1, 2})}); });
  EXPECT_NE(e.find("shape rule gives (f32[2])"), std::string::npos) << e;
}

class InterpreterMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = flags::interpreter_max_bytes(); }
  void TearDown() override { flags::set_interpreter_max_bytes(saved_); }
  int64_t saved_ = 0;
};

TEST_F(InterpreterMemoryTest, CapIsAnError) {
  flags::set_interpreter_max_bytes(100);
  Module m = OneParamNeg({DType::kF32, {64}});  // 256 bytes
  const std::string e = ErrorOf([&] { Evaluate(*m.entry(), {Literal(TensorType(DType::kF32, {64}))}); });
  EXPECT_NE(e.find("needs 256 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("interpreter_max_bytes"), std::string::npos) << e;
}

TEST_F(InterpreterMemoryTest, DeadValuesAreFreed) {
  // x -> neg -> neg -> neg -> neg: at most two f32[64] (512 bytes) are live at once.
  Module m("chain");
  Builder b(m.AddFunction("main"));
  Value* v = b.Parameter(0, {DType::kF32, {64}});
  for (int i = 0; i < 4; ++i) v = b.Unary(OpKind::kNeg, v);
  b.Return({v});
  flags::set_interpreter_max_bytes(512);
  EXPECT_EQ(Evaluate(*m.entry(), {Literal::Splat(TensorType(DType::kF32, {64}), 2)})[0],
            Literal::Splat(TensorType(DType::kF32, {64}), 2));
  flags::set_interpreter_max_bytes(511);
  EXPECT_NE(ErrorOf([&] { Evaluate(*m.entry(), {Literal(TensorType(DType::kF32, {64}))}); }), "");
}

TEST_F(InterpreterMemoryTest, ReplicasCountTogether) {
  flags::set_interpreter_max_bytes(300);
  Module m = OneParamNeg({DType::kF32, {32}});  // 128 bytes per replica
  const Literal z(TensorType(DType::kF32, {32}));
  EXPECT_EQ(Evaluate(*m.entry(), {z}).size(), 1u);
  const std::string e = ErrorOf([&] { EvaluateReplicated(*m.entry(), {{z}, {z}}); });
  EXPECT_NE(e.find("on 2 replicas"), std::string::npos) << e;
}

TEST_F(InterpreterMemoryTest, HugeTypeFailsBeforeAllocating) {
  Module m("huge");
  Builder b(m.AddFunction("main"));
  b.Return({b.Iota({DType::kF64, {int64_t{1} << 40, int64_t{1} << 20}}, 0)});
  const std::string e = ErrorOf([&] { Evaluate(*m.entry(), {}); });
  EXPECT_NE(e.find("interpreter_max_bytes"), std::string::npos) << e;
}

TEST(InterpreterCustomCall, UnknownTargetIsAnError) {
  Module m("cc");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, {DType::kF32, {2}});
  b.Return(b.Build(OpKind::kCustomCall, {x}, CustomCallAttrs{"no.such.target", ""}, {x->type()}));
  const std::string e = ErrorOf([&] { Evaluate(*m.entry(), {F32({2}, {1, 2})}); });
  EXPECT_NE(e.find("'no.such.target' has no registered interpreter kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("RegisterCustomCall"), std::string::npos) << e;
}

TEST(InterpreterCustomCall, RegisteredKernelRunsInAProgram) {
  // axpy: a * x + y, with `a` passed through the config string.
  RegisterCustomCall("test.axpy", [](const std::vector<Literal>& ops, const CustomCallAttrs& attrs,
                                     const std::vector<TensorType>& types) {
    const float a = std::stof(attrs.config);
    Literal out(types[0]);
    for (int64_t i = 0; i < out.NumElements(); ++i)
      out.mutable_data<float>()[i] = a * ops[0].data<float>()[i] + ops[1].data<float>()[i];
    return std::vector<Literal>{out};
  });
  Module m("cc");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, {DType::kF32, {3}});
  Value* y = b.Parameter(1, {DType::kF32, {3}});
  Value* r = b.Build1(OpKind::kCustomCall, {x, y}, CustomCallAttrs{"test.axpy", "2"}, {x->type()});
  b.Return({b.Unary(OpKind::kNeg, r)});
  EXPECT_EQ(Evaluate(*m.entry(), {F32({3}, {1, 2, 3}), F32({3}, {10, 20, 30})})[0], F32({3}, {-12, -24, -36}));
  RegisterCustomCall("test.axpy", nullptr);  // unregister
  EXPECT_NE(ErrorOf([&] { Evaluate(*m.entry(), {F32({3}, {1, 2, 3}), F32({3}, {1, 2, 3})}); }), "");
}

TEST(InterpreterCustomCall, WrongResultTypeIsAnError) {
  RegisterCustomCall("test.bad", [](const std::vector<Literal>&, const CustomCallAttrs&,
                                    const std::vector<TensorType>&) {
    return std::vector<Literal>{Literal(TensorType(DType::kI32, {2}))};
  });
  Module m("cc");
  Builder b(m.AddFunction("main"));
  b.Return(b.Build(OpKind::kCustomCall, {}, CustomCallAttrs{"test.bad", ""}, {TensorType(DType::kF32, {2})}));
  const std::string e = ErrorOf([&] { Evaluate(*m.entry(), {}); });
  EXPECT_NE(e.find("returned (i32[2]) but the node declares (f32[2])"), std::string::npos) << e;
  RegisterCustomCall("test.bad", nullptr);
}

TEST(InterpreterProgram, ResultsMayRepeatAndBeParameters) {
  Module m("r");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, {DType::kI32, {2}});
  Value* y = b.Add(x, x);
  b.Return({y, x, y});
  const Literal in = Literal::FromVector<int32_t>(DType::kI32, {2}, {1, 2});
  std::vector<Literal> out = Evaluate(*m.entry(), {in});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], Literal::FromVector<int32_t>(DType::kI32, {2}, {2, 4}));
  EXPECT_EQ(out[1], in);
  EXPECT_EQ(out[2], out[0]);
}

// Literal::SetDouble promises to convert as `convert` does: f64 -> bf16/f16 rounds once.
TEST(LiteralRounding, FromDoublesRoundsOnce) {
  const double bf16_above_tie = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(Literal::FromDoubles(DType::kBF16, {1}, {bf16_above_tie}).data<uint16_t>()[0], 0x3f81);
  const double f16_above_tie = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(Literal::FromDoubles(DType::kF16, {1}, {f16_above_tie}).data<uint16_t>()[0], 0x3c01);
  EXPECT_EQ(Literal::FromDoubles(DType::kF16, {1}, {1e300}).data<uint16_t>()[0], 0x7c00);
  EXPECT_EQ(Literal::FromDoubles(DType::kBF16, {1}, {-1e300}).data<uint16_t>()[0], 0xff80);
}

}  // namespace
}  // namespace axle::ir
