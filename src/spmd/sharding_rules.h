// Sharding propagation rules: one entry per op, in a table keyed by OpKind (see ops.def), used by
// PropagateShardings (propagation.h) and documented in docs/spmd.md ("Propagation rules").
//
// A rule projects shardings across one node:
//   forward : the operands' shardings (nullopt = not known yet) -> proposals for the results;
//   backward: the results' shardings -> proposals for the operands.
// Each proposal comes from one source (one operand for forward, one result for backward), so the
// propagation can weigh and explain conflicting proposals. A dimension a rule cannot map (a sliced
// or reduced dim, a dim that a reshape breaks up) is left replicated in the proposal. Partial-sum
// axes are produced only by forward rules: where an op contracts a sharded dimension (sum reduce,
// dot_general), and carried through the ops linear in their partial operands that the partitioner
// computes on partial sums: neg, float-to-float convert, add/sub of equally partial operands, mul
// with one partial operand by a factor known finite, float div of a partial numerator by a divisor
// known nonzero, sum reductions, dot_general with one partial operand by one known finite
// (CarriesPartialSums below). Every other op on a partial operand gets the completed sum (the partitioner
// all-reduces first), so its result is not partial.
//
// An op whose results are always replicated has no rules and a `replicated_reason` instead
// ("not shardable: replicated", e.g. custom_call: an opaque kernel sees whole tensors). A test walks
// ir::AllOps() and fails when an op has neither.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/mesh.h"
#include "ir/module.h"
#include "ir/type.h"

namespace axle::spmd {

using MaybeSharding = std::optional<ir::Sharding>;

// A proposed sharding for one value at a node: `target` is the result index (forward) or operand
// index (backward) it is for; `source` the operand index (forward) or result index (backward) it
// was derived from.
struct Proposal {
  int target = 0;
  int source = 0;
  ir::Sharding sharding;
};

using ForwardRule = std::vector<Proposal> (*)(const ir::Node& node, std::span<const MaybeSharding> operands,
                                               const ir::Mesh& mesh);
using BackwardRule = std::vector<Proposal> (*)(const ir::Node& node, std::span<const MaybeSharding> results,
                                                const ir::Mesh& mesh);

struct ShardingRule {
  ForwardRule forward = nullptr;
  BackwardRule backward = nullptr;
  // Non-empty: the op is not shardable, its results are replicated (unless the user annotated
  // them); the text says why. Then forward and backward are null.
  std::string_view replicated_reason;
};

// The table entry of `op`, or nullptr when the table lacks one (a test walks AllOps() for that).
const ShardingRule* GetShardingRule(ir::OpKind op);

// Note [Partial sums through products]
// A pending partial sum x = x_0 + ... + x_{n-1} (one term per device) may be carried through a
// product by a whole value c only where (x_0 c) + ... + (x_{n-1} c) is x c for every value the
// program can meet. For finite c it is (up to the order of the sums); for c = inf it is not: x = 1
// split as 2 + (-1) gives inf + (-inf) = NaN where one device gives inf; so is x / 0. So the rules
// carry a partial sum through mul and dot_general only by a factor known finite, and through a
// float div only by a divisor known nonzero; otherwise the partitioner completes the sum first.
// Known: integer factors (their products wrap exactly; integer division is not linear and never
// carries), constants whose elements all qualify, float iotas short of the dtype's range, converts
// from integers, exact float widenings, and movements (broadcast, reshape, transpose, slice,
// reverse, concatenate) of known values. Computed values and parameters are not known.
//
// Whether `factor` is known finite (`divisor` false) or known nonzero (`divisor` true), as above.
bool CarriesPartialSums(const ir::Value& factor, bool divisor);

// A replicated sharding of `rank` dimensions.
ir::Sharding Replicated(int64_t rank);
// Whether `s` splits nothing and has no partial axes.
bool IsReplicated(const ir::Sharding& s);
// The number of shards of a value with sharding `s` (product of the sizes of its dims' axes;
// partial axes are not counted).
int64_t NumShards(const ir::Sharding& s, const ir::Mesh& mesh);

}  // namespace axle::spmd
