#include "passes/pass_util.h"

#include <algorithm>

namespace axle::passes {

std::vector<ir::Function*> RewritableFunctions(ir::Module& module) {
  std::unordered_set<std::string> fused;
  for (const auto& f : module.functions())
    for (const auto& n : f->nodes())
      if (n->op() == ir::OpKind::kFusion) fused.insert(n->attrs_as<ir::FusionAttrs>().calls);
  std::vector<ir::Function*> out;
  for (const auto& f : module.functions())
    if (!fused.count(std::string(f->name()))) out.push_back(f.get());
  return out;
}

ir::Value* Rewrite::Resolve(ir::Value* v) const {
  for (auto it = map_.find(v); it != map_.end(); it = map_.find(v)) v = it->second;
  return v;
}

void Rewrite::Apply(ir::Node& n) const {
  if (map_.empty()) return;
  for (size_t i = 0; i < n.num_operands(); ++i) n.set_operand(i, Resolve(n.operand(i)));
}

bool Rewrite::CanReplace(const ir::Value* from, const ir::Value* to) {
  if (from == to || from->type() != to->type()) return false;
  return !from->sharding() || from->sharding() == to->sharding();
}

void Rewrite::Replace(ir::Node* node, const std::vector<ir::Value*>& to) {
  AXLE_CHECK(to.size() == node->num_results(), "Rewrite::Replace: {} values for {} results",
             to.size(), node->num_results());
  for (size_t i = 0; i < to.size(); ++i) map_[node->result(i)] = to[i];
  replaced_.insert(node);
}

void Rewrite::Finish() {
  if (replaced_.empty()) return;
  std::vector<ir::Value*> results = f_.results();
  for (ir::Value*& r : results) r = Resolve(r);
  f_.set_results(std::move(results));
  EraseNodes(f_, replaced_);
  replaced_.clear();
  map_.clear();
}

void EraseNodes(ir::Function& f, const std::unordered_set<ir::Node*>& dead) {
  if (dead.empty()) return;
  std::vector<ir::Node*> order;
  order.reserve(dead.size());
  for (const auto& n : f.nodes())
    if (dead.count(n.get())) order.push_back(n.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) f.EraseNode(*it);
}

bool HasSideEffects(const ir::Node& n) { return n.op() == ir::OpKind::kCustomCall; }

std::optional<Splat> GetSplat(const ir::Value* v) {
  const ir::Node* n = v->node();
  if (n->op() == ir::OpKind::kBroadcastInDim) n = n->operand(0)->node();
  if (n->op() != ir::OpKind::kConstant) return std::nullopt;
  const ir::Literal& lit = n->attrs_as<ir::ConstantAttrs>().value;
  if (lit.NumElements() == 0 || !lit.IsSplat()) return std::nullopt;
  return Splat{lit.dtype(), ir::ElementBits(lit, 0), lit.GetDouble(0)};
}

}  // namespace axle::passes
