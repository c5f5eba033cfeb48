// The interpreter's driver: argument checks, node checks, lockstep evaluation over replicas, the
// memory cap, and the custom_call registry. The op kernels live in the interpreter_*.cc files.
#include "ir/interpreter.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/flags.h"
#include "ir/interpreter_internal.h"
#include "ir/shape_inference.h"

namespace axle::ir {
namespace {

using interp::KernelEntry;
using interp::KernelTable;
using interp::Operands;
using interp::ReplicaContext;

const KernelTable& Kernels() {
  static const KernelTable table = [] {
    KernelTable t{};
    interp::RegisterDriverKernels(t);
    interp::RegisterElementwiseKernels(t);
    interp::RegisterMovementKernels(t);
    interp::RegisterReduceKernels(t);
    interp::RegisterMiscKernels(t);
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------------------------------------
// The custom_call registry.

struct CustomCallRegistry {
  std::mutex mu;
  std::map<std::string, CustomCallKernel, std::less<>> kernels;
};

CustomCallRegistry& Registry() {
  static CustomCallRegistry* registry = new CustomCallRegistry;  // never destroyed
  return *registry;
}

std::string TypesText(const std::vector<TensorType>& types) {
  std::string out;
  for (const TensorType& t : types) out += (out.empty() ? "" : ", ") + t.ToString();
  return "(" + out + ")";
}

// ---------------------------------------------------------------------------------------------
// Kernels of the driver's own ops.

std::vector<Literal> ConstantKernel(const Node& node, Operands, const ReplicaContext&) {
  return interp::One(node.attrs_as<ConstantAttrs>().value);
}

std::vector<Literal> ParameterKernel(const Node& node, Operands, const ReplicaContext& ctx) {
  return interp::One(ctx.args[static_cast<size_t>(node.attrs_as<ParameterAttrs>().index)]);
}

std::vector<Literal> OptimizationBarrierKernel(const Node&, Operands ops, const ReplicaContext&) {
  std::vector<Literal> out;
  for (const Literal* x : ops) out.push_back(*x);
  return out;
}

std::vector<Literal> CustomCallKernelFn(const Node& node, Operands ops, const ReplicaContext&) {
  const auto& attrs = node.attrs_as<CustomCallAttrs>();
  CustomCallKernel kernel;
  {
    CustomCallRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.kernels.find(attrs.target);
    if (it == r.kernels.end())
      Fail("custom_call target '{}' has no registered interpreter kernel; register one with "
           "axle::ir::RegisterCustomCall(\"{}\", ...)",
           attrs.target, attrs.target);
    kernel = it->second;
  }
  std::vector<Literal> operands;
  for (const Literal* x : ops) operands.push_back(*x);
  std::vector<TensorType> declared;
  for (const Value* v : node.results()) declared.push_back(v->type());
  std::vector<Literal> out = kernel(operands, attrs, declared);
  std::vector<TensorType> got;
  for (const Literal& l : out) got.push_back(l.type());
  if (got != declared)
    Fail("custom_call target '{}' returned {} but the node declares {}", attrs.target,
         TypesText(got), TypesText(declared));
  return out;
}

// A fusion evaluates the function it calls (the verifier checked that it exists and fits).
std::vector<Literal> FusionKernel(const Node& node, Operands ops, const ReplicaContext&) {
  const auto& attrs = node.attrs_as<FusionAttrs>();
  const Module* m = node.parent()->module();
  const Function* callee = m != nullptr ? m->FindFunction(attrs.calls) : nullptr;
  if (callee == nullptr)
    Fail("fusion calls @{}, which {}", attrs.calls, m == nullptr ? "cannot be found (its function is in no module)"
                                                                 : "the module does not define");
  std::vector<Literal> args;
  for (const Literal* x : ops) args.push_back(*x);
  return Evaluate(*callee, args);
}

// ---------------------------------------------------------------------------------------------
// The evaluator.
//
// Note [Lockstep and memory]
// Replicas run node by node: every replica finishes node k before any starts node k + 1, so a
// collective at node k sees every replica's operand, and there is no scheduling to get wrong.
// Before running the nodes, each is checked against its op's shape rule for the replica count in
// use (a function built for 2 replicas fails cleanly on 4), and each value's last use is found.
// The memory cap counts the bytes of the values live over all replicas; a node's results are
// charged before its kernel allocates them (so a huge tensor fails instead of exhausting the host),
// and values are freed right after their last use. Kernel scratch space is not counted.

// Bytes of `t`, saturating at INT64_MAX.
int64_t SaturatingBytes(const TensorType& t) {
  const int64_t n = t.shape.NumElements();
  const int64_t w = DTypeSize(t.dtype);
  if (n < 0 || n > INT64_MAX / w) return INT64_MAX;
  return n * w;
}
int64_t SaturatingMul(int64_t a, int64_t b) { return (b != 0 && a > INT64_MAX / b) ? INT64_MAX : a * b; }
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

std::string Describe(const Node& n, size_t pos) {
  std::string names;
  for (const Value* v : n.results())
    if (!v->name().empty()) names += (names.empty() ? " %" : ", %") + v->name();
  return fmt::format("node #{} ({}{})", pos, n.name(), names.empty() ? "" : " ->" + names);
}

class Evaluator {
 public:
  Evaluator(const Function& f, const std::vector<std::vector<Literal>>& args)
      : f_(f), args_(args), num_replicas_(static_cast<int64_t>(args.size())) {}

  std::vector<std::vector<Literal>> Run();

 private:
  void CheckArguments() const;
  void CheckNodes();
  void CheckMemory(const Node& node, size_t pos) const;
  void RunNode(const Node& node, size_t pos);
  void StoreResults(const Node& node, int64_t replica, std::vector<Literal> results);
  void ReleaseDead(const Node& node, size_t pos);
  const Literal& Get(int64_t replica, const Value* v) const {
    return *values_[static_cast<size_t>(replica)][static_cast<size_t>(slot_.at(v))];
  }

  const Function& f_;
  const std::vector<std::vector<Literal>>& args_;
  const int64_t num_replicas_;
  std::unordered_map<const Value*, int64_t> slot_;       // value -> slot
  std::vector<int64_t> slot_bytes_;                      // bytes of one replica's value
  std::vector<size_t> last_use_;                         // slot -> last node using it
  std::vector<std::vector<std::optional<Literal>>> values_;  // [replica][slot]
  int64_t live_bytes_ = 0;                               // over all replicas
};

void Evaluator::CheckArguments() const {
  const std::vector<Node*> params = f_.Parameters();
  for (size_t k = 0; k < params.size(); ++k)
    if (params[k]->attrs_as<ParameterAttrs>().index != static_cast<int64_t>(k))
      Fail("@{}: parameter indices must be 0..{} each once, found index {}", f_.name(),
           params.size() - 1, params[k]->attrs_as<ParameterAttrs>().index);
  for (int64_t r = 0; r < num_replicas_; ++r) {
    const auto& args = args_[static_cast<size_t>(r)];
    const std::string where = num_replicas_ > 1 ? fmt::format(" (replica {})", r) : "";
    if (args.size() != params.size())
      Fail("@{}: expected {} arguments, got {}{}", f_.name(), params.size(), args.size(), where);
    for (size_t k = 0; k < params.size(); ++k) {
      const Value* p = params[k]->result();
      if (args[k].type() != p->type())
        Fail("@{}: argument {}{} has type {}, but parameter {}{} expects {}", f_.name(), k, where,
             args[k].type().ToString(), k, p->name().empty() ? "" : " (%" + p->name() + ")",
             p->type().ToString());
    }
  }
}

// Checks that operands are defined earlier and that every node agrees with its op's shape rule
// for this replica count, so kernels can trust attributes and types. Assigns slots and last uses.
void Evaluator::CheckNodes() {
  const auto& nodes = f_.nodes();
  for (size_t pos = 0; pos < nodes.size(); ++pos) {
    const Node& n = *nodes[pos];
    std::vector<TensorType> operand_types, declared;
    for (size_t i = 0; i < n.num_operands(); ++i) {
      auto it = slot_.find(n.operand(i));
      if (it == slot_.end())
        Fail("@{}: {}: operand {} is not defined by an earlier node", f_.name(), Describe(n, pos), i);
      operand_types.push_back(n.operand(i)->type());
      last_use_[static_cast<size_t>(it->second)] = pos;
    }
    for (const Value* v : n.results()) declared.push_back(v->type());
    std::vector<TensorType> inferred;
    try {
      inferred = InferResultTypes(n.op(), operand_types, n.attrs(), declared,
                                  ShapeContext{num_replicas_});
    } catch (const Error& e) {
      throw Error(n.loc(), fmt::format("@{}: {}: {}\n  operand types: {}", f_.name(),
                                       Describe(n, pos), e.message(), TypesText(operand_types)));
    }
    if (inferred != declared)
      throw Error(n.loc(), fmt::format("@{}: {} declares result types {} but its shape rule gives {} "
                                       "for operands {} on {} replica(s)",
                                       f_.name(), Describe(n, pos), TypesText(declared),
                                       TypesText(inferred), TypesText(operand_types), num_replicas_));
    for (const Value* v : n.results()) {
      slot_[v] = static_cast<int64_t>(slot_bytes_.size());
      slot_bytes_.push_back(SaturatingBytes(v->type()));
      last_use_.push_back(pos);
    }
  }
  for (size_t i = 0; i < f_.results().size(); ++i) {
    auto it = slot_.find(f_.results()[i]);
    if (it == slot_.end()) Fail("@{}: result {} is not defined by a node", f_.name(), i);
    last_use_[static_cast<size_t>(it->second)] = nodes.size();  // kept to the end
  }
}

void Evaluator::CheckMemory(const Node& node, size_t pos) const {
  int64_t need = 0;
  for (const Value* v : node.results()) need = SaturatingAdd(need, slot_bytes_[slot_.at(v)]);
  need = SaturatingMul(need, num_replicas_);
  const int64_t cap = flags::interpreter_max_bytes();
  if (SaturatingAdd(live_bytes_, need) > cap)
    Fail("@{}: {} needs {} bytes for its results{} while {} bytes of tensors are live; that "
         "exceeds the interpreter's limit of {} bytes (flag interpreter_max_bytes, environment "
         "AXLE_INTERPRETER_MAX_BYTES): raise it or evaluate a smaller program",
         f_.name(), Describe(node, pos), need,
         num_replicas_ > 1 ? fmt::format(" on {} replicas", num_replicas_) : "", live_bytes_, cap);
}

void Evaluator::StoreResults(const Node& node, int64_t replica, std::vector<Literal> results) {
  AXLE_CHECK(results.size() == node.num_results(), "kernel of {} returned {} results, expected {}",
             node.name(), results.size(), node.num_results());
  for (size_t j = 0; j < results.size(); ++j) {
    const Value* v = node.result(j);
    AXLE_CHECK(results[j].type() == v->type(), "kernel of {} returned {}, expected {}",
               node.name(), results[j].type().ToString(), v->type().ToString());
    const int64_t s = slot_.at(v);
    values_[static_cast<size_t>(replica)][static_cast<size_t>(s)] = std::move(results[j]);
    live_bytes_ = SaturatingAdd(live_bytes_, slot_bytes_[static_cast<size_t>(s)]);
  }
}

// Frees the operands whose last use is node `pos`, and the node's results nobody uses.
void Evaluator::ReleaseDead(const Node& node, size_t pos) {
  auto release = [&](const Value* v) {
    const int64_t s = slot_.at(v);
    if (last_use_[static_cast<size_t>(s)] != pos) return;
    for (auto& replica_values : values_) {
      auto& slot = replica_values[static_cast<size_t>(s)];
      if (!slot) continue;
      slot.reset();
      live_bytes_ -= slot_bytes_[static_cast<size_t>(s)];
    }
  };
  for (const Value* v : node.operands()) release(v);
  for (const Value* v : node.results()) release(v);
}

void Evaluator::RunNode(const Node& node, size_t pos) {
  const KernelEntry& kernel = Kernels()[static_cast<size_t>(node.op())];
  if (!kernel.local && !kernel.collective)
    Fail("@{}: {}: the interpreter has no kernel for op {}", f_.name(), Describe(node, pos), node.name());
  CheckMemory(node, pos);
  try {
    if (kernel.collective) {
      interp::ReplicaOperands ops(static_cast<size_t>(num_replicas_));
      for (int64_t r = 0; r < num_replicas_; ++r)
        for (const Value* v : node.operands()) ops[static_cast<size_t>(r)].push_back(&Get(r, v));
      std::vector<std::vector<Literal>> results = kernel.collective(node, ops);
      AXLE_CHECK(static_cast<int64_t>(results.size()) == num_replicas_, "collective {} results", node.name());
      for (int64_t r = 0; r < num_replicas_; ++r)
        StoreResults(node, r, std::move(results[static_cast<size_t>(r)]));
    } else {
      for (int64_t r = 0; r < num_replicas_; ++r) {
        std::vector<const Literal*> ops;
        for (const Value* v : node.operands()) ops.push_back(&Get(r, v));
        ReplicaContext ctx{args_[static_cast<size_t>(r)], r};
        StoreResults(node, r, kernel.local(node, ops, ctx));
      }
    }
  } catch (const Error& e) {
    throw Error(node.loc(), fmt::format("@{}: {}: {}", f_.name(), Describe(node, pos), e.message()));
  }
  ReleaseDead(node, pos);
}

std::vector<std::vector<Literal>> Evaluator::Run() {
  if (num_replicas_ < 1) Fail("@{}: EvaluateReplicated needs at least one replica's arguments", f_.name());
  CheckArguments();
  CheckNodes();
  values_.assign(static_cast<size_t>(num_replicas_),
                 std::vector<std::optional<Literal>>(slot_bytes_.size()));
  const auto& nodes = f_.nodes();
  for (size_t pos = 0; pos < nodes.size(); ++pos) RunNode(*nodes[pos], pos);
  std::vector<std::vector<Literal>> out(static_cast<size_t>(num_replicas_));
  for (int64_t r = 0; r < num_replicas_; ++r)
    for (const Value* v : f_.results()) out[static_cast<size_t>(r)].push_back(Get(r, v));
  return out;
}

}  // namespace

namespace interp {

void RegisterDriverKernels(KernelTable& table) {
  auto set = [&](OpKind k, LocalKernel f) { table[static_cast<size_t>(k)].local = f; };
  set(OpKind::kConstant, ConstantKernel);
  set(OpKind::kParameter, ParameterKernel);
  set(OpKind::kOptimizationBarrier, OptimizationBarrierKernel);
  set(OpKind::kCustomCall, CustomCallKernelFn);
  set(OpKind::kFusion, FusionKernel);
}

}  // namespace interp

std::vector<Literal> Evaluate(const Function& f, const std::vector<Literal>& args) {
  std::vector<std::vector<Literal>> all = {args};
  return std::move(Evaluator(f, all).Run()[0]);
}

std::vector<std::vector<Literal>> EvaluateReplicated(const Function& f,
                                                     const std::vector<std::vector<Literal>>& args) {
  return Evaluator(f, args).Run();
}

std::vector<Literal> EvaluateNode(const Node& node, std::span<const Literal* const> operands, int64_t replica) {
  const KernelEntry& kernel = Kernels()[static_cast<size_t>(node.op())];
  if (!kernel.local || node.op() == OpKind::kParameter)
    Fail("EvaluateNode: op {} has no local interpreter kernel that runs without a replica context",
         node.name());
  if (operands.size() != node.num_operands())
    Fail("EvaluateNode: {} has {} operands, got {}", node.name(), node.num_operands(),
         operands.size());
  ReplicaContext ctx{};
  ctx.replica = replica;
  std::vector<Literal> results = kernel.local(node, operands, ctx);
  AXLE_CHECK(results.size() == node.num_results(), "kernel of {} returned {} results, expected {}",
             node.name(), results.size(), node.num_results());
  return results;
}

bool HasInterpreterKernel(OpKind op) {
  const KernelEntry& k = Kernels()[static_cast<size_t>(op)];
  return k.local != nullptr || k.collective != nullptr;
}

void RegisterCustomCall(std::string target, CustomCallKernel kernel) {
  CustomCallRegistry& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (kernel)
    r.kernels[std::move(target)] = std::move(kernel);
  else
    r.kernels.erase(target);
}

}  // namespace axle::ir
