// The reverse-mode driver (BuildVjp, GradModule), the VJP table and the helpers the rules share.
#include "autodiff/vjp.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autodiff/vjp_internal.h"
#include "ir/printer.h"

namespace axle::autodiff {
namespace internal {

Value* ScalarConst(Builder& b, DType dtype, double v) { return b.Scalar(dtype, v); }

Value* Full(Builder& b, const ir::TensorType& type, double v) {
  Value* s = b.Scalar(type.dtype, v);
  if (type.rank() == 0) return s;
  return b.BroadcastInDim(s, type.shape, {});
}

Value* Neg(Builder& b, Value* x) { return b.Unary(OpKind::kNeg, x); }

Value* Cmp(Builder& b, ir::CompareDir dir, Value* lhs, Value* rhs) {
  return b.Compare(dir, lhs, rhs);
}

Value* Mask(Builder& b, Value* pred, Value* like) {
  return b.Select(pred, FullLike(b, like, 1.0), FullLike(b, like, 0.0));
}

Value* ReduceSum(Builder& b, Value* x, std::vector<int64_t> dims) {
  if (dims.empty()) return x;
  return b.Reduce(x, ir::ReduceKind::kSum, std::move(dims));
}

Value* SumAll(Builder& b, Value* x) {
  std::vector<int64_t> dims(static_cast<size_t>(x->type().rank()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  return ReduceSum(b, x, std::move(dims));
}

Value* SumToOperand(Builder& b, Value* g, Value* operand) {
  if (operand->type().rank() == 0 && g->type().rank() != 0) return SumAll(b, g);
  return g;
}

Value* Broadcast(Builder& b, Value* x, const Shape& shape, std::vector<int64_t> dims) {
  if (x->shape() == shape) return x;
  return b.BroadcastInDim(x, shape, std::move(dims));
}

std::vector<int64_t> KeptDims(int64_t rank, const std::vector<int64_t>& removed) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(removed.begin(), removed.end(), i) == removed.end()) kept.push_back(i);
  return kept;
}

std::vector<int64_t> InversePermutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace internal

namespace {

using namespace internal;

VjpTable BuildTable() {
  VjpTable t{};
  for (VjpEntry& e : t)
    e = VjpEntry{VjpKind::kNotDifferentiable, nullptr, {}};  // reason empty = missing
  RegisterElementwiseVjps(t);
  RegisterMovementVjps(t);
  RegisterReduceVjps(t);
  RegisterMiscVjps(t);
  return t;
}

// The backward pass over one function (docs/autodiff.md, "How BuildVjp works"): nodes are
// visited in reverse execution order, so every use of a value has contributed its cotangent
// before the value's producer is visited.
class ReverseWalk {
 public:
  ReverseWalk(Builder& b, const std::unordered_set<const Value*>* stop, std::span<const RematRegion> remat)
      : b_(b), f_(*b.function()), stop_(stop), remat_(remat) {}

  std::vector<Value*> Run(std::span<Value* const> outputs, std::span<Value* const> cotangents,
                          std::span<Value* const> wrt);

 private:
  void MarkRelevant(std::span<Value* const> outputs, std::span<Value* const> wrt);
  void Accumulate(Value* v, Value* g);
  void VisitNode(const Node& node);
  void Recompute(size_t region);
  void EraseUnused(size_t first_new, const std::vector<Value*>& keep);

  // Dense slots for the forward function's nodes and values (indexed by node id; a value's slot
  // is its node's first slot plus its index): the lazy trace runs this walk every step, and hash
  // sets of its ~1000 nodes were a tenth of the host's allocations. Values built during the walk
  // (cotangents) have no slot and are never looked up.
  void IndexForward();
  size_t Slot(const Value* v) const { return static_cast<size_t>(first_slot_[static_cast<size_t>(v->node()->id())] + v->index()); }
  bool InForward(const Value* v) const {
    const int64_t id = v->node()->id();
    return id < static_cast<int64_t>(first_slot_.size()) && first_slot_[static_cast<size_t>(id)] >= 0;
  }
  bool Depends(const Value* v) const { return InForward(v) && depends_[Slot(v)]; }

  Builder& b_;
  ir::Function& f_;
  std::vector<int64_t> first_slot_;               // by node id; -1: not a forward node
  std::vector<char> relevant_;                    // by node id: on a path wrt -> outputs
  std::vector<char> depends_;                     // by slot: depends on some wrt value
  std::vector<Value*> cot_;                       // by slot: accumulated cotangents
  const std::unordered_set<const Value*>* stop_;  // values no cotangent flows into (nullable)
  // Note [Recomputed regions]: each forward node's region (-1: none), whether the region has been
  // recomputed, and for a recomputed node the node its rule reads (the recomputation).
  std::span<const RematRegion> remat_;
  std::vector<int32_t> region_of_;    // by node id
  std::vector<char> recomputed_;      // by region
  std::unordered_map<const Node*, const Node*> rule_node_;
};

void ReverseWalk::IndexForward() {
  first_slot_.assign(static_cast<size_t>(f_.id_bound()), -1);
  int64_t slots = 0;
  for (const auto& n : f_.nodes()) {
    first_slot_[static_cast<size_t>(n->id())] = slots;
    slots += static_cast<int64_t>(n->num_results());
  }
  relevant_.assign(first_slot_.size(), 0);
  depends_.assign(static_cast<size_t>(slots), 0);
  cot_.assign(static_cast<size_t>(slots), nullptr);
}

void ReverseWalk::MarkRelevant(std::span<Value* const> outputs, std::span<Value* const> wrt) {
  for (Value* w : wrt) depends_[Slot(w)] = 1;
  for (const auto& n : f_.nodes()) {
    bool dep = std::any_of(n->operands().begin(), n->operands().end(), [&](Value* v) { return Depends(v); });
    if (dep)
      for (Value* r : n->results())
        if (stop_ == nullptr || !stop_->count(r)) depends_[Slot(r)] = 1;
  }
  std::vector<char> needed(first_slot_.size(), 0);
  for (Value* o : outputs) needed[static_cast<size_t>(o->node()->id())] = 1;
  for (auto it = f_.nodes().rbegin(); it != f_.nodes().rend(); ++it) {
    const Node* n = it->get();
    if (!needed[static_cast<size_t>(n->id())]) continue;
    for (Value* v : n->operands()) needed[static_cast<size_t>(v->node()->id())] = 1;
    const auto results = n->results();
    if (std::any_of(results.begin(), results.end(), [&](Value* v) { return Depends(v); }))
      relevant_[static_cast<size_t>(n->id())] = 1;
  }
}

void ReverseWalk::Accumulate(Value* v, Value* g) {
  if (g == nullptr || !CarriesGradient(v) || !Depends(v)) return;
  AXLE_CHECK(g->type() == v->type(), "cotangent of type {} for a value of type {}",
             g->type().ToString(), v->type().ToString());
  Value*& slot = cot_[Slot(v)];
  slot = slot == nullptr ? g : b_.Add(slot, g);
}

void ReverseWalk::VisitNode(const Node& node) {
  std::vector<Value*> gs;
  bool any = false;
  for (Value* r : node.results()) {
    gs.push_back(cot_[Slot(r)]);
    any = any || gs.back() != nullptr;
  }
  if (!any) return;
  const VjpEntry* e = GetVjp(node.op());
  AXLE_CHECK(e != nullptr, "no VJP entry for {}", node.name());
  if (e->kind == VjpKind::kZeroGradient) return;
  if (e->kind == VjpKind::kNotDifferentiable) {
    for (Value* v : node.operands())
      if (CarriesGradient(v) && Depends(v))
        FailAt(node.loc(), "autodiff: cannot differentiate through {}: {}\n  node: {}", node.name(),
               e->reason, ir::PrintNode(node));
    return;
  }
  // Multi-result nodes: a float result without a cotangent gets zeros, so rules see one value per
  // float result.
  if (gs.size() > 1)
    for (size_t i = 0; i < gs.size(); ++i)
      if (gs[i] == nullptr && CarriesGradient(node.result(i)))
        gs[i] = Zeros(b_, node.result(i)->type());
  // Note [Recomputed regions]: a region node's rule reads its recomputation (the same operands
  // positionally: the cotangents it returns are the forward operands').
  auto rn = rule_node_.find(&node);
  const Node& rule_node = rn != rule_node_.end() ? *rn->second : node;
  std::vector<Value*> operand_cots = e->rule(b_, rule_node, gs);
  AXLE_CHECK(operand_cots.size() == node.num_operands(),
             "VJP rule of {} returned {} cotangents for {} operands", node.name(),
             operand_cots.size(), node.num_operands());
  for (size_t i = 0; i < operand_cots.size(); ++i) Accumulate(node.operand(i), operand_cots[i]);
}

// Note [Recomputed regions]
// Gradient checkpointing (PyTorch's torch.utils.checkpoint, JAX's jax.checkpoint). When the
// reverse walk reaches a region (at its last node), it recomputes the region before visiting it:
//   1. the region's inputs that are computed values depending on a wrt value (activations, not
//      parameters, constants or masks), and the cotangents already accumulated for the region's
//      values (its outputs' cotangents: every use outside the region comes later and has been
//      visited), go through one optimization_barrier;
//   2. every region node is cloned, in order, reading the barrier's results for those inputs and
//      the clones for region values (other inputs as they are);
//   3. the region's rules then run on the clones (VisitNode), so the backward reads the
//      recomputed values, and no backward node reads a forward intermediate of the region: those
//      die after the forward, and only the region's inputs live until the backward.
// The barrier keeps the recomputation a recomputation: CSE never merges across it (the clones
// would otherwise be the forward nodes again), and since it waits for the outputs' cotangents the
// recomputation cannot run before the backward reaches the region. The clones compute the same
// operations on the same values in the same order, so gradients are bitwise those without remat
// (rng_bit_generator is a function of its key and counter: dropout draws the same mask).
// kSaveProducts (selective remat, the "save matmuls" policy): a dot_general's clone is made for
// its rule (to read the recomputed operands) but later clones read the forward's product, which is
// saved; norms, activations and the other elementwise work are recomputed.
void ReverseWalk::Recompute(size_t r) {
  const RematRegion& region = remat_[r];
  std::unordered_set<const Node*> in_region(region.nodes.begin(), region.nodes.end());
  std::vector<Value*> barrier_in;
  std::unordered_map<const Value*, size_t> barrier_index;
  for (const Node* n : region.nodes)
    for (Value* v : n->operands()) {
      if (in_region.count(v->node()) || barrier_index.count(v) || !InForward(v) || !Depends(v)) continue;
      const OpKind op = v->node()->op();
      if (op == OpKind::kParameter || op == OpKind::kConstant) continue;
      barrier_index[v] = barrier_in.size();
      barrier_in.push_back(v);
    }
  const size_t num_inputs = barrier_in.size();
  for (const Node* n : region.nodes)
    for (Value* v : n->results())
      if (Value* g = cot_[Slot(v)]) barrier_in.push_back(g);
  std::unordered_map<const Value*, Value*> value;  // forward value -> the value clones read
  if (num_inputs > 0) {
    std::vector<ir::TensorType> types;
    for (Value* v : barrier_in) types.push_back(v->type());
    Node* barrier = f_.AddNode(OpKind::kOptimizationBarrier, barrier_in, ir::NoAttrs{}, types);
    barrier->set_loc(region.nodes.front()->loc());
    for (size_t i = 0; i < num_inputs; ++i) {
      barrier->result(i)->set_sharding(barrier_in[i]->sharding());
      value[barrier_in[i]] = barrier->result(i);
    }
  }
  for (const Node* n : region.nodes) {
    std::vector<Value*> operands;
    for (Value* v : n->operands()) {
      auto it = value.find(v);
      operands.push_back(it != value.end() ? it->second : v);
    }
    std::vector<ir::TensorType> types;
    for (Value* v : n->results()) types.push_back(v->type());
    Node* c = f_.AddNode(n->op(), std::move(operands), n->attrs(), types);
    c->set_loc(n->loc());
    const bool saved = region.policy == RematRegion::Policy::kSaveProducts && n->op() == OpKind::kDotGeneral;
    for (size_t i = 0; i < n->num_results(); ++i) {
      c->result(i)->set_sharding(n->result(i)->sharding());
      value[n->result(i)] = saved ? n->result(i) : c->result(i);
    }
    rule_node_[n] = c;
  }
}

void ReverseWalk::EraseUnused(size_t first_new, const std::vector<Value*>& keep) {
  std::vector<char> live(static_cast<size_t>(f_.id_bound()), 0);
  for (Value* v : keep) live[static_cast<size_t>(v->node()->id())] = 1;
  for (Value* v : f_.results()) live[static_cast<size_t>(v->node()->id())] = 1;
  std::vector<Node*> dead;
  for (size_t i = f_.nodes().size(); i-- > first_new;) {
    Node* n = f_.nodes()[i].get();
    if (!live[static_cast<size_t>(n->id())]) {
      dead.push_back(n);
      continue;
    }
    for (Value* v : n->operands()) live[static_cast<size_t>(v->node()->id())] = 1;
  }
  for (Node* n : dead)
    f_.EraseNode(n);  // users come first in `dead`, so each is unused when erased
}

std::vector<Value*> ReverseWalk::Run(std::span<Value* const> outputs,
                                     std::span<Value* const> cotangents,
                                     std::span<Value* const> wrt) {
  AXLE_CHECK(outputs.size() == cotangents.size(), "BuildVjp: {} outputs but {} cotangents",
             outputs.size(), cotangents.size());
  std::vector<Node*> forward;
  for (const auto& n : f_.nodes()) forward.push_back(n.get());
  const size_t first_new = forward.size();
  IndexForward();
  for (Value* v : outputs) AXLE_CHECK(InForward(v), "BuildVjp: an output is not a value of the function");
  for (Value* v : wrt) AXLE_CHECK(InForward(v), "BuildVjp: a wrt value is not a value of the function");
  MarkRelevant(outputs, wrt);
  for (size_t i = 0; i < outputs.size(); ++i) Accumulate(outputs[i], cotangents[i]);
  region_of_.assign(first_slot_.size(), -1);
  recomputed_.assign(remat_.size(), 0);
  for (size_t r = 0; r < remat_.size(); ++r)
    for (const Node* n : remat_[r].nodes) {
      AXLE_CHECK(static_cast<size_t>(n->id()) < first_slot_.size() && first_slot_[static_cast<size_t>(n->id())] >= 0,
                 "BuildVjp: a remat region's node is not in the function");
      region_of_[static_cast<size_t>(n->id())] = static_cast<int32_t>(r);
    }
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    if (!relevant_[static_cast<size_t>((*it)->id())]) continue;
    const int32_t r = region_of_[static_cast<size_t>((*it)->id())];
    if (r >= 0 && !recomputed_[static_cast<size_t>(r)]) {
      recomputed_[static_cast<size_t>(r)] = 1;
      Recompute(static_cast<size_t>(r));
    }
    VisitNode(**it);
  }
  std::vector<Value*> grads;
  for (Value* w : wrt) {
    Value* g = cot_[Slot(w)];
    grads.push_back(g != nullptr ? g : Zeros(b_, w->type()));
  }
  EraseUnused(first_new, grads);
  return grads;
}

}  // namespace

const VjpEntry* GetVjp(ir::OpKind op) {
  static const VjpTable table = BuildTable();
  const VjpEntry& e = table[static_cast<size_t>(op)];
  if (e.kind != VjpKind::kRule && e.reason.empty()) return nullptr;
  return &e;
}

std::vector<ir::Value*> BuildVjp(ir::Builder& b, std::span<ir::Value* const> outputs,
                                 std::span<ir::Value* const> output_cotangents,
                                 std::span<ir::Value* const> wrt,
                                 const std::unordered_set<const ir::Value*>* stop_gradient,
                                 std::span<const RematRegion> remat) {
  return ReverseWalk(b, stop_gradient, remat).Run(outputs, output_cotangents, wrt);
}

std::unique_ptr<ir::Module> GradModule(const ir::Module& m, int output_index,
                                       std::vector<int> wrt_params) {
  std::unique_ptr<ir::Module> g = m.Clone();
  ir::Function* f = g->entry();
  if (output_index < 0 || output_index >= static_cast<int>(f->results().size()))
    Fail("GradModule: output {} out of range: @{} has {} results", output_index, f->name(),
         f->results().size());
  Value* out = f->results()[static_cast<size_t>(output_index)];
  if (out->type().rank() != 0 || !IsFloat(out->dtype()))
    Fail("GradModule: output {} has type {}; expected a float scalar", output_index,
         out->type().ToString());
  std::vector<ir::Node*> params = f->Parameters();
  std::vector<Value*> wrt;
  for (int p : wrt_params) {
    auto it = std::find_if(params.begin(), params.end(), [&](ir::Node* n) {
      return n->attrs_as<ir::ParameterAttrs>().index == p;
    });
    if (it == params.end()) Fail("GradModule: @{} has no parameter with index {}", f->name(), p);
    wrt.push_back((*it)->result());
  }
  ir::Builder b(f, ir::ShapeContext{g->num_replicas()});
  Value* seed = b.Scalar(out->dtype(), 1.0);
  std::vector<Value*> outs = {out}, seeds = {seed};
  std::vector<Value*> grads = BuildVjp(b, outs, seeds, wrt);
  std::vector<Value*> results = f->results();
  results.insert(results.end(), grads.begin(), grads.end());
  f->set_results(std::move(results));
  // The seed is unused when no gradient flows (no wrt value influences the output); erase it.
  bool used = false;
  for (const auto& n : f->nodes())
    for (Value* v : n->operands()) used = used || v == seed;
  for (Value* v : f->results()) used = used || v == seed;
  if (!used) f->EraseNode(seed->node());
  return g;
}

}  // namespace axle::autodiff
