#include "testing/module_batch.h"

#include <string>
#include <unordered_map>

#include "core/error.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace axle::testing {

bool BatchableModule(const ir::Module& m) {
  if (m.num_replicas() != 1) return false;
  for (const auto& n : m.entry()->nodes())
    if (n->info().Has(ir::kCollective)) return false;
  return true;
}

std::vector<ir::Literal> ModuleBatch::ConcatArguments(
    const std::vector<std::vector<ir::Literal>>& args) const {
  AXLE_CHECK(args.size() == parts.size(), "ConcatArguments: {} argument lists for {} programs",
             args.size(), parts.size());
  std::vector<ir::Literal> out;
  out.reserve(NumParameters());
  for (size_t k = 0; k < args.size(); ++k) {
    AXLE_CHECK(args[k].size() == parts[k].num_parameters,
               "ConcatArguments: program {} has {} parameters, got {} arguments", k,
               parts[k].num_parameters, args[k].size());
    out.insert(out.end(), args[k].begin(), args[k].end());
  }
  return out;
}

ModuleBatch BatchModules(const std::vector<const ir::Module*>& programs) {
  ModuleBatch batch;
  batch.module = std::make_unique<ir::Module>("batch");
  ir::Function* g = batch.module->AddFunction("main");
  std::vector<ir::Value*> results;
  size_t num_parameters = 0;
  for (size_t k = 0; k < programs.size(); ++k) {
    const ir::Module& m = *programs[k];
    AXLE_CHECK(BatchableModule(m),
               "BatchModules: program {} ({}) has collectives or several replicas", k, m.name());
    const ir::Function& f = *m.entry();
    ModuleBatch::Part part;
    part.first_parameter = num_parameters;
    part.num_parameters = f.Parameters().size();
    part.first_result = results.size();
    part.num_results = f.results().size();
    std::unordered_map<const ir::Value*, ir::Value*> map;
    for (const auto& n : f.nodes()) {
      std::vector<ir::Value*> operands;
      for (ir::Value* v : n->operands()) {
        auto it = map.find(v);
        AXLE_CHECK(it != map.end(), "BatchModules: operand of {} in program {} defined later",
                   n->name(), k);
        operands.push_back(it->second);
      }
      std::vector<ir::TensorType> types;
      for (ir::Value* r : n->results()) types.push_back(r->type());
      ir::Attrs attrs = n->attrs();
      if (n->op() == ir::OpKind::kParameter) {
        auto* p = std::get_if<ir::ParameterAttrs>(&attrs);
        AXLE_CHECK(p != nullptr, "BatchModules: parameter without ParameterAttrs");
        AXLE_CHECK(p->index >= 0 && static_cast<size_t>(p->index) < part.num_parameters,
                   "BatchModules: parameter index {} of program {} out of range", p->index, k);
        p->index += static_cast<int64_t>(num_parameters);
      }
      ir::Node* c = g->AddNode(n->op(), std::move(operands), std::move(attrs), types);
      c->set_loc(n->loc());
      for (size_t i = 0; i < n->num_results(); ++i) {
        c->result(i)->set_name(n->result(i)->name());
        c->result(i)->set_sharding(n->result(i)->sharding());
        map[n->result(i)] = c->result(i);
      }
    }
    for (ir::Value* r : f.results()) results.push_back(map.at(r));
    num_parameters += part.num_parameters;
    batch.parts.push_back(part);
  }
  g->set_results(std::move(results));
  return batch;
}

}  // namespace axle::testing
