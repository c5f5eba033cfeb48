#include "frontend/inspect.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "core/error.h"

namespace axle::detail {
namespace {

std::shared_ptr<AsyncBuffer> Placeholder() {
  auto data = std::make_shared<AsyncBuffer>();
  data->origin = "a placeholder (a step traced for planning, never run)";
  data->SetError(std::make_exception_ptr(
      Error("this tensor is a placeholder of a step that was traced for planning and never run (axle shard-plan); "
            "it has no value to read")));
  return data;
}

}  // namespace

void MakePlaceholders(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    AXLE_CHECK(t.defined(), "MakePlaceholders: an undefined tensor");
    TensorImpl& impl = *t.impl();
    impl.value = nullptr;
    impl.data = Placeholder();
  }
}

TracedStep TakeTrace() {
  Trace& t = CurrentTrace();
  std::unordered_map<const ir::Value*, size_t> input_index;
  for (size_t i = 0; i < t.inputs.size(); ++i) input_index[t.input_value.at(t.inputs[i].get())] = i;
  // The results, as sync() takes them: live pending tensors in creation order, each value once; a
  // tensor whose value is an input (an in-place copy) is no result.
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& w : t.pending)
    if (auto p = w.lock(); p && p->value != nullptr && p->epoch == t.epoch) live.push_back(p);
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  live.erase(std::unique(live.begin(), live.end()), live.end());
  std::vector<ir::Value*> values;
  std::vector<std::shared_ptr<TensorImpl>> takers;
  for (const auto& p : live)
    if (!input_index.count(p->value) && std::find(values.begin(), values.end(), p->value) == values.end()) {
      values.push_back(p->value);
      takers.push_back(p);
    }
  if (values.empty()) Fail("TakeTrace: nothing is pending in the current trace");
  // The nodes the results reach, in trace order (ids follow positions).
  const auto& nodes = t.fn->nodes();
  const std::vector<char> needed = NodesReaching(*t.fn, values);

  TracedStep step;
  step.results = std::move(takers);
  step.module = std::make_unique<ir::Module>("step");
  ir::Function* fn = step.module->AddFunction("main");
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const auto& n : nodes) {
    if (!needed[static_cast<size_t>(n->id())]) continue;
    std::vector<ir::Value*> operands;
    for (ir::Value* v : n->operands()) operands.push_back(map.at(v));
    std::vector<ir::TensorType> types;
    for (ir::Value* r : n->results()) types.push_back(r->type());
    ir::Attrs attrs = n->attrs();
    if (n->op() == ir::OpKind::kParameter) {
      std::get<ir::ParameterAttrs>(attrs).index = static_cast<int64_t>(step.inputs.size());
      step.inputs.push_back(t.input_impls[input_index.at(n->result())].lock());
    }
    ir::Node* copy = fn->AddNode(n->op(), std::move(operands), std::move(attrs), types);
    copy->set_loc(n->loc());
    for (size_t i = 0; i < n->num_results(); ++i) {
      map[n->result(i)] = copy->result(i);
      copy->result(i)->set_sharding(n->result(i)->sharding());
    }
  }
  std::vector<ir::Value*> mapped;
  for (ir::Value* v : values) mapped.push_back(map.at(v));
  fn->set_results(std::move(mapped));
  step.module->set_mesh(t.mesh);

  // Every tensor left pending becomes a placeholder; then a fresh trace.
  for (const auto& p : live) {
    p->value = nullptr;
    p->data = Placeholder();
  }
  DropTrace();
  return step;
}

}  // namespace axle::detail
