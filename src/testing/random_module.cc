#include "testing/random_module.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/half.h"
#include "ir/interpreter.h"
#include "testing/random_module_internal.h"

namespace axle::testing {
namespace internal {

using ir::OpKind;
using ir::TensorType;
using ir::Value;

// ---------------------------------------------------------------------------------------------
// Rng.

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t Rng::Uniform(int64_t lo, int64_t hi) {
  AXLE_CHECK(lo <= hi, "Uniform({}, {})", lo, hi);
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  const uint64_t r = span == 0 ? Next() : Next() % span;  // span 0: the full 64-bit range
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + r);
}

std::vector<int64_t> Rng::Permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  Shuffle(p);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Random elements.

namespace {

// A random finite or infinite float element of `dtype` from random bits (NaN -> canonical NaN).
double RawFloat(DType dtype, Rng& rng) {
  const uint64_t bits = rng.Next();
  double v = 0;
  switch (dtype) {
    case DType::kF64: std::memcpy(&v, &bits, 8); break;
    case DType::kF32: v = BitsToFloat(static_cast<uint32_t>(bits)); break;
    case DType::kBF16: v = BF16ToFloat(static_cast<uint16_t>(bits)); break;
    default: v = F16ToFloat(static_cast<uint16_t>(bits)); break;
  }
  return std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v;
}

// Random bits as a value of integer type `dtype` (sign-extended or masked to its width).
int64_t RawInt(DType dtype, Rng& rng) {
  const uint64_t bits = rng.Next();
  switch (dtype) {
    case DType::kI8: return static_cast<int8_t>(bits);
    case DType::kI32: return static_cast<int32_t>(bits);
    case DType::kU8: return static_cast<uint8_t>(bits);
    case DType::kU32: return static_cast<uint32_t>(bits);
    default: return static_cast<int64_t>(bits);
  }
}

// A special element of float type `dtype`, exact in that type (so no rounding is involved).
double SpecialFloat(DType dtype, Rng& rng) {
  double max = 0, tiny = 0;  // the largest finite and the smallest subnormal value
  switch (dtype) {
    case DType::kF64:
      max = std::numeric_limits<double>::max();
      tiny = std::numeric_limits<double>::denorm_min();
      break;
    case DType::kF32:
      max = std::numeric_limits<float>::max();
      tiny = std::numeric_limits<float>::denorm_min();
      break;
    case DType::kBF16:
      max = BF16ToFloat(0x7f7f);
      tiny = BF16ToFloat(0x0001);
      break;
    default:
      max = F16ToFloat(0x7bff);
      tiny = F16ToFloat(0x0001);
      break;
  }
  const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            -0.0,
                            0.0,
                            tiny,
                            max,
                            -max};
  return special[rng.Uniform(0, std::size(special) - 1)];
}

int64_t SpecialInt(Rng& rng) {
  switch (rng.Uniform(0, 3)) {
    case 0: return 0;
    case 1: return -1;                                   // saturates to 0 for unsigned types
    case 2: return std::numeric_limits<int64_t>::min();  // saturates to the type's minimum
    default: return std::numeric_limits<int64_t>::max();
  }
}

}  // namespace

void FillRandom(ir::Literal& lit, Rng& rng, const ElementMix& mix) {
  const DType t = lit.dtype();
  for (int64_t i = 0; i < lit.NumElements(); ++i) {
    const int64_t kind = rng.Uniform(0, 99);
    const bool special = kind < mix.special_percent;
    const bool raw = !special && kind < mix.special_percent + mix.raw_bits_percent;
    if (IsBool(t)) {
      lit.SetInt64(i, rng.Coin() ? 1 : 0);
    } else if (IsFloat(t)) {
      lit.SetDouble(i, special ? SpecialFloat(t, rng)
                       : raw   ? RawFloat(t, rng)
                               : static_cast<double>(rng.Uniform(-32, 32)) / 8.0);
    } else {
      lit.SetInt64(i, special ? SpecialInt(rng) : raw ? RawInt(t, rng) : rng.Uniform(-8, 8));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Names.

std::string RandomValueName(Rng& rng) {
  // Short names repeat often; "0", "7" and "x.1" collide with the printer's own numbering and
  // de-duplication suffixes.
  static const std::vector<std::string> kNames = {"x", "y",   "z",   "a",   "b",    "h",
                                                  "w", "out", "tmp", "a.b", "v_1",  "_t",
                                                  "0", "1",   "7",   "x.1", "main", "Q9"};
  std::string name = rng.Pick(kNames);
  if (rng.Percent(20)) name += "_" + std::to_string(rng.Uniform(0, 99));
  return name;
}

namespace {

std::vector<std::string> FunctionNames(Rng& rng, int count) {
  std::vector<std::string> pool = {"f", "g", "body", "step", "helper", "f.2", "_aux", "main"};
  for (int i = static_cast<int>(pool.size()); i < count; ++i)
    pool.push_back("fn" + std::to_string(i));
  rng.Shuffle(pool);
  if (rng.Percent(85)) {
    std::erase(pool, "main");
    pool.insert(pool.begin(), "main");
  }
  pool.resize(static_cast<size_t>(count));
  return pool;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Generator: shapes, types and operands.

Generator::Generator(uint64_t seed, const RandomModuleOptions& options)
    : rng_(seed), options_(options) {
  if (options_.max_rank < 0 || options_.max_dim < 1 || options_.num_nodes < 0 ||
      options_.max_functions < 1 || options_.num_replicas < 1 || options_.max_parameters < 0 ||
      options_.max_results < 0)
    Fail(
        "RandomModuleOptions: need max_rank >= 0, max_dim >= 1, num_nodes >= 0, "
        "max_functions >= 1, num_replicas >= 1 and non-negative parameter and result counts");
  for (const ir::OpInfo& info : ir::AllOps())
    if (GetOpGenerator(info.kind) == nullptr)
      Fail(
          "RandomModule has no generator for op '{}'; add one to GetOpGenerator in "
          "src/testing/random_module_ops.cc",
          info.name);
  ops_ = EnabledOps();
}

std::vector<OpKind> Generator::EnabledOps() const {
  std::vector<OpKind> ops = options_.ops;
  if (ops.empty())
    for (const ir::OpInfo& info : ir::AllOps())
      if ((options_.collectives || !info.Has(ir::kCollective)) && (options_.fusions || info.kind != OpKind::kFusion))
        ops.push_back(info.kind);
  return ops;
}

bool Generator::Fits(const TensorType& t) const {
  if (t.rank() > options_.max_rank) return false;
  for (int64_t d : t.shape.dims())
    if (d > DimLimit()) return false;
  return true;
}

int64_t Generator::RandomDim() {
  if (options_.allow_zero_sized && rng_.Percent(5)) return 0;
  return rng_.Uniform(1, options_.max_dim);
}

Shape Generator::RandomShape(int64_t min_rank) {
  const int64_t rank = rng_.Uniform(min_rank, options_.max_rank);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) dims.push_back(RandomDim());
  return Shape(std::move(dims));
}

std::optional<DType> Generator::PickDType(const DTypePred& pred) {
  std::vector<DType> ok;
  for (DType t : options_.dtypes)
    if (pred(t)) ok.push_back(t);
  if (ok.empty()) return std::nullopt;
  return rng_.Pick(ok);
}

Value* Generator::Pick(const std::function<bool(const Value&)>& pred) {
  std::vector<Value*> ok;
  for (Value* v : pool_)
    if (pred(*v)) ok.push_back(v);
  if (ok.empty()) return nullptr;
  // Half the time one of the newest candidates, which makes chains deeper than uniform picks do.
  if (ok.size() > 3 && rng_.Coin()) ok.erase(ok.begin(), ok.end() - 3);
  return rng_.Pick(ok);
}

Value* Generator::Operand(const DTypePred& pred, int64_t min_rank) {
  if (min_rank > options_.max_rank) return nullptr;
  if (rng_.Percent(80)) {
    Value* v = Pick([&](const Value& v) { return pred(v.dtype()) && v.type().rank() >= min_rank; });
    if (v != nullptr) return v;
  }
  std::optional<DType> dtype = PickDType(pred);
  if (!dtype) return nullptr;
  return Fresh(TensorType(*dtype, RandomShape(min_rank)));
}

Value* Generator::OfType(const TensorType& type) {
  if (rng_.Percent(70)) {
    Value* v = Pick([&](const Value& v) { return v.type() == type; });
    if (v != nullptr) return v;
  }
  return Fresh(type);
}

Value* Generator::Fresh(const TensorType& type) {
  const int64_t choice = rng_.Uniform(0, 99);
  if (choice < 35 && num_parameters_ < options_.max_parameters) {
    Value* v = builder_->Parameter(num_parameters_++, type);
    pool_.push_back(v);
    return v;
  }
  if (choice < 45 && IsNumeric(type.dtype) && type.rank() > 0)
    return Build(OpKind::kIota, {}, ir::IotaAttrs{rng_.Uniform(0, type.rank() - 1)}, {type})[0];
  ir::Literal lit(type);
  FillRandom(lit, rng_, ElementMix{});
  return Build(OpKind::kConstant, {}, ir::ConstantAttrs{std::move(lit)})[0];
}

Value* Generator::IndexConstant(DType dtype, const Shape& shape, int64_t lo, int64_t hi) {
  ir::Literal lit(TensorType(dtype, shape));
  for (int64_t i = 0; i < lit.NumElements(); ++i) lit.SetInt64(i, rng_.Uniform(lo, hi));
  return Build(OpKind::kConstant, {}, ir::ConstantAttrs{std::move(lit)})[0];
}

DType Generator::IndexDType() {
  static const std::vector<DType> kUsual = {DType::kI32, DType::kI64};
  static const std::vector<DType> kRare = {DType::kI8, DType::kU8, DType::kU32};
  return rng_.Pick(rng_.Percent(80) ? kUsual : kRare);
}

std::pair<ir::ReplicaGroups, int64_t> Generator::RandomGroups() {
  const int64_t n = options_.num_replicas;
  if (rng_.Percent(30)) return {{}, n};
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) divisors.push_back(d);
  const int64_t size = rng_.Pick(divisors);
  std::vector<int64_t> ids = rng_.Permutation(n);
  ir::ReplicaGroups groups(static_cast<size_t>(n / size));
  for (int64_t i = 0; i < n; ++i) groups[static_cast<size_t>(i / size)].push_back(ids[i]);
  return {std::move(groups), size};
}

std::vector<Value*> Generator::Build(OpKind op, std::vector<Value*> operands, ir::Attrs attrs,
                                     std::vector<TensorType> declared) {
  std::vector<Value*> results =
      builder_->Build(op, std::move(operands), std::move(attrs), std::move(declared));
  for (Value* v : results) {
    AXLE_CHECK(Fits(v->type()), "random {} yields {}, beyond max_rank {} / dim limit {}",
               ir::OpName(op), v->type().ToString(), options_.max_rank, DimLimit());
    pool_.push_back(v);
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Generator: functions and the module.

ir::Sharding Generator::RandomSharding(int64_t rank) {
  std::vector<std::string> axes = {"x", "y", "z", "w"};
  rng_.Shuffle(axes);
  ir::Sharding s;
  for (int64_t i = 0; i < rank; ++i) {
    std::vector<std::string> dim_axes;
    while (!axes.empty() && rng_.Percent(dim_axes.empty() ? 40 : 25)) {
      dim_axes.push_back(axes.back());
      axes.pop_back();
    }
    s.dims.push_back(std::move(dim_axes));
  }
  while (!axes.empty() && rng_.Percent(20)) {
    s.partial.push_back(axes.back());
    axes.pop_back();
  }
  return s;
}

void Generator::Annotate() {
  for (Value* v : pool_) {
    if (rng_.Percent(options_.sharding_percent)) v->set_sharding(RandomSharding(v->type().rank()));
    if (rng_.Percent(options_.name_percent)) v->set_name(RandomValueName(rng_));
  }
}

void Generator::ChooseResults(ir::Function* f) {
  std::vector<Value*> results;
  if (!pool_.empty() && options_.max_results > 0 && !rng_.Percent(5)) {
    std::vector<Value*> unused = pool_;
    for (Value* v : pool_)
      for (Value* operand : v->node()->operands()) std::erase(unused, operand);
    const int64_t count = rng_.Uniform(1, options_.max_results);
    for (int64_t i = 0; i < count; ++i)
      results.push_back(!unused.empty() && rng_.Percent(70) ? rng_.Pick(unused) : rng_.Pick(pool_));
  }
  f->set_results(std::move(results));
}

void Generator::BuildFunction(ir::Function* f) {
  builder_.emplace(f, ir::ShapeContext{options_.num_replicas});
  pool_.clear();
  num_parameters_ = 0;
  for (int step = 0; step < options_.num_nodes && !ops_.empty(); ++step) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      const OpKind op = rng_.Pick(ops_);
      if (GetOpGenerator(op)(*this, op)) break;
    }
  }
  if (pool_.empty() && options_.num_nodes > 0)
    Fail("RandomModule: the options admit no valid node (dtypes and ops too restricted?)");
  ChooseResults(f);
  Annotate();
}

std::unique_ptr<ir::Module> Generator::Run() {
  static const std::vector<std::string> kModuleNames = {"m", "test", "mlp", "a.b", "fuzz"};
  auto m = std::make_unique<ir::Module>(rng_.Pick(kModuleNames));
  m->set_num_replicas(options_.num_replicas);
  const int count = static_cast<int>(rng_.Uniform(1, options_.max_functions));
  for (const std::string& name : FunctionNames(rng_, count)) BuildFunction(m->AddFunction(name));
  builder_.reset();
  return m;
}

}  // namespace internal

// ---------------------------------------------------------------------------------------------
// Public API.

std::vector<DType> AllDTypes() {
  std::vector<DType> all;
  for (int i = 0; i < kNumDTypes; ++i) all.push_back(static_cast<DType>(i));
  return all;
}

std::unique_ptr<ir::Module> RandomModule(uint64_t seed, const RandomModuleOptions& options) {
  return internal::Generator(seed, options).Run();
}

void RegisterTestCustomCalls() {
  ir::RegisterCustomCall("axle.test.identity",
                         [](const std::vector<ir::Literal>& operands, const ir::CustomCallAttrs&,
                            const std::vector<ir::TensorType>&) { return operands; });
}

std::vector<ir::Literal> RandomArguments(const ir::Function& f, uint64_t seed) {
  internal::Rng rng(seed ^ 0x5851f42d4c957f2dull);
  std::vector<ir::Literal> args;
  for (const ir::Node* p : f.Parameters()) {
    ir::Literal lit(p->result()->type());
    internal::FillRandom(lit, rng,
                         internal::ElementMix{.special_percent = 3, .raw_bits_percent = 5});
    args.push_back(std::move(lit));
  }
  return args;
}

namespace {

// The nodes of `f` in a random topological order (Kahn's algorithm, random ready node first).
std::vector<const ir::Node*> RandomTopologicalOrder(const ir::Function& f, internal::Rng& rng) {
  std::unordered_map<const ir::Node*, size_t> pending;  // node -> operands' producers not placed
  std::unordered_map<const ir::Node*, std::vector<const ir::Node*>> users;
  for (const auto& n : f.nodes()) {
    std::vector<const ir::Node*> producers;
    for (const ir::Value* v : n->operands())
      if (std::find(producers.begin(), producers.end(), v->node()) == producers.end())
        producers.push_back(v->node());
    pending[n.get()] = producers.size();
    for (const ir::Node* p : producers) users[p].push_back(n.get());
  }
  std::vector<const ir::Node*> ready, order;
  for (const auto& n : f.nodes())
    if (pending[n.get()] == 0) ready.push_back(n.get());
  while (!ready.empty()) {
    const size_t i = static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(ready.size()) - 1));
    const ir::Node* n = ready[i];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(i));
    order.push_back(n);
    for (const ir::Node* u : users[n])
      if (--pending[u] == 0) ready.push_back(u);
  }
  AXLE_CHECK(order.size() == f.nodes().size(), "function @{} has a cycle or a foreign operand",
             f.name());
  return order;
}

void CopyFunctionInOrder(const ir::Function& from, const std::vector<const ir::Node*>& order,
                         ir::Function* to) {
  to->set_loc(from.loc());
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const ir::Node* n : order) {
    std::vector<ir::Value*> operands;
    for (const ir::Value* v : n->operands()) operands.push_back(map.at(v));
    std::vector<ir::TensorType> types;
    for (const ir::Value* r : n->results()) types.push_back(r->type());
    ir::Node* copy = to->AddNode(n->op(), std::move(operands), n->attrs(), types);
    copy->set_loc(n->loc());
    for (size_t i = 0; i < n->num_results(); ++i) {
      copy->result(i)->set_name(n->result(i)->name());
      copy->result(i)->set_sharding(n->result(i)->sharding());
      map[n->result(i)] = copy->result(i);
    }
  }
  std::vector<ir::Value*> results;
  for (const ir::Value* r : from.results()) results.push_back(map.at(r));
  to->set_results(std::move(results));
}

}  // namespace

std::unique_ptr<ir::Module> ShuffleIndependentNodes(const ir::Module& m, uint64_t seed) {
  internal::Rng rng(seed ^ 0x2545f4914f6cdd1dull);
  auto copy = std::make_unique<ir::Module>(m.name());
  copy->set_num_replicas(m.num_replicas());
  for (const auto& f : m.functions())
    CopyFunctionInOrder(*f, RandomTopologicalOrder(*f, rng), copy->AddFunction(f->name()));
  return copy;
}

void RenameValues(ir::Module& m, uint64_t seed) {
  internal::Rng rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (const auto& f : m.functions())
    for (const auto& n : f->nodes())
      for (ir::Value* v : n->results())
        v->set_name(rng.Percent(25) ? std::string() : internal::RandomValueName(rng));
}

}  // namespace axle::testing
