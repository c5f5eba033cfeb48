// Reverse-mode automatic differentiation as an IR -> IR transformation (docs/autodiff.md).
//
// Every op of ops.def has an entry in the VJP table (vector-Jacobian product): a rule that, given
// the cotangents of a node's results, appends the nodes computing the cotangents of its operands;
// or an explicit marker that the op has a zero gradient (piecewise constant: floor, sign) or is
// not differentiable (integer/bool results, opaque kernels), with the reason.
//
//   Module m;
//   Builder b(m.AddFunction("main"));
//   Value* x = b.Parameter(0, {DType::kF64, {4}});             // x: [4]
//   Value* y = b.Reduce(b.Unary(OpKind::kExp, x), ReduceKind::kSum, {0});   // y: []
//   std::vector<Value*> dx = BuildVjp(b, {y}, {b.Scalar(DType::kF64, 1)}, {x});
//   b.Return({y, dx[0]});                                      // dx[0] = exp(x)
//
// Rules live beside their op family: vjp_rules_elementwise.cc, vjp_rules_movement.cc,
// vjp_rules_reduce.cc, vjp_rules_misc.cc (collectives, escapes, sources).
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/module.h"
#include "ir/op.h"

namespace axle::autodiff {

// Appends to `b` the nodes that compute the cotangent of each operand of `node`, given the
// cotangents of its results (`result_cotangents[i]` has the type of node.result(i); nullptr for a
// result that carries no gradient: a non-float result, or one no output depends on). Returns one
// entry per operand: a value of the operand's type, or nullptr where no gradient flows (integer or
// bool operands, indices, predicates). A rule may throw axle::Error for an attribute variant that
// is not differentiable (e.g. all_reduce with kind=prod), naming the node.
using VjpRule = std::vector<ir::Value*> (*)(ir::Builder& b, const ir::Node& node,
                                            std::span<ir::Value* const> result_cotangents);

enum class VjpKind {
  kRule,               // `rule` computes the operands' cotangents
  kZeroGradient,       // the op is piecewise constant (or a source): no gradient flows back
  kNotDifferentiable,  // differentiating through it is an error, explained by `reason`
};

struct VjpEntry {
  VjpKind kind = VjpKind::kNotDifferentiable;
  VjpRule rule = nullptr;   // set iff kind == kRule
  std::string_view reason;  // why, for kZeroGradient and kNotDifferentiable
};

// The table entry of `op`, or nullptr when the table lacks one (a test walks AllOps() for that).
const VjpEntry* GetVjp(ir::OpKind op);

// Appends to b's function the backward nodes of the function's forward graph and returns, for
// each `wrt[j]`, d(sum_i <outputs[i], output_cotangents[i]>) / d(wrt[j]): a value of wrt[j]'s
// type. When wrt[j] does not influence the outputs (or is not a float), the result is a zeros
// value of its type.
//
// `outputs` and `wrt` are values of b's function; `output_cotangents[i]` has outputs[i]'s type
// (nullptr = zero cotangent). Only float values carry gradients. Nodes reachable backward from
// the outputs and depending on some wrt value are visited in reverse order; cotangents of a value
// used several times are accumulated with `add`. Backward nodes that turn out unused are erased
// again, so the function only grows by what the gradients need.
// Throws axle::Error when a gradient would have to flow through a not-differentiable op, naming
// the node and the reason.
//
// `stop_gradient` (optional) lists values treated as constants: no cotangent flows into them
// (the frontend's detach() and no_grad regions).
//
// `remat` (optional) lists rematerialized regions (gradient checkpointing, Note [Recomputed
// regions] in vjp.cc): the backward of a region's nodes reads a recomputation of the region, made
// in the backward from the region's inputs, instead of the forward's intermediates, which then
// die after the forward.
struct RematRegion {
  enum class Policy {
    kFull,          // every node of the region is recomputed
    kSaveProducts,  // dot_general results are saved (read from the forward); the rest recomputed
  };
  std::vector<const ir::Node*> nodes;  // forward nodes of the region, in function order
  Policy policy = Policy::kFull;
};
std::vector<ir::Value*> BuildVjp(ir::Builder& b, std::span<ir::Value* const> outputs,
                                 std::span<ir::Value* const> output_cotangents,
                                 std::span<ir::Value* const> wrt,
                                 const std::unordered_set<const ir::Value*>* stop_gradient = nullptr,
                                 std::span<const RematRegion> remat = {});

// A copy of `m` whose entry function returns (its results..., d result[output_index] /
// d parameter[p] for p in wrt_params). The output must be a float scalar (its cotangent seed is
// 1); the parameters are given by their `index`. Throws axle::Error on a bad index or a
// non-scalar/non-float output.
std::unique_ptr<ir::Module> GradModule(const ir::Module& m, int output_index,
                                       std::vector<int> wrt_params);

}  // namespace axle::autodiff
