// Random valid IR modules, for property tests and for fuzzing the compiler against the
// reference interpreter.
//
//   RandomModuleOptions opts;
//   opts.collectives = true;
//   opts.num_replicas = 4;
//   std::unique_ptr<ir::Module> m = RandomModule(seed, opts);     // verifies by construction
//   std::vector<ir::Literal> args = RandomArguments(*m->entry(), seed);
//
// Everything here is a pure function of its seed and options, on every machine and standard
// library (the generator uses its own splitmix64 stream, not <random>'s distributions).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "ir/op.h"

namespace axle::testing {

// Every element type, in DType order.
std::vector<DType> AllDTypes();

struct RandomModuleOptions {
  // Ops drawn per function. Each may add a few source nodes (parameters, constants) that make its
  // operands, so a function has somewhat more nodes than this.
  int num_nodes = 12;
  // Bounds on the shapes of every value: rank <= max_rank, dims <= 2 * max_dim (a fresh value's
  // dims are <= max_dim; pad, concatenate and gathers may grow them up to twice that).
  int max_rank = 3;
  int64_t max_dim = 4;
  // Whether dims of size 0 may appear (fresh shapes, empty slices, cropping pads, ...).
  bool allow_zero_sized = true;
  // Element types of data values. Ops whose operands have fixed types still use those: bool
  // predicates, integer indices, argmax's index type, u32 rng keys and bits.
  std::vector<DType> dtypes = AllDTypes();
  // Whether to draw collective ops, with replica groups valid for num_replicas.
  bool collectives = false;
  int64_t num_replicas = 1;
  // The module holds 1..max_functions functions; the first is usually "main".
  int max_functions = 2;
  // Each function has at most max_parameters parameters and 0..max_results results.
  int max_parameters = 4;
  int max_results = 3;
  // Percentages of values that get a random sharding / a random name.
  int sharding_percent = 15;
  int name_percent = 30;
  // Whether to draw fusion nodes (compiler output: each calls a new function of the module that
  // computes a small elementwise expression of its operands).
  bool fusions = false;
  // The ops to draw from; empty = every op of ops.def (collectives only with `collectives`,
  // fusion only with `fusions`).
  std::vector<ir::OpKind> ops;
};

// A random module that passes ir::Verify, built with ir::Builder. Nodes draw their operands from
// earlier values (so values are shared and some nodes are dead) or from new parameters and
// constants. Constants include nan, inf, -0, subnormals and the largest finite values for floats,
// and extremes for integers.
// Index operands (gather/scatter indices, dynamic_slice starts) are integer constants, mostly in
// range and sometimes slightly out of it (where docs/design.md defines clamping or dropping),
// never indexing into an empty axis. custom_call nodes use the target "axle.test.identity"
// (results = operands; see RegisterTestCustomCalls). Throws axle::Error when the options admit
// no valid node at all, or when an op of ops.def has no generator (add one in
// random_module_ops.cc).
std::unique_ptr<ir::Module> RandomModule(uint64_t seed, const RandomModuleOptions& options = {});

// Registers with the reference interpreter (ir::RegisterCustomCall) the kernels of the
// custom_call targets RandomModule uses: "axle.test.identity" returns its operands. Call it
// before evaluating random modules; calling it again is harmless.
void RegisterTestCustomCalls();

// One literal per parameter of `f`, in parameter-index order, of the parameter's type. Floats are
// mostly small multiples of 1/8 (exact in every float type), sometimes random bit patterns or
// nan, inf, -0, subnormal or huge; integers mostly small, sometimes random or extreme; bools 0/1.
std::vector<ir::Literal> RandomArguments(const ir::Function& f, uint64_t seed);

// A deep copy of `m` (names, shardings and locations included) whose functions list their nodes
// in a random valid topological order (every operand must be defined in its own function).
std::unique_ptr<ir::Module> ShuffleIndependentNodes(const ir::Module& m, uint64_t seed);

// Gives each value of `m` a random name, or none; names may repeat.
void RenameValues(ir::Module& m, uint64_t seed);

}  // namespace axle::testing
