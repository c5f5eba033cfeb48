// The .axir printer and parser: canonical text, round trips over every op, field type, dtype
// and sharding, names, locations and the tolerant syntax (whitespace, comments, CRLF).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/parser.h"
#include "ir/printer.h"

namespace axle::ir {
namespace {

// print -> parse -> print gives the same text; returns the parsed module.
std::unique_ptr<Module> ExpectRoundTrip(const Module& m) {
  const std::string text = PrintModule(m);
  std::unique_ptr<Module> parsed;
  try {
    parsed = ParseModule(text, "roundtrip.axir");
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n" << text;
    return nullptr;
  }
  EXPECT_EQ(PrintModule(*parsed), text);
  return parsed;
}

// Node-by-node equality of op, operands, attributes, types and shardings.
void ExpectSameStructure(const Function& a, const Function& b) {
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = *a.nodes()[i];
    const Node& y = *b.nodes()[i];
    SCOPED_TRACE(PrintNode(x));
    EXPECT_EQ(x.op(), y.op());
    EXPECT_TRUE(AttrsEqual(x.attrs(), y.attrs()));
    ASSERT_EQ(x.num_operands(), y.num_operands());
    for (size_t j = 0; j < x.num_operands(); ++j) {
      EXPECT_EQ(a.IndexOf(x.operand(j)->node()), b.IndexOf(y.operand(j)->node()));
      EXPECT_EQ(x.operand(j)->index(), y.operand(j)->index());
    }
    ASSERT_EQ(x.num_results(), y.num_results());
    for (size_t j = 0; j < x.num_results(); ++j) {
      EXPECT_EQ(x.result(j)->type(), y.result(j)->type());
      EXPECT_EQ(x.result(j)->sharding(), y.result(j)->sharding());
    }
  }
}

// A byte string holding every byte value, quotes and backslashes included.
std::string AllBytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s + "\"\\\n\t end";
}

// Gives every field of `attrs` a non-default value that varies with `seed`.
void FillFields(Attrs& attrs, int seed, const TensorType& result_type) {
  for (MutableField& f : MutableAttrFields(attrs)) {
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            *p = seed % 2 ? -seed : INT64_MAX - seed;
          } else if constexpr (std::is_same_v<T, bool>) {
            *p = true;
          } else if constexpr (std::is_same_v<T, std::string>) {
            *p = seed % 2 ? AllBytes() : "cublas.gemm";
          } else if constexpr (std::is_same_v<T, DType>) {
            *p = static_cast<DType>(seed % kNumDTypes);
          } else if constexpr (std::is_same_v<T, CompareDir> || std::is_same_v<T, ReduceKind>) {
            *p = static_cast<T>(seed % 6);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            *p = {seed, -1, 0, INT64_MIN};
          } else if constexpr (std::is_same_v<T, ReplicaGroups>) {
            *p = {{0, 1}, {}, {seed, 3}};
          } else {
            *p = Literal::FromDoubles(result_type.dtype, result_type.shape, {1, -2.5, 0, 7});
          }
        },
        f.ref);
  }
}

// One node of every op in ops.def, with every attribute field set, some results sharded.
std::unique_ptr<Module> EveryOpModule() {
  auto m = std::make_unique<Module>("every_op");
  m->set_num_replicas(8);
  Function* f = m->AddFunction("main");
  const TensorType t(DType::kF32, Shape{2, 2});
  std::vector<Value*> params;
  for (int i = 0; i < 3; ++i) {
    Node* p = f->AddNode(OpKind::kParameter, {}, ParameterAttrs{i}, {t});
    params.push_back(p->result());
  }
  Value* last = nullptr;
  int seed = 0;
  for (const OpInfo& info : AllOps()) {
    int num_operands = info.max_operands == kVariadic ? info.min_operands + 2 : info.min_operands;
    std::vector<Value*> operands;
    for (int i = 0; i < num_operands; ++i)
      operands.push_back(i == 0 && last ? last : params[static_cast<size_t>(i) % 3]);
    const size_t num_results = info.num_results == kVariadic ? 2 : info.num_results;
    Attrs attrs = DefaultAttrs(info.kind);
    FillFields(attrs, ++seed, t);
    Node* n = f->AddNode(info.kind, operands, attrs, std::vector<TensorType>(num_results, t));
    if (seed % 3 == 0) n->result()->set_sharding(Sharding{{{"x", "y"}, {}}, {"z"}});
    last = n->result();
  }
  f->set_results({last, params[0]});
  return m;
}

TEST(PrinterParserTest, EveryOpRoundTrips) {
  std::unique_ptr<Module> m = EveryOpModule();
  const std::string text = PrintModule(*m);
  for (const OpInfo& info : AllOps())
    EXPECT_NE(text.find(fmt::format(" {}(", info.name)), std::string::npos) << info.name;
  std::unique_ptr<Module> parsed = ExpectRoundTrip(*m);
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->num_replicas(), 8);
  ExpectSameStructure(*m->entry(), *parsed->entry());
}

TEST(PrinterParserTest, EveryEnumAndDTypeValueRoundTrips) {
  Module m("enums");
  Function* f = m.AddFunction("f");
  Value* x = f->AddNode(OpKind::kParameter, {}, ParameterAttrs{0}, {{DType::kF32, {3}}})->result();
  for (int i = 0; i < 6; ++i) {
    f->AddNode(OpKind::kCompare, {x, x}, CompareAttrs{static_cast<CompareDir>(i)},
               {{DType::kBool, {3}}});
    f->AddNode(OpKind::kReduce, {x}, ReduceAttrs{static_cast<ReduceKind>(i), {0}},
               {{DType::kF32, {}}});
  }
  for (int i = 0; i < kNumDTypes; ++i) {
    f->AddNode(OpKind::kArgMax, {x}, ArgReduceAttrs{0, static_cast<DType>(i)},
               {{static_cast<DType>(i), {}}});
  }
  std::unique_ptr<Module> parsed = ExpectRoundTrip(m);
  ASSERT_NE(parsed, nullptr);
  ExpectSameStructure(*m.entry(), *parsed->entry());
}

TEST(PrinterParserTest, CanonicalText) {
  const std::string text = R"(module @mlp {num_replicas=2} {
  func @main {
    %x = parameter() {index=0} : f32[4,8]{[data], []}
    %w = parameter() {index=1} : f32[8,16]
    %d = dot_general(%x, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[4,16]
    %c = constant() {value=0} : f32[]
    %i = iota() {dim=1} : i32[4,16]
    %0, %1 = sort(%d, %i) {dim=1, descending=false} : f32[4,16], i32[4,16]
    %s = all_reduce(%d) {kind=sum, groups=[[0, 1]]} : f32[4,16]{[], [model], partial=[data]}
    %k = custom_call(%c) {target="my\"kernel\\\n", config="\x01\xff"} : f32[]{partial=[x]}
    %e = constant() {value=[1, 2.5, -0, nan, inf, -inf]} : f64[2,3]
    return %d, %0
  }

  func @empty {
    return
  }
}
)";
  std::unique_ptr<Module> m = ParseModule(text);
  EXPECT_EQ(PrintModule(*m), text);
  const Function& f = *m->FindFunction("main");
  const Node& k = *f.nodes()[7];
  EXPECT_EQ(k.attrs_as<CustomCallAttrs>().target, "my\"kernel\\\n");
  EXPECT_EQ(k.attrs_as<CustomCallAttrs>().config, "\x01\xff");
  EXPECT_EQ(f.nodes()[6]->result()->sharding(), (Sharding{{{}, {"model"}}, {"data"}}));
  EXPECT_EQ(f.nodes()[5]->result(1)->name(), "1");
  EXPECT_EQ(f.results()[1], f.nodes()[5]->result(0));
}

TEST(PrinterParserTest, AcceptsAnyWhitespaceCommentsAndCrlf) {
  const std::string messy =
      "\xef\xbb\xbf// a byte order mark, then a comment\r\n"
      "module\t@m{func @f{ // trailing comment\r\n"
      "%a=parameter(){index=0}:f32[ 2 , 3 ]{ [ x , y ] ,[ ] }\r\n"
      "  %b  =  neg ( %a )  :  f32[2,3]   return   %a,%b}}  // end";
  const std::string canonical = R"(module @m {
  func @f {
    %a = parameter() {index=0} : f32[2,3]{[x,y], []}
    %b = neg(%a) : f32[2,3]
    return %a, %b
  }
}
)";
  EXPECT_EQ(PrintModule(*ParseModule(messy)), canonical);
}

TEST(PrinterParserTest, FieldsInAnyOrderAndOmittedFieldsKeepDefaults) {
  std::unique_ptr<Module> m = ParseModule(R"(module @m { func @f {
    %x = parameter() : f32[4]
    %y = slice(%x) {strides=[2], start=[1]} : f32[2]
    %z = sort(%x) {} : f32[4]
    return %y, %z } })");
  const Function& f = *m->entry();
  EXPECT_EQ(f.nodes()[0]->attrs_as<ParameterAttrs>().index, 0);
  const SliceAttrs& s = f.nodes()[1]->attrs_as<SliceAttrs>();
  EXPECT_EQ(s.start, std::vector<int64_t>{1});
  EXPECT_TRUE(s.limit.empty());
  EXPECT_EQ(s.strides, std::vector<int64_t>{2});
  EXPECT_NE(PrintModule(*m).find("slice(%x) {start=[1], limit=[], strides=[2]}"), std::string::npos);
}

TEST(PrinterParserTest, LocationsAndNames) {
  std::unique_ptr<Module> m = ParseModule(
      "module @m {\n"
      "  func @f {\n"
      "    %x.0 = parameter() {index=0} : f32[]\n"
      "\t%y, %z = optimization_barrier(%x.0, %x.0) : f32[], f32[]\n"
      "    return %y\n"
      "  }\n"
      "}\n",
      "dir/file.axir");
  const Function& f = *m->entry();
  EXPECT_EQ(f.nodes()[0]->loc().ToString(), "dir/file.axir:3:5");
  EXPECT_EQ(f.nodes()[1]->loc().ToString(), "dir/file.axir:4:2");
  EXPECT_EQ(f.loc().ToString(), "dir/file.axir:5:5");
  EXPECT_EQ(f.nodes()[0]->result()->name(), "x.0");
  EXPECT_EQ(f.nodes()[1]->result(1)->name(), "z");
  EXPECT_EQ(PrintNode(*f.nodes()[1]), "%y, %z = optimization_barrier(%x.0, %x.0) : f32[], f32[]");
  EXPECT_EQ(PrintFunction(f),
            "  func @f {\n"
            "    %x.0 = parameter() {index=0} : f32[]\n"
            "    %y, %z = optimization_barrier(%x.0, %x.0) : f32[], f32[]\n"
            "    return %y\n"
            "  }\n");
}

TEST(PrinterParserTest, NumbersUnnamedValuesAndDisambiguatesNames) {
  Module m("m");
  Function* f = m.AddFunction("f");
  const TensorType t(DType::kI32, Shape{});
  auto param = [&](const std::string& name) {
    Value* v = f->AddNode(OpKind::kParameter, {}, ParameterAttrs{}, {t})->result();
    v->set_name(name);
    return v;
  };
  Value* a = param("");
  Value* b = param("1");     // numbering skips %1
  Value* c = param("x");
  Value* d = param("x");     // repeated: x.1
  Value* e = param("x.1");   // taken by the repeat: x.1.1
  Value* g = param("a b!");  // bytes outside the name alphabet become '_'
  Value* h = param("");
  f->set_results({a, b, c, d, e, g, h});
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("return %0, %1, %x, %x.1, %x.1.1, %a_b_, %2\n"), std::string::npos) << text;
  ExpectRoundTrip(m);
}

TEST(PrinterParserTest, RepeatedFunctionNamesAndOddModuleNames) {
  Module m("my module");
  m.AddFunction("f")->set_results({});
  m.AddFunction("f")->set_results({});
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("module @my_module {"), std::string::npos) << text;
  EXPECT_NE(text.find("func @f.1 {"), std::string::npos) << text;
  ExpectRoundTrip(m);
}

TEST(PrinterParserTest, NodeWithoutResults) {
  const std::string text = R"(module @m {
  func @f {
    %x = parameter() {index=0} : f32[2]
    custom_call(%x) {target="print", config=""}
    return
  }
}
)";
  std::unique_ptr<Module> m = ParseModule(text);
  EXPECT_EQ(m->entry()->nodes()[1]->num_results(), 0u);
  EXPECT_EQ(m->entry()->nodes()[1]->loc().line, 4);
  EXPECT_EQ(PrintModule(*m), text);
}

TEST(PrinterParserTest, ShardingsRoundTrip) {
  Module m("m");
  Function* f = m.AddFunction("f");
  const std::vector<std::pair<Shape, Sharding>> cases = {
      {Shape{}, Sharding{}},
      {Shape{}, Sharding{{}, {"z"}}},
      {Shape{4}, Sharding{{{}}, {}}},
      {Shape{4, 8, 2}, Sharding{{{"x", "y"}, {}, {"z"}}, {"w", "v"}}},
      {Shape{4, 8}, Sharding{{{"partial"}, {"_a.b"}}, {}}},
      {Shape{4}, Sharding{{{"odd axis", "", "0", "-x", "\"q\""}}, {"é"}}},
  };
  std::vector<Value*> results;
  for (const auto& [shape, sharding] : cases) {
    Value* v =
        f->AddNode(OpKind::kParameter, {}, ParameterAttrs{}, {{DType::kBF16, shape}})->result();
    v->set_sharding(sharding);
    results.push_back(v);
  }
  f->set_results(results);
  std::unique_ptr<Module> parsed = ExpectRoundTrip(m);
  ASSERT_NE(parsed, nullptr);
  ExpectSameStructure(*m.entry(), *parsed->entry());
}

// Note [The schedule in the IR]: a node's schedule entries and the module's target print, parse
// back and clone as they were, in their order; a node without entries prints no `sched`.
TEST(PrinterParserTest, ScheduleEntriesRoundTrip) {
  const std::string text = R"(module @m {schedule="cpu-avx2-2t"} {
  func @main {
    %x = parameter() {index=0} : f32[4,4]
    %a = dot_general(%x, %x) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} sched{pair=[0, 2], lhs_view=[8, 4, 1], fold=read, none=[], one=7} : f32[4,4]
    %b = neg(%a) : f32[4,4]
    return %b
  }
}
)";
  std::unique_ptr<Module> m = ParseModule(text);
  EXPECT_EQ(m->scheduled_for(), "cpu-avx2-2t");
  const Node& a = *m->entry()->nodes()[1];
  ASSERT_EQ(a.schedule().size(), 5u);
  EXPECT_EQ(a.schedule()[0], (ScheduleEntry{"pair", {0, 2}, ""}));
  EXPECT_EQ(a.schedule()[2], (ScheduleEntry{"fold", {}, "read"}));
  EXPECT_EQ(a.schedule()[3], (ScheduleEntry{"none", {}, ""}));
  ASSERT_NE(a.FindSchedule("one"), nullptr);
  EXPECT_EQ(a.FindSchedule("one")->ints, std::vector<int64_t>{7});
  EXPECT_EQ(a.FindSchedule("two"), nullptr);
  EXPECT_TRUE(m->entry()->nodes()[2]->schedule().empty());
  EXPECT_EQ(PrintModule(*m), text);
  EXPECT_EQ(PrintModule(*m->Clone()), text);
}

TEST(PrinterParserTest, StringsWithEveryByteRoundTrip) {
  Module m("m");
  Function* f = m.AddFunction("f");
  CustomCallAttrs attrs{AllBytes(), std::string("\0\0x", 3)};
  f->AddNode(OpKind::kCustomCall, {}, attrs, {{DType::kF32, {}}});
  std::unique_ptr<Module> parsed = ExpectRoundTrip(m);
  ASSERT_NE(parsed, nullptr);
  const auto& got = parsed->entry()->nodes()[0]->attrs_as<CustomCallAttrs>();
  EXPECT_EQ(got.target, attrs.target);
  EXPECT_EQ(got.config, attrs.config);
}

// A constant of `lit`'s type holding `lit`.
void AddConstant(Function* f, const Literal& lit) {
  f->AddNode(OpKind::kConstant, {}, ConstantAttrs{lit}, {lit.type()});
}

// Literals of every dtype with their extreme values: print -> parse gives the same bits.
std::vector<Literal> ExtremeLiterals() {
  using F = std::numeric_limits<float>;
  using D = std::numeric_limits<double>;
  std::vector<Literal> lits;
  lits.push_back(Literal::FromVector<float>(
      DType::kF32, Shape{13},
      {0.0f, -0.0f, 1.5f, 0.1f, 1e-7f, F::max(), F::lowest(), F::min(), F::denorm_min(),
       F::infinity(), -F::infinity(), F::quiet_NaN(), 16777216.0f}));
  lits.push_back(Literal::FromVector<double>(
      DType::kF64, Shape{11},
      {0.0, -0.0, 0.1, 1.0 / 3, D::max(), D::lowest(), D::min(), D::denorm_min(), D::infinity(),
       -D::infinity(), D::quiet_NaN()}));
  const std::vector<uint16_t> bf16 = {0x0000, 0x8000, 0x7f7f, 0xff7f, 0x0001, 0x8001, 0x0080,
                                      0x7f80, 0xff80, 0x7fc0, 0x3f80, 0x3dcd};
  lits.push_back(Literal::FromVector<uint16_t>(DType::kBF16, Shape{3, 4}, bf16));
  const std::vector<uint16_t> f16 = {0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x0400,
                                     0x7c00, 0xfc00, 0x7e00, 0x3c00, 0x3555};
  lits.push_back(Literal::FromVector<uint16_t>(DType::kF16, Shape{2, 6}, f16));
  lits.push_back(Literal::FromVector<int8_t>(DType::kI8, Shape{4}, {-128, 127, 0, -1}));
  lits.push_back(Literal::FromVector<int32_t>(DType::kI32, Shape{3}, {INT32_MIN, INT32_MAX, 0}));
  lits.push_back(Literal::FromVector<int64_t>(DType::kI64, Shape{3}, {INT64_MIN, INT64_MAX, -1}));
  lits.push_back(Literal::FromVector<uint8_t>(DType::kU8, Shape{2}, {0, 255}));
  lits.push_back(Literal::FromVector<uint32_t>(DType::kU32, Shape{2}, {0, 4294967295u}));
  lits.push_back(Literal::FromVector<uint8_t>(DType::kBool, Shape{2, 1}, {1, 0}));
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    lits.push_back(Literal(TensorType(t, Shape{0, 3})));    // empty: []
    lits.push_back(Literal::Splat(TensorType(t, Shape{}), 1));  // scalar
    lits.push_back(Literal::Splat(TensorType(t, Shape{5, 2}), IsFloat(t) ? -0.0 : 1));  // splat
  }
  return lits;
}

TEST(PrinterParserTest, LiteralsOfEveryDTypeRoundTripBitExactly) {
  Module m("m");
  Function* f = m.AddFunction("f");
  const std::vector<Literal> lits = ExtremeLiterals();
  for (const Literal& lit : lits) AddConstant(f, lit);
  std::unique_ptr<Module> parsed = ExpectRoundTrip(m);
  ASSERT_NE(parsed, nullptr);
  for (size_t i = 0; i < lits.size(); ++i) {
    const Literal& got = parsed->entry()->nodes()[i]->attrs_as<ConstantAttrs>().value;
    EXPECT_EQ(got, lits[i]) << lits[i].ToString() << " vs " << got.ToString();
  }
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("{value=[0, -0, 1.5, 0.1, 1e-07, 3.4028235e+38, -3.4028235e+38"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{value=-0} : bf16[5,2]"), std::string::npos) << text;
  EXPECT_NE(text.find("{value=[]} : u32[0,3]"), std::string::npos) << text;
  EXPECT_NE(text.find("{value=[true, false]} : bool[2,1]"), std::string::npos) << text;
}

TEST(PrinterParserTest, SplatIsFilledOnParse) {
  std::unique_ptr<Module> m = ParseModule(R"(module @m { func @f {
    %a = constant() {value=0.5} : bf16[2,3]
    %b = constant() {value=[7]} : u8[1]
    %c = constant() {value=4294967295} : u32[2]
    %d = constant() {value=1e-50} : f32[]
    return } })");
  const auto value = [&](int i) { return m->entry()->nodes()[i]->attrs_as<ConstantAttrs>().value; };
  EXPECT_EQ(value(0), Literal::Splat(TensorType(DType::kBF16, Shape{2, 3}), 0.5));
  EXPECT_EQ(value(1).GetInt64(0), 7);
  EXPECT_EQ(value(2).GetInt64(1), 4294967295);
  EXPECT_EQ(value(3).GetDouble(0), 0.0);  // underflow rounds to zero
}

TEST(PrinterParserTest, ElementsThatPrintAlikeArePrintedAsOne) {
  // A bool stored as 2 prints like true; the printer must still print one stable text for it.
  // (NaN payloads print bit-exactly instead: tests/ir/nan_payload_test.cc.)
  Module m("m");
  Function* f = m.AddFunction("f");
  AddConstant(f, Literal::FromVector<uint32_t>(DType::kF32, Shape{2}, {0x7fc00000u, 0x7fc00001u}));
  AddConstant(f, Literal::FromVector<uint8_t>(DType::kBool, Shape{2}, {1, 2}));
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("{value=[nan, nan.0x7fc00001]} : f32[2]"), std::string::npos) << text;
  EXPECT_NE(text.find("{value=true} : bool[2]"), std::string::npos) << text;
  ExpectRoundTrip(m);
}

TEST(PrinterParserTest, ErrorsCarryFileLineAndColumn) {
  try {
    ParseModule("module @m {\n  func @f {\n    return %nope\n  }\n}\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "<string>:3:12: error: use of undefined value %nope");
    EXPECT_EQ(e.loc().line, 3);
  }
}

TEST(PrinterParserTest, EmptyModule) {
  Module m("empty");
  EXPECT_EQ(PrintModule(m), "module @empty {\n}\n");
  ExpectRoundTrip(m);
}

}  // namespace
}  // namespace axle::ir
