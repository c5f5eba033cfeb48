// Autodiff for lazy tensors: requires_grad_, backward(), grad(), detach(), dropout's generator.
//
// backward() is the IR -> IR transformation of src/autodiff applied to the current trace: the
// leaves that require grad are values of the trace (parameters for materialized tensors), and
// BuildVjp appends the backward nodes to the same trace, so forward, backward and the optimizer
// update become one step and one executable. Values computed under NoGradGuard or by detach() are
// stop-gradient values: no cotangent flows into them.
#include <fmt/format.h>

#include "autodiff/vjp.h"
#include "axle/remat.h"
#include "frontend/lazy.h"
#include "frontend/ops_internal.h"

namespace axle {
using detail::B;
using detail::CurrentTrace;
using detail::MakePending;
using detail::TensorImpl;
using detail::ValueOf;

namespace {
// Leaves that requested gradients (pruned when they die).
std::vector<std::weak_ptr<TensorImpl>>& Leaves() {
  static std::vector<std::weak_ptr<TensorImpl>> leaves;
  return leaves;
}
}  // namespace

Tensor& Tensor::requires_grad_(bool on) {
  AXLE_CHECK(defined(), "requires_grad_() on an undefined tensor");
  if (on && !IsFloat(dtype()))
    Fail("requires_grad_(): only floating tensors can require gradients, got {}", type_string());
  if (on && !impl_->is_leaf)
    Fail("requires_grad_(): {} is computed from tensors that require grad (not a leaf); use "
         "detach().requires_grad_() for a new leaf",
         type_string());
  if (on && !impl_->requires_grad) Leaves().push_back(impl_);
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::requires_grad() const { return defined() && impl_->requires_grad; }
bool Tensor::is_leaf() const { return defined() && impl_->is_leaf; }

Tensor Tensor::grad() const {
  AXLE_CHECK(defined(), "grad() of an undefined tensor");
  return impl_->grad ? Tensor(impl_->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  AXLE_CHECK(defined(), "set_grad() on an undefined tensor");
  if (g.defined() && g.impl()->type != impl_->type)
    Fail("set_grad(): a gradient {} for a tensor {}", g.type_string(), type_string());
  impl_->grad = g.impl();
}

Tensor Tensor::detach() const {
  // A new value (an identity reshape) so that cutting it leaves this tensor's gradient intact.
  ir::Value* v = B().Reshape(ValueOf(*this), Shape(sizes()));
  Tensor out = MakePending(v, false);
  CurrentTrace().stop_gradient.insert(v);
  return out;
}

void Tensor::backward(const Tensor& gradient) const {
  AXLE_CHECK(defined(), "backward() on an undefined tensor");
  detail::Trace& t = CurrentTrace();
  TensorImpl& self = *impl_;
  if (self.value == nullptr || self.epoch != t.epoch)
    Fail("backward(): {} was computed before the last axle::sync(), which cut its graph; call "
         "backward() before sync() in the step that computes it",
         type_string());
  if (!self.requires_grad)
    Fail("backward(): {} does not require grad: no tensor it was computed from has "
         "requires_grad_() set (or it was computed under NoGradGuard)",
         type_string());
  ir::Value* seed;
  if (gradient.defined()) {
    if (gradient.sizes() != sizes())
      Fail("backward(): gradient {} does not match the tensor {}", gradient.type_string(),
           type_string());
    seed = detail::Cast(ValueOf(gradient), dtype());
  } else {
    if (numel() != 1)
      Fail("backward(): grad can be implicitly created only for a one-element tensor, not {}; "
           "pass a gradient",
           type_string());
    seed = detail::Full(sizes(), dtype(), 1.0);
  }

  // The leaves this output depends on.
  std::unordered_set<const ir::Node*> reach{self.value->node()};
  const auto& nodes = t.fn->nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (reach.count(it->get()))
      for (ir::Value* v : (*it)->operands()) reach.insert(v->node());
  std::vector<std::shared_ptr<TensorImpl>> leaves;
  std::vector<ir::Value*> wrt;
  auto& all = Leaves();
  std::erase_if(all, [](const auto& w) { return w.expired(); });
  for (const auto& w : all) {
    auto leaf = w.lock();
    if (!leaf->requires_grad) continue;
    ir::Value* v = nullptr;
    if (leaf->value != nullptr && leaf->epoch == t.epoch) {
      v = leaf->value;
    } else if (leaf->data != nullptr) {
      auto found = t.input_value.find(leaf->data.get());
      if (found != t.input_value.end()) v = found->second;
    }
    if (v == nullptr || !reach.count(v->node())) continue;
    leaves.push_back(leaf);
    wrt.push_back(v);
  }
  if (wrt.empty()) return;
  std::vector<ir::Value*> outs{self.value}, seeds{seed};
  std::vector<ir::Value*> grads = autodiff::BuildVjp(B(), outs, seeds, wrt, &t.stop_gradient, t.remat_regions);
  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    Tensor g = MakePending(grads[i], false);
    leaves[i]->grad = leaves[i]->grad ? (Tensor(leaves[i]->grad) + g).impl() : g.impl();
  }
}

// ---- Gradient checkpointing (include/axle/remat.h) -----------------------------------------------
RematPolicy ParseRematPolicy(const std::string& name) {
  if (name == "none") return RematPolicy::kNone;
  if (name == "full") return RematPolicy::kFull;
  if (name == "selective") return RematPolicy::kSaveProducts;
  Fail("remat policy '{}': expected none, full (recompute every activation of a block) or selective (keep the "
       "products' results, recompute the rest)",
       name);
}

std::string RematPolicyName(RematPolicy policy) {
  switch (policy) {
    case RematPolicy::kNone: return "none";
    case RematPolicy::kFull: return "full";
    case RematPolicy::kSaveProducts: return "selective";
  }
  return "none";
}

std::vector<Tensor> remat(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, RematPolicy policy) {
  detail::Trace& t = CurrentTrace();
  if (policy == RematPolicy::kNone || t.in_remat || !grad_enabled()) return fn(inputs);
  const uint64_t epoch = t.epoch;
  const size_t start = t.fn->nodes().size();
  t.in_remat = true;
  std::vector<Tensor> out;
  try {
    out = fn(inputs);
  } catch (...) {
    t.in_remat = false;
    throw;
  }
  t.in_remat = false;
  if (CurrentTrace().epoch != epoch)
    Fail("remat: the function called axle::sync(), which ends the step being traced; a remat region must lie "
         "within one step");
  autodiff::RematRegion region;
  region.policy = policy == RematPolicy::kFull ? autodiff::RematRegion::Policy::kFull
                                               : autodiff::RematRegion::Policy::kSaveProducts;
  // Sources are not recomputed: a parameter is an argument of the step (a weight first read inside
  // the region), a constant a literal.
  for (size_t i = start; i < t.fn->nodes().size(); ++i) {
    const ir::Node* n = t.fn->nodes()[i].get();
    if (n->op() != ir::OpKind::kParameter && n->op() != ir::OpKind::kConstant) region.nodes.push_back(n);
  }
  if (!region.nodes.empty()) t.remat_regions.push_back(std::move(region));
  return out;
}

Tensor remat(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, RematPolicy policy) {
  return remat([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input}, policy)[0];
}

// ---- The global generator (dropout) ------------------------------------------------------------
namespace {
struct Generator {
  uint64_t seed = 0;
  Tensor counter;  // u32[4] device state: advanced inside the graph, so steps hash the same
};
Generator& Gen() {
  static Generator g;
  return g;
}
}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = Gen();
  g.seed = seed;
  g.counter = from_vector<uint32_t>({0, 0, 0, 0}, {4}, DType::kU32);
}

uint64_t rng_seed() { return Gen().seed; }

Tensor rng_counter() {
  Generator& g = Gen();
  if (!g.counter.defined()) manual_seed(g.seed);
  return g.counter;
}

namespace detail {
// Random u32 bits from the global generator; advances its counter past them.
ir::Value* NextRandomBits(const Dims& shape) {
  Generator& g = Gen();
  if (!g.counter.defined()) manual_seed(g.seed);
  ir::Value* counter = ValueOf(g.counter);
  ir::Value* key = B().Constant(ir::Literal::FromVector<uint32_t>(
      DType::kU32, Shape{2},
      {static_cast<uint32_t>(g.seed & 0xffffffffu), static_cast<uint32_t>(g.seed >> 32)}));
  ir::Value* bits = B().Build1(ir::OpKind::kRngBitGenerator, {key, counter}, ir::NoAttrs{},
                               {ir::TensorType(DType::kU32, Shape(shape))});
  const int64_t blocks = (Shape(shape).NumElements() + 3) / 4;
  ir::Value* inc = B().Constant(ir::Literal::FromVector<uint32_t>(
      DType::kU32, Shape{4}, {static_cast<uint32_t>(blocks), 0, 0, 0}));
  NoGradGuard no_grad;
  detail::Rebind(*g.counter.impl(), B().Add(counter, inc));
  return bits;
}
}  // namespace detail

}  // namespace axle
