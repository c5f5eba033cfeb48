// The reference interpreter: the oracle every backend, pass and the partitioner is tested against.
//
// It evaluates a Function node by node on host Literals with naive loops; correctness is its only
// goal. The semantics of every op (rounding, integer wrap, NaN, index clamping, ...) are written
// in docs/ir.md, "Ops", and pinned by the op-sample table in src/testing/op_samples.h.
//
//   Module m("mlp");
//   Builder b(m.AddFunction("main"));
//   Value* x = b.Parameter(0, {DType::kF32, {2, 3}});
//   b.Return({b.Add(x, x)});
//   std::vector<Literal> out = Evaluate(*m.entry(), {Literal::FromVector<float>(...)});
//
// Kernels live in a per-op table (interpreter_internal.h); each op family has its own file:
// interpreter_elementwise.cc, interpreter_movement.cc, interpreter_reduce.cc, interpreter_misc.cc.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "ir/op.h"

namespace axle::ir {

// Runs `f` on one replica. `args[i]` is bound to the parameter with index i and must have exactly
// that parameter's type. Returns the values of f.results(), in order.
// Throws axle::Error on a wrong argument count or type (naming the parameter index and both
// types), a malformed node (its result types disagree with its op's shape rule), an unknown
// custom_call target, or when the live tensors would exceed flags::interpreter_max_bytes().
std::vector<Literal> Evaluate(const Function& f, const std::vector<Literal>& args);

// Runs `f` on `args.size()` replicas in lockstep: node by node, each node on every replica before
// the next; collectives combine the replicas' operands (replica ids are positions in `args`).
// Returns each replica's results: out[replica][result]. Throws as Evaluate does, and when `args`
// is empty or a collective's replica groups do not fit args.size() replicas.
std::vector<std::vector<Literal>> EvaluateReplicated(const Function& f,
                                                     const std::vector<std::vector<Literal>>& args);

// Runs the reference kernel of one node on `operands` (one per operand of `node`, of its types) and
// returns its results. Only local kernels: a collective, or a node needing a replica's context
// (parameter), throws axle::Error. Backends use it as the fallback for ops without a fast kernel.
// The node is not checked against its op's shape rule (the caller has verified the module).
// `replica` is what replica_id returns.
std::vector<Literal> EvaluateNode(const Node& node, std::span<const Literal* const> operands,
                                  int64_t replica = 0);

// True when the interpreter has a kernel for `op` (a test walks AllOps() with this).
bool HasInterpreterKernel(OpKind op);

// A host implementation of a custom_call target. It receives the node's operands, attributes and
// declared result types and returns one literal per declared result, of exactly that type (the
// interpreter checks and throws axle::Error otherwise).
using CustomCallKernel = std::function<std::vector<Literal>(
    const std::vector<Literal>& operands, const CustomCallAttrs& attrs,
    const std::vector<TensorType>& result_types)>;

// Registers (or replaces) the kernel of custom_call target `target` for all later evaluations.
// Thread-safe. An empty kernel unregisters the target.
void RegisterCustomCall(std::string target, CustomCallKernel kernel);

}  // namespace axle::ir
