// Shape and dtype rules: one per op, in a table keyed by OpKind (see ops.def).
//
// A rule takes the operand types, the attributes and, for ops with the kDeclaresResult trait, the
// declared result types, and returns the result types. It throws axle::Error naming the rule that
// is broken ("dims [0, 0] repeat a dimension"); the caller adds the node, its location and its
// operand types. The builder uses the rules to infer types, the verifier to check them.
#pragma once

#include <span>
#include <vector>

#include "ir/attrs.h"
#include "ir/op.h"
#include "ir/type.h"

namespace axle::ir {

struct ShapeContext {
  int64_t num_replicas = 1;  // the module's replica count, for collectives
};

using ShapeRule = std::vector<TensorType> (*)(std::span<const TensorType> operands,
                                               const Attrs& attrs,
                                               std::span<const TensorType> declared,
                                               const ShapeContext& ctx);

// The rule of `op`, or nullptr when the table lacks one (a test walks the table for that).
ShapeRule GetShapeRule(OpKind op);

// Checks the operand count and attribute struct of `op`, then applies its rule. `declared` must
// hold the result types for kDeclaresResult ops and is otherwise ignored. Throws axle::Error.
std::vector<TensorType> InferResultTypes(OpKind op, std::span<const TensorType> operands,
                                         const Attrs& attrs, std::span<const TensorType> declared,
                                         const ShapeContext& ctx);

// The dims of a dot_general operand of rank `rank` that are neither batch nor contracting, in
// order: the operand's free dims, which follow the batch dims in the result (lhs's, then rhs's).
std::vector<int64_t> DotFreeDims(int64_t rank, const std::vector<int64_t>& batch,
                                 const std::vector<int64_t>& contracting);

// The size of each group of `groups` over `num_replicas` replicas, after checking that the groups
// partition 0..num_replicas-1 into equal, non-empty parts (empty `groups` = one group of all).
int64_t ReplicaGroupSize(const ReplicaGroups& groups, int64_t num_replicas);

}  // namespace axle::ir
