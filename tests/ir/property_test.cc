// Properties of the IR checked on thousands of random modules (testing/random_module.h):
//   * every random module verifies, and print -> parse -> print is the identity on the text;
//   * the structural hash survives printing and parsing, renaming values, reordering independent
//     nodes and cloning, and changes under every kind of semantic mutation;
//   * the hash of a few fixed modules is pinned, so a change of the hash function (across
//     machines, compilers or versions) is noticed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "testing/random_module.h"
#include "testing/random_module_internal.h"

namespace axle::ir {
namespace {

using testing::RandomModule;
using testing::RandomModuleOptions;
using testing::internal::Rng;

constexpr uint64_t kRoundTripSeeds = 3000;
constexpr uint64_t kSeeds = 1000;

// Options varied by seed, so that the properties hold across option settings too.
RandomModuleOptions OptionsFor(uint64_t seed) {
  RandomModuleOptions o;
  switch (seed % 4) {
    case 1: {
      static constexpr int64_t kReplicas[] = {1, 2, 3, 4, 6, 8};
      o.collectives = true;
      o.num_replicas = kReplicas[(seed / 4) % std::size(kReplicas)];
      break;
    }
    case 2:
      o.allow_zero_sized = false;
      o.max_rank = 4;
      o.max_dim = 3;
      break;
    case 3:
      o.dtypes = {DType::kF32, DType::kBF16, DType::kI32, DType::kBool};
      o.num_nodes = 20;
      break;
    default: break;
  }
  return o;
}

std::string Context(uint64_t seed, const Module& m) {
  return fmt::format("seed {}:\n{}", seed, PrintModule(m));
}

TEST(Property, RandomModulesVerifyAndRoundTripThroughText) {
  for (uint64_t seed = 0; seed < kRoundTripSeeds; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed, OptionsFor(seed));
    ASSERT_NO_THROW(Verify(*m)) << Context(seed, *m);
    const std::string text = PrintModule(*m);
    std::unique_ptr<Module> parsed;
    ASSERT_NO_THROW(parsed = ParseModule(text, "random.axir")) << Context(seed, *m);
    ASSERT_NO_THROW(Verify(*parsed)) << Context(seed, *m);
    ASSERT_EQ(PrintModule(*parsed), text) << "seed " << seed;
    ASSERT_EQ(HashModule(*parsed), HashModule(*m)) << Context(seed, *m);
  }
}

TEST(Property, HashIgnoresNamesNodeOrderAndCloning) {
  int reordered = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed, OptionsFor(seed));
    const ModuleHash h = HashModule(*m);

    std::unique_ptr<Module> clone = m->Clone();
    ASSERT_EQ(HashModule(*clone), h) << Context(seed, *m);

    testing::RenameValues(*clone, seed);
    clone->set_name("renamed");
    ASSERT_EQ(HashModule(*clone), h) << Context(seed, *clone);

    std::unique_ptr<Module> shuffled = testing::ShuffleIndependentNodes(*m, seed);
    ASSERT_NO_THROW(Verify(*shuffled)) << Context(seed, *shuffled);
    ASSERT_EQ(HashModule(*shuffled), h) << Context(seed, *m) << "\nshuffled:\n"
                                        << PrintModule(*shuffled);
    reordered += PrintModule(*shuffled) != PrintModule(*m);
  }
  EXPECT_GT(reordered, static_cast<int>(kSeeds) / 2) << "ShuffleIndependentNodes rarely reorders";
}

// ---------------------------------------------------------------------------------------------
// Semantic mutations. Each returns false when the module offers no place to apply it.

// Structural equality of two values (same op, attributes, types, shardings, result index and
// structurally equal operands): swapping such values is not a semantic change.
class StructuralEq {
 public:
  bool Equal(const Value* a, const Value* b) {
    if (a == b) return true;
    if (a->index() != b->index()) return false;
    auto key = std::make_pair(a->node(), b->node());
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const Node& x = *a->node();
    const Node& y = *b->node();
    bool eq = x.op() == y.op() && AttrsEqual(x.attrs(), y.attrs()) &&
              x.num_results() == y.num_results() && x.num_operands() == y.num_operands();
    for (size_t i = 0; eq && i < x.num_results(); ++i)
      eq = x.result(i)->type() == y.result(i)->type() &&
           x.result(i)->sharding() == y.result(i)->sharding();
    for (size_t i = 0; eq && i < x.num_operands(); ++i) eq = Equal(x.operand(i), y.operand(i));
    memo_[key] = eq;
    return eq;
  }

 private:
  std::map<std::pair<const Node*, const Node*>, bool> memo_;
};

std::vector<Node*> AllNodes(const Module& m) {
  std::vector<Node*> nodes;
  for (const auto& f : m.functions())
    for (const auto& n : f->nodes()) nodes.push_back(n.get());
  return nodes;
}

template <typename Pred>
std::vector<Node*> NodesWhere(const Module& m, Pred pred) {
  std::vector<Node*> out;
  for (Node* n : AllNodes(m))
    if (pred(*n)) out.push_back(n);
  return out;
}

void FlipBit(Literal& lit, Rng& rng) {
  const int64_t i = rng.Uniform(0, lit.NumElements() - 1);
  if (lit.dtype() == DType::kBool) {
    lit.SetInt64(i, lit.GetInt64(i) == 0 ? 1 : 0);
    return;
  }
  const int64_t width = DTypeSize(lit.dtype());
  const int64_t bit = rng.Uniform(0, width * 8 - 1);
  lit.mutable_bytes()[static_cast<size_t>(i * width + bit / 8)] ^=
      static_cast<uint8_t>(1u << (bit % 8));
}

// Changes one attribute field of one node. Every field is semantic.
bool MutateAttribute(Module& m, Rng& rng) {
  std::vector<Node*> nodes =
      NodesWhere(m, [](const Node& n) { return !AttrFields(n.attrs()).empty(); });
  if (nodes.empty()) return false;
  Node* n = rng.Pick(nodes);
  std::vector<MutableField> fields = MutableAttrFields(n->mutable_attrs());
  MutableFieldRef ref = rng.Pick(fields).ref;
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          *p += rng.Coin() ? 1 : -1;
        } else if constexpr (std::is_same_v<T, bool>) {
          *p = !*p;
        } else if constexpr (std::is_same_v<T, std::string>) {
          p->push_back('x');
        } else if constexpr (std::is_same_v<T, DType>) {
          *p = static_cast<DType>((static_cast<int>(*p) + 1) % kNumDTypes);
        } else if constexpr (std::is_same_v<T, CompareDir> || std::is_same_v<T, ReduceKind>) {
          *p = static_cast<T>((static_cast<int>(*p) + 1) % 6);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          if (p->empty())
            p->push_back(0);
          else
            (*p)[static_cast<size_t>(rng.Uniform(0, p->size() - 1))] += 1;
        } else if constexpr (std::is_same_v<T, ReplicaGroups>) {
          if (p->empty())
            p->push_back({0});
          else
            p->front().push_back(1000);
        } else {
          static_assert(std::is_same_v<T, Literal>);
          if (p->NumElements() > 0)
            FlipBit(*p, rng);
          else
            *p = Literal(
                TensorType(p->dtype() == DType::kF32 ? DType::kI32 : DType::kF32, p->shape()));
        }
      },
      ref);
  return true;
}

bool MutateConstantBit(Module& m, Rng& rng) {
  std::vector<Node*> nodes = NodesWhere(m, [](const Node& n) {
    return n.op() == OpKind::kConstant && n.attrs_as<ConstantAttrs>().value.NumElements() > 0;
  });
  if (nodes.empty()) return false;
  FlipBit(std::get<ConstantAttrs>(rng.Pick(nodes)->mutable_attrs()).value, rng);
  return true;
}

// The operand positions of `n` whose order is semantic, as pairs that may be swapped.
std::vector<std::pair<size_t, size_t>> SwappablePairs(const Node& n) {
  std::vector<std::pair<size_t, size_t>> pairs;
  switch (n.op()) {
    case OpKind::kSub:
    case OpKind::kDiv:
    case OpKind::kRem:
    case OpKind::kPow:
    case OpKind::kAtan2:
    case OpKind::kDotGeneral: pairs.push_back({0, 1}); break;
    case OpKind::kCompare: {
      CompareDir dir = n.attrs_as<CompareAttrs>().dir;
      if (dir != CompareDir::kEq && dir != CompareDir::kNe) pairs.push_back({0, 1});
      break;
    }
    case OpKind::kSelect: pairs.push_back({1, 2}); break;
    case OpKind::kClamp: pairs.push_back({0, 2}); break;
    case OpKind::kConcatenate:
    case OpKind::kSort:
    case OpKind::kCustomCall:
    case OpKind::kOptimizationBarrier:
      for (size_t i = 0; i < n.num_operands(); ++i)
        for (size_t j = i + 1; j < n.num_operands(); ++j) pairs.push_back({i, j});
      break;
    default: break;
  }
  return pairs;
}

bool MutateSwapOperands(Module& m, Rng& rng) {
  StructuralEq eq;
  std::vector<std::pair<Node*, std::pair<size_t, size_t>>> candidates;
  for (Node* n : AllNodes(m))
    for (auto [i, j] : SwappablePairs(*n))
      if (!eq.Equal(n->operand(i), n->operand(j))) candidates.push_back({n, {i, j}});
  if (candidates.empty()) return false;
  auto [n, pair] = rng.Pick(candidates);
  Value* a = n->operand(pair.first);
  n->set_operand(pair.first, n->operand(pair.second));
  n->set_operand(pair.second, a);
  return true;
}

// Changes the dtype a convert produces (its users, if any, then see a wrong operand type: the
// module no longer verifies, but the change is certainly semantic).
bool MutateConvertDType(Module& m, Rng& rng) {
  std::vector<Node*> nodes =
      NodesWhere(m, [](const Node& n) { return n.op() == OpKind::kConvert; });
  if (nodes.empty()) return false;
  Value* v = rng.Pick(nodes)->result();
  const int old_dtype = static_cast<int>(v->dtype());
  const int new_dtype =
      (old_dtype + 1 + static_cast<int>(rng.Uniform(0, kNumDTypes - 2))) % kNumDTypes;
  v->set_type(TensorType(static_cast<DType>(new_dtype), v->shape()));
  return true;
}

bool MutateSharding(Module& m, Rng& rng) {
  std::vector<Value*> values;
  for (Node* n : AllNodes(m))
    for (Value* v : n->results()) values.push_back(v);
  if (values.empty()) return false;
  Value* v = rng.Pick(values);
  if (!v->sharding()) {
    v->set_sharding(Sharding{std::vector<std::vector<std::string>>(v->type().rank()), {}});
  } else if (rng.Coin()) {
    v->set_sharding(std::nullopt);
  } else {
    Sharding s = *v->sharding();
    s.partial.push_back("mutated");
    v->set_sharding(s);
  }
  return true;
}

bool MutateNumReplicas(Module& m, Rng&) {
  m.set_num_replicas(m.num_replicas() + 1);
  return true;
}

bool MutateResultOrder(Module& m, Rng& rng) {
  StructuralEq eq;
  std::vector<std::tuple<Function*, size_t, size_t>> candidates;
  for (const auto& f : m.functions())
    for (size_t i = 0; i < f->results().size(); ++i)
      for (size_t j = i + 1; j < f->results().size(); ++j)
        if (!eq.Equal(f->results()[i], f->results()[j])) candidates.push_back({f.get(), i, j});
  if (candidates.empty()) return false;
  auto [f, i, j] = rng.Pick(candidates);
  std::vector<Value*> results = f->results();
  std::swap(results[i], results[j]);
  f->set_results(std::move(results));
  return true;
}

// Points one operand at another earlier value of the same type that is structurally different.
bool MutateRewire(Module& m, Rng& rng) {
  StructuralEq eq;
  std::vector<std::tuple<Node*, size_t, Value*>> candidates;
  for (const auto& f : m.functions()) {
    std::vector<Value*> earlier;
    for (const auto& n : f->nodes()) {
      for (size_t i = 0; i < n->num_operands(); ++i)
        for (Value* v : earlier)
          if (v->type() == n->operand(i)->type() && !eq.Equal(v, n->operand(i)))
            candidates.push_back({n.get(), i, v});
      for (Value* r : n->results()) earlier.push_back(r);
    }
  }
  if (candidates.empty()) return false;
  auto [n, i, v] = rng.Pick(candidates);
  n->set_operand(i, v);
  return true;
}

// Renames one function to a name no function of the module has.
bool MutateFunctionName(Module& m, Rng& rng) {
  Function* f = m.functions()[static_cast<size_t>(rng.Uniform(0, m.functions().size() - 1))].get();
  std::string name = f->name() + "_renamed";
  while (m.FindFunction(name) != nullptr) name += "_";
  f->set_name(name);
  return true;
}

struct Mutation {
  const char* name;
  bool (*apply)(Module&, Rng&);
  bool keeps_valid;  // the mutated module still verifies
};
void PrintTo(const Mutation& m, std::ostream* os) { *os << m.name; }

class SemanticMutation : public ::testing::TestWithParam<Mutation> {};

TEST_P(SemanticMutation, ChangesTheHash) {
  const Mutation& mutation = GetParam();
  int applied = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    std::unique_ptr<Module> m = RandomModule(seed, OptionsFor(seed));
    std::unique_ptr<Module> mutated = m->Clone();
    Rng rng(seed);
    if (!mutation.apply(*mutated, rng)) continue;
    ++applied;
    if (mutation.keeps_valid) ASSERT_NO_THROW(Verify(*mutated)) << Context(seed, *mutated);
    ASSERT_NE(HashModule(*mutated), HashModule(*m))
        << Context(seed, *m) << "\nmutated (" << mutation.name << "):\n"
        << PrintModule(*mutated);
  }
  EXPECT_GT(applied, static_cast<int>(kSeeds) / 4) << mutation.name << " was rarely applicable";
}

INSTANTIATE_TEST_SUITE_P(Property, SemanticMutation,
                         ::testing::Values(Mutation{"attribute", MutateAttribute, false},
                                           Mutation{"constant_bit", MutateConstantBit, true},
                                           Mutation{"swap_operands", MutateSwapOperands, false},
                                           Mutation{"convert_dtype", MutateConvertDType, false},
                                           Mutation{"sharding", MutateSharding, true},
                                           Mutation{"num_replicas", MutateNumReplicas, false},
                                           Mutation{"result_order", MutateResultOrder, true},
                                           Mutation{"rewire", MutateRewire, true},
                                           Mutation{"function_name", MutateFunctionName, true}),
                         [](const ::testing::TestParamInfo<Mutation>& info) {
                           return std::string(info.param.name);
                         });

// ---------------------------------------------------------------------------------------------
// Pinned hashes. These strings are the cache keys of existing caches: if one changes, the hash
// function changed (a new encoding, a platform dependence, a field that is no longer hashed).
// Change them only together with kHashVersion in src/ir/hash.cc.

constexpr std::string_view kMlpText = R"(module @mlp {
  func @main {
    %x = parameter() {index=0} : f32[4,8]
    %w = parameter() {index=1} : f32[8,2]
    %y = dot_general(%x, %w) {lhs_batch=[], rhs_batch=[], lhs_contracting=[1], rhs_contracting=[0]} : f32[4,2]
    return %y
  }
}
)";

TEST(Property, PinnedHashes) {
  EXPECT_EQ(HashModule(Module("empty")).ToHex(), "d3011c69615591f3afdd3bbd0759fdd0");

  EXPECT_EQ(HashModule(*ParseModule(kMlpText)).ToHex(), "badfcaabe17875af20f556a37f22c9b5");

  // Every field kind: literals (with -0 and nan), strings, enums, lists, groups, shardings.
  Module m("pinned");
  m.set_num_replicas(2);
  Builder b(m.AddFunction("main"), ShapeContext{2});
  Value* x = b.Parameter(0, TensorType(DType::kBF16, Shape{2, 3}), "x");
  Value* c = b.Constant(Literal::FromVector<uint16_t>(  // bf16 bits of 1.5, -0, 0, 384, nan, -2
      DType::kBF16, Shape{2, 3}, {0x3fc0, 0x8000, 0x0000, 0x43c0, 0x7fc0, 0xc000}));
  Value* s =
      b.Build1(OpKind::kAllReduce, {b.Mul(x, c)}, AllReduceAttrs{ReduceKind::kMax, {{1}, {0}}});
  s->set_sharding(Sharding{{{"data"}, {}}, {"model"}});
  Value* r = b.Reduce(b.Convert(s, DType::kF32), ReduceKind::kSum, {1});
  std::vector<Value*> k =
      b.Build(OpKind::kCustomCall, {r, x}, CustomCallAttrs{"axle.test.identity", "a\"b"},
              {r->type(), x->type()});
  b.Return({k[1], b.Compare(CompareDir::kLt, k[0], r)});
  Builder b2(m.AddFunction("aux"));
  b2.Return({b2.Iota(TensorType(DType::kI64, Shape{5}), 0)});
  ASSERT_NO_THROW(Verify(m));
  EXPECT_EQ(HashModule(m).ToHex(), "3dd4313a26eeaac3351cdc2b525a78db");
}

// The generator is portable too (splitmix64, no <random> distributions): the same seeds give the
// same modules on every platform. Update these when the generator changes on purpose.
TEST(Property, RandomModulesArePortable) {
  EXPECT_EQ(HashModule(*RandomModule(1)).ToHex(), "704178076984e03162c670b63e1d6ea0");
  EXPECT_EQ(HashModule(*RandomModule(2, OptionsFor(1))).ToHex(),
            "a8e39b70030a65f6134e7cc388d1d650");
  // A large module that holds most ops.
  RandomModuleOptions big = OptionsFor(1);
  big.num_nodes = 300;
  big.num_replicas = 4;
  big.max_functions = 1;
  std::unique_ptr<Module> m = RandomModule(3, big);
  std::set<OpKind> ops;
  for (const auto& n : m->entry()->nodes()) ops.insert(n->op());
  EXPECT_GT(ops.size(), static_cast<size_t>(kNumOps) * 9 / 10);
  EXPECT_EQ(HashModule(*m).ToHex(), "2df6fe7ff9ff90708853bbe95e193c10");
}

}  // namespace
}  // namespace axle::ir
