// HashModule on small hand-built modules: what it ignores and what it must see. The random-module
// properties and the pinned hashes are in property_test.cc.
#include "ir/hash.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ir/builder.h"

namespace axle::ir {
namespace {

TensorType F32(Shape s) { return TensorType(DType::kF32, std::move(s)); }

// main(x: f32[4], y: f32[4]) = (x - y, exp(x)), with names and a location.
std::unique_ptr<Module> SmallModule() {
  auto m = std::make_unique<Module>("small");
  Builder b(m->AddFunction("main"));
  b.set_loc({"small.axir", 3, 5});
  Value* x = b.Parameter(0, F32({4}), "x");
  Value* y = b.Parameter(1, F32({4}), "y");
  Value* d = b.Sub(x, y);
  d->set_name("d");
  b.Return({d, b.Unary(OpKind::kExp, x)});
  return m;
}

// A module with one function holding one node of `op` with `attrs` and no operands. HashModule
// does not need a valid module, which lets the tests below vary each attribute field alone.
ModuleHash HashOfNode(OpKind op, const Attrs& attrs, const TensorType& type = F32({2})) {
  Module m;
  Function* f = m.AddFunction("main");
  Node* n = f->AddNode(op, {}, attrs, {type});
  f->set_results({n->result()});
  return HashModule(m);
}

TEST(Hash, HexIs32LowercaseDigits) {
  const std::string hex = HashModule(*SmallModule()).ToHex();
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
  EXPECT_EQ((ModuleHash{0x0123456789abcdefull, 0xfull}.ToHex()),
            "0123456789abcdef000000000000000f");
}

TEST(Hash, IgnoresNamesLocationsAndModuleName) {
  std::unique_ptr<Module> a = SmallModule();
  std::unique_ptr<Module> b = SmallModule();
  b->set_name("other");
  for (const auto& n : b->entry()->nodes()) {
    n->set_loc({"elsewhere.axir", 99, 1});
    n->result()->set_name("renamed");
  }
  b->entry()->set_loc({"x.axir", 1, 1});
  EXPECT_EQ(HashModule(*a), HashModule(*b));
}

// Note [The schedule in the IR]: a node's schedule entries and the module's schedule target are
// part of what the hash sees.
TEST(Hash, SeesScheduleEntriesAndTheScheduleTarget) {
  std::unique_ptr<Module> a = SmallModule();
  std::unique_ptr<Module> b = SmallModule();
  EXPECT_EQ(HashModule(*a), HashModule(*b));
  b->entry()->nodes().back()->set_schedule({{"group", {2}, ""}});
  EXPECT_NE(HashModule(*a), HashModule(*b));
  std::unique_ptr<Module> c = SmallModule();
  c->entry()->nodes().back()->set_schedule({{"group", {3}, ""}});
  EXPECT_NE(HashModule(*b), HashModule(*c));
  std::unique_ptr<Module> d = SmallModule();
  d->set_scheduled_for("cpu-avx2-2t");
  EXPECT_NE(HashModule(*a), HashModule(*d));
}

TEST(Hash, IgnoresTheOrderOfIndependentNodes) {
  std::unique_ptr<Module> a = SmallModule();
  // The same graph with the parameters and the two result nodes created in the other order.
  Module b("small");
  Builder bb(b.AddFunction("main"));
  Value* y = bb.Parameter(1, F32({4}));
  Value* x = bb.Parameter(0, F32({4}));
  Value* e = bb.Unary(OpKind::kExp, x);
  bb.Return({bb.Sub(x, y), e});
  EXPECT_EQ(HashModule(*a), HashModule(b));
}

TEST(Hash, SeesParameterIndicesOperandOrderAndResultOrder) {
  const ModuleHash h = HashModule(*SmallModule());
  std::unique_ptr<Module> m = SmallModule();
  Function* f = m->entry();
  std::swap(std::get<ParameterAttrs>(f->nodes()[0]->mutable_attrs()).index,
            std::get<ParameterAttrs>(f->nodes()[1]->mutable_attrs()).index);
  EXPECT_NE(HashModule(*m), h) << "parameter indices";

  m = SmallModule();
  Node* sub = m->entry()->nodes()[2].get();
  Value* x = sub->operand(0);
  sub->set_operand(0, sub->operand(1));
  sub->set_operand(1, x);
  EXPECT_NE(HashModule(*m), h) << "operand order";

  m = SmallModule();
  std::vector<Value*> results = m->entry()->results();
  std::swap(results[0], results[1]);
  m->entry()->set_results(results);
  EXPECT_NE(HashModule(*m), h) << "result order";
}

TEST(Hash, SeesWhichResultOfANodeIsUsed) {
  auto build = [](int which) {
    Module m;
    Builder b(m.AddFunction("main"));
    Value* x = b.Parameter(0, F32({4}));
    std::vector<Value*> sorted = b.Build(OpKind::kSort, {x, x}, SortAttrs{0, false});
    b.Return({sorted[static_cast<size_t>(which)]});
    return HashModule(m);
  };
  EXPECT_NE(build(0), build(1));
}

TEST(Hash, DeadNodesCount) {
  std::unique_ptr<Module> m = SmallModule();
  const ModuleHash h = HashModule(*m);
  Builder b(m->entry());
  b.Unary(OpKind::kNeg, m->entry()->nodes()[0]->result());
  const ModuleHash with_one = HashModule(*m);
  EXPECT_NE(with_one, h);
  b.Unary(OpKind::kNeg, m->entry()->nodes()[0]->result());
  EXPECT_NE(HashModule(*m), with_one) << "a duplicated dead node counts again";
}

TEST(Hash, SeesResultTypesShardingsAndReplicas) {
  const ModuleHash h = HashModule(*SmallModule());
  std::unique_ptr<Module> m = SmallModule();
  m->entry()->nodes()[2]->result()->set_type(TensorType(DType::kF64, Shape{4}));
  EXPECT_NE(HashModule(*m), h) << "dtype";
  m = SmallModule();
  m->entry()->nodes()[2]->result()->set_type(F32({2, 2}));
  EXPECT_NE(HashModule(*m), h) << "shape";

  std::vector<ModuleHash> seen = {h};
  for (const Sharding& s :
       {Sharding{{{}}, {}}, Sharding{{{"x"}}, {}}, Sharding{{{"y"}}, {}},
        Sharding{{{"x", "y"}}, {}}, Sharding{{{"y", "x"}}, {}}, Sharding{{{}}, {"x"}}}) {
    m = SmallModule();
    m->entry()->nodes()[2]->result()->set_sharding(s);
    const ModuleHash hs = HashModule(*m);
    for (const ModuleHash& other : seen) EXPECT_NE(hs, other) << s.ToString();
    seen.push_back(hs);
  }

  m = SmallModule();
  m->set_num_replicas(2);
  EXPECT_NE(HashModule(*m), h) << "num_replicas";
}

TEST(Hash, EveryAttributeFieldOfEveryOpCounts) {
  // For each op, changing any one field of its default attributes changes the hash.
  for (const OpInfo& info : AllOps()) {
    const Attrs base = DefaultAttrs(info.kind);
    const ModuleHash h = HashOfNode(info.kind, base);
    for (size_t i = 0; i < AttrFields(base).size(); ++i) {
      Attrs changed = base;
      std::visit(
          [](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, int64_t>)
              *p += 1;
            else if constexpr (std::is_same_v<T, bool>)
              *p = !*p;
            else if constexpr (std::is_same_v<T, std::string>)
              *p += "x";
            else if constexpr (std::is_same_v<T, DType>)
              *p = *p == DType::kF32 ? DType::kI32 : DType::kF32;
            else if constexpr (std::is_same_v<T, CompareDir>)
              *p = CompareDir::kGe;
            else if constexpr (std::is_same_v<T, ReduceKind>)
              *p = ReduceKind::kOr;
            else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
              p->push_back(0);
            else if constexpr (std::is_same_v<T, ReplicaGroups>)
              p->push_back({});
            else
              *p = Literal(F32({1}));
          },
          MutableAttrFields(changed)[i].ref);
      EXPECT_NE(HashOfNode(info.kind, changed), h) << info.name << "." << AttrFields(base)[i].name;
    }
    EXPECT_NE(HashOfNode(info.kind, base, F32({3})), h) << info.name << " result type";
  }
}

TEST(Hash, ListsAndStringsAreLengthPrefixed) {
  // Without length prefixes these pairs would serialize to the same bytes.
  EXPECT_NE(HashOfNode(OpKind::kCustomCall, CustomCallAttrs{"ab", "c"}),
            HashOfNode(OpKind::kCustomCall, CustomCallAttrs{"a", "bc"}));
  DotGeneralAttrs a, b;
  a.lhs_batch = {0, 1};
  b.lhs_batch = {0};
  b.rhs_batch = {1};
  EXPECT_NE(HashOfNode(OpKind::kDotGeneral, a), HashOfNode(OpKind::kDotGeneral, b));
  EXPECT_NE(HashOfNode(OpKind::kAllReduce, AllReduceAttrs{ReduceKind::kSum, {{0, 1}, {2, 3}}}),
            HashOfNode(OpKind::kAllReduce, AllReduceAttrs{ReduceKind::kSum, {{0, 1, 2}, {3}}}));
}

TEST(Hash, LiteralsHashByTypeAndBits) {
  auto hash = [](const Literal& lit) {
    return HashOfNode(OpKind::kConstant, ConstantAttrs{lit}, lit.type());
  };
  auto f32 = [](float v) { return Literal::FromVector<float>(DType::kF32, Shape{}, {v}); };
  EXPECT_NE(hash(f32(0.0f)), hash(f32(-0.0f)));
  const float nan1 = std::numeric_limits<float>::quiet_NaN();
  float nan2 = nan1;
  uint32_t bits;
  std::memcpy(&bits, &nan2, 4);
  bits |= 1;
  std::memcpy(&nan2, &bits, 4);
  EXPECT_EQ(hash(f32(nan1)), hash(f32(nan1)));
  EXPECT_NE(hash(f32(nan1)), hash(f32(nan2))) << "NaN payloads are bits too";
  // Same bytes, different dtype or shape.
  EXPECT_NE(hash(Literal::FromVector<int32_t>(DType::kI32, Shape{}, {7})),
            hash(Literal::FromVector<uint32_t>(DType::kU32, Shape{}, {7})));
  const std::vector<float> six = {1, 2, 3, 4, 5, 6};
  EXPECT_NE(hash(Literal::FromVector<float>(DType::kF32, Shape{2, 3}, six)),
            hash(Literal::FromVector<float>(DType::kF32, Shape{3, 2}, six)));
}

TEST(Hash, FunctionOrderCountsOnlyThroughTheEntry) {
  auto build = [](std::vector<std::string> names) {
    Module m;
    for (const std::string& name : names) {
      Builder b(m.AddFunction(name));
      b.Return({b.Parameter(0, F32({static_cast<int64_t>(name.size())}))});
    }
    return HashModule(m);
  };
  EXPECT_EQ(build({"main", "aux"}), build({"aux", "main"}));
  EXPECT_EQ(build({"main", "aux", "b"}), build({"b", "main", "aux"}));
  // Without a "main", the first function is the entry point.
  EXPECT_NE(build({"aux", "b"}), build({"b", "aux"}));
  EXPECT_NE(build({"main", "aux"}), build({"main", "bux"})) << "function names";
  EXPECT_NE(build({"main", "aux"}), build({"maim", "aux"})) << "function names";
}

TEST(Hash, RejectsOperandsNotDefinedEarlier) {
  Module m;
  Function* f = m.AddFunction("main");
  Builder b(f);
  Value* x = b.Parameter(0, F32({4}));
  Value* n = b.Unary(OpKind::kNeg, x);
  Node* later = f->AddNode(OpKind::kAbs, {x}, NoAttrs{}, {F32({4})});
  n->node()->set_operand(0, later->result());
  EXPECT_THROW(HashModule(m), Error);
}

}  // namespace
}  // namespace axle::ir
