#include "ir/verifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <unordered_set>

#include "ir/printer.h"
#include "ir/shape_inference.h"

namespace axle::ir {
namespace {

std::string TypesText(const std::vector<TensorType>& types) {
  std::vector<std::string> parts;
  for (const TensorType& t : types) parts.push_back(t.ToString());
  return fmt::format("({})", fmt::join(parts, ", "));
}

[[noreturn]] void NodeError(const Function& f, const Node& n, const std::string& rule) {
  std::vector<TensorType> operand_types;
  for (Value* v : n.operands()) operand_types.push_back(v->type());
  std::string msg = fmt::format("{}: {}\n  in func @{}: {}\n  operand types: {}", n.name(), rule,
                                f.name(), PrintNode(n), TypesText(operand_types));
  if (!n.loc().file.empty() && n.loc().file != "<string>")
    msg += fmt::format("\n  reproduce with: axle opt --passes=verify {}", n.loc().file);
  throw Error(n.loc(), msg);
}

void CheckSharding(const Function& f, const Node& n, const Value& v, const Mesh* mesh) {
  const Sharding& s = *v.sharding();
  if (static_cast<int64_t>(s.dims.size()) != v.type().rank())
    NodeError(f, n, fmt::format("sharding {} has {} dimension entries for a value of rank {}",
                                s.ToString(), s.dims.size(), v.type().rank()));
  std::set<std::string> axes;
  auto use = [&](const std::string& axis) {
    if (axis.empty()) NodeError(f, n, fmt::format("sharding {} has an empty axis name", s.ToString()));
    if (!axes.insert(axis).second)
      NodeError(f, n, fmt::format("sharding {} uses mesh axis '{}' twice", s.ToString(), axis));
    if (mesh && !mesh->HasAxis(axis))
      NodeError(f, n, fmt::format("sharding {} names axis '{}', which the module's mesh {} does not have",
                                  s.ToString(), axis, mesh->ToString()));
  };
  for (const auto& dim : s.dims)
    for (const auto& axis : dim) use(axis);
  for (const auto& axis : s.partial) use(axis);
}

void CheckNode(const Function& f, const Node& n, const std::unordered_set<const Value*>& defined,
               int64_t num_replicas, const Mesh* mesh) {
  if (n.parent() != &f) NodeError(f, n, "node belongs to another function");
  std::vector<TensorType> operand_types;
  for (size_t i = 0; i < n.num_operands(); ++i) {
    const Value* v = n.operand(i);
    if (v == nullptr) NodeError(f, n, fmt::format("operand {} is null", i));
    if (!defined.count(v))
      NodeError(f, n, fmt::format("operand {} is not defined earlier in the function", i));
    operand_types.push_back(v->type());
  }
  std::vector<TensorType> declared;
  for (const Value* r : n.results()) {
    if (!r->type().shape.IsValid())
      NodeError(f, n, fmt::format("result type {} has a negative or overflowing shape", r->type().ToString()));
    declared.push_back(r->type());
  }
  std::vector<TensorType> inferred;
  try {
    inferred = InferResultTypes(n.op(), operand_types, n.attrs(), declared, {num_replicas});
  } catch (const Error& e) {
    NodeError(f, n, e.message());
  }
  if (inferred != declared)
    NodeError(f, n, fmt::format("result types {} differ from the inferred {}", TypesText(declared),
                                TypesText(inferred)));
  for (const Value* r : n.results())
    if (r->sharding()) CheckSharding(f, n, *r, mesh);
}

void CheckParameters(const Function& f) {
  std::vector<Node*> params = f.Parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t index = params[i]->attrs_as<ParameterAttrs>().index;
    if (index != static_cast<int64_t>(i))
      NodeError(f, *params[i],
                fmt::format("parameter indices must be 0..{} with each used once; found index {} "
                            "where {} was expected",
                            params.size() - 1, index, i));
  }
}

// A fusion node calls a function of the module whose parameters take its operands and whose
// results are its results; the called function holds plain computation (no fusion, collective,
// custom_call or replica_id: a fused kernel is one loop on one device).
void CheckFusion(const Module& m, const Function& f, const Node& n) {
  const std::string& callee = n.attrs_as<FusionAttrs>().calls;
  const Function* g = m.FindFunction(callee);
  if (g == nullptr) NodeError(f, n, fmt::format("calls @{}, which the module does not define", callee));
  if (g == &f || g == m.entry()) NodeError(f, n, fmt::format("calls @{}, the function it is in or the entry", callee));
  std::vector<TensorType> params, operands, results, declared;
  for (const Node* p : g->Parameters()) params.push_back(p->result()->type());
  for (const Value* v : n.operands()) operands.push_back(v->type());
  for (const Value* v : g->results()) results.push_back(v->type());
  for (const Value* v : n.results()) declared.push_back(v->type());
  if (params != operands)
    NodeError(f, n, fmt::format("@{} takes {} but the fusion passes {}", callee, TypesText(params), TypesText(operands)));
  if (results != declared)
    NodeError(f, n, fmt::format("@{} returns {} but the fusion declares {}", callee, TypesText(results),
                                TypesText(declared)));
  for (const auto& x : g->nodes())
    if (x->op() == OpKind::kFusion || x->op() == OpKind::kCustomCall || x->op() == OpKind::kReplicaId ||
        x->info().Has(kCollective))
      NodeError(f, n, fmt::format("@{} holds {}, which a fused kernel cannot run (only local computation)", callee,
                                  PrintNode(*x)));
}

}  // namespace

void VerifyFunction(const Function& f, int64_t num_replicas, const Mesh* mesh) {
  std::unordered_set<const Value*> defined;
  for (const auto& n : f.nodes()) {
    CheckNode(f, *n, defined, num_replicas, mesh);
    for (const Value* r : n->results()) defined.insert(r);
  }
  CheckParameters(f);
  for (size_t i = 0; i < f.results().size(); ++i)
    if (!defined.count(f.results()[i]))
      throw Error(f.loc(), fmt::format("func @{}: returned value {} is not defined in the function",
                                       f.name(), i));
}

void Verify(const Module& m) {
  if (m.num_replicas() < 1) Fail("module @{}: num_replicas {} must be >= 1", m.name(), m.num_replicas());
  if (m.mesh() && m.num_replicas() != 1 && m.num_replicas() != m.mesh()->size())
    Fail("module @{}: num_replicas {} must be 1 (the global program) or the mesh's {} devices ({})", m.name(),
         m.num_replicas(), m.mesh()->size(), m.mesh()->ToString());
  std::set<std::string> names;
  for (const auto& f : m.functions()) {
    if (!names.insert(f->name()).second)
      throw Error(f->loc(), fmt::format("module @{}: function @{} is defined twice", m.name(), f->name()));
    VerifyFunction(*f, m.num_replicas(), m.mesh() ? &*m.mesh() : nullptr);
  }
  for (const auto& f : m.functions())
    for (const auto& n : f->nodes())
      if (n->op() == OpKind::kFusion) CheckFusion(m, *f, *n);
}

}  // namespace axle::ir
