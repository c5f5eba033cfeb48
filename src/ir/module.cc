#include "ir/module.h"

#include <algorithm>
#include <unordered_map>

namespace axle::ir {

Node::Node(Function* parent, OpKind op, std::vector<Value*> operands, Attrs attrs,
           const std::vector<TensorType>& result_types, int64_t id)
    : parent_(parent), op_(op), operands_(std::move(operands)), attrs_(std::move(attrs)), id_(id) {
  results_.reserve(result_types.size());
  for (size_t i = 0; i < result_types.size(); ++i) results_.emplace_back(this, static_cast<int>(i), result_types[i]);
}

Node* Function::AddNode(OpKind op, std::vector<Value*> operands, Attrs attrs,
                        const std::vector<TensorType>& result_types) {
  return InsertNode(nodes_.size(), op, std::move(operands), std::move(attrs), result_types);
}

Node* Function::InsertNode(size_t pos, OpKind op, std::vector<Value*> operands, Attrs attrs,
                           const std::vector<TensorType>& result_types) {
  AXLE_CHECK(pos <= nodes_.size(), "InsertNode at {} of {}", pos, nodes_.size());
  auto node = std::make_unique<Node>(this, op, std::move(operands), std::move(attrs), result_types, next_id_++);
  Node* raw = node.get();
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(node));
  return raw;
}

int64_t Function::IndexOf(const Node* node) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == node) return static_cast<int64_t>(i);
  return -1;
}

void Function::EraseNode(Node* node) {
  int64_t i = IndexOf(node);
  AXLE_CHECK(i >= 0, "EraseNode: {} is not in function {}", node->name(), name_);
  nodes_.erase(nodes_.begin() + i);
}

void Function::Reorder(const std::vector<Node*>& order) {
  AXLE_CHECK(order.size() == nodes_.size(), "Reorder: {} nodes for function {} of {}", order.size(), name_,
             nodes_.size());
  std::unordered_map<const Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned[n.get()] = std::move(n);
  nodes_.clear();
  for (Node* n : order) {
    auto it = owned.find(n);
    AXLE_CHECK(it != owned.end() && it->second != nullptr, "Reorder: a node is not in function {} or twice in the order",
               name_);
    nodes_.push_back(std::move(it->second));
  }
}

void Function::ReplaceAllUsesWith(Value* from, Value* to) {
  // The replacement is the same value: a sharding annotation on `from` (a user's constraint)
  // holds for it too, unless it has its own.
  if (from->sharding() && !to->sharding() && from->type() == to->type()) to->set_sharding(from->sharding());
  for (auto& n : nodes_)
    for (size_t i = 0; i < n->num_operands(); ++i)
      if (n->operand(i) == from) n->set_operand(i, to);
  for (auto& r : results_)
    if (r == from) r = to;
}

std::vector<Node*> Function::Parameters() const {
  std::vector<Node*> params;
  for (const auto& n : nodes_)
    if (n->op() == OpKind::kParameter) params.push_back(n.get());
  std::stable_sort(params.begin(), params.end(), [](Node* a, Node* b) {
    return a->attrs_as<ParameterAttrs>().index < b->attrs_as<ParameterAttrs>().index;
  });
  return params;
}

Module::Module(Module&& other) noexcept { *this = std::move(other); }

Module& Module::operator=(Module&& other) noexcept {
  if (this == &other) return *this;
  name_ = std::move(other.name_);
  num_replicas_ = other.num_replicas_;
  mesh_ = std::move(other.mesh_);
  functions_ = std::move(other.functions_);
  other.functions_.clear();
  for (auto& f : functions_) f->set_module(this);
  return *this;
}

Function* Module::AddFunction(std::string name) {
  functions_.push_back(std::make_unique<Function>(std::move(name)));
  functions_.back()->set_module(this);
  return functions_.back().get();
}

Function* Module::FindFunction(std::string_view name) const {
  for (const auto& f : functions_)
    if (f->name() == name) return f.get();
  return nullptr;
}

const ScheduleEntry* Node::FindSchedule(std::string_view key) const {
  for (const ScheduleEntry& e : schedule_)
    if (e.key == key) return &e;
  return nullptr;
}

Function* Module::entry() const {
  if (Function* f = FindFunction("main")) return f;
  if (functions_.empty()) Fail("module @{} has no functions", name_);
  return functions_.front().get();
}

std::unique_ptr<Module> Module::Clone() const {
  auto copy = std::make_unique<Module>(name_);
  copy->num_replicas_ = num_replicas_;
  copy->mesh_ = mesh_;
  copy->scheduled_for_ = scheduled_for_;
  for (const auto& f : functions_) {
    Function* g = copy->AddFunction(f->name());
    g->set_loc(f->loc());
    std::unordered_map<const Value*, Value*> map;
    for (const auto& n : f->nodes()) {
      std::vector<Value*> operands;
      for (Value* v : n->operands()) {
        auto it = map.find(v);
        AXLE_CHECK(it != map.end(), "Clone: operand of {} defined later or elsewhere", n->name());
        operands.push_back(it->second);
      }
      std::vector<TensorType> types;
      for (Value* r : n->results()) types.push_back(r->type());
      Node* m = g->AddNode(n->op(), std::move(operands), n->attrs(), types);
      m->set_loc(n->loc());
      m->set_schedule(n->schedule());
      for (size_t i = 0; i < n->num_results(); ++i) {
        m->result(i)->set_name(n->result(i)->name());
        m->result(i)->set_sharding(n->result(i)->sharding());
        map[n->result(i)] = m->result(i);
      }
    }
    std::vector<Value*> results;
    for (Value* r : f->results()) results.push_back(map.at(r));
    g->set_results(std::move(results));
  }
  return copy;
}

}  // namespace axle::ir
