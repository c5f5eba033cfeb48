// Sharding propagation: fills in a sharding for every value of a module's entry function from the
// few the user annotated (docs/spmd.md, "Propagation rules", "Conflicts and AXLE_DEBUG").
//
//   module @m {mesh_axes=[tp], mesh_shape=[4]} {
//     func @main {
//       %x = parameter() {index=0} : f32[8,16]
//       %w = parameter() {index=1} : f32[16,32]{[], [tp]}
//       %y = dot_general(%x, %w) {...} : f32[8,32]          // becomes f32[8,32]{[], [tp]}
//       ...
//   spmd::PropagateShardings(module);
//
// Annotations present in the input are hard constraints: they are checked, then never changed.
// Every other value of the entry function is filled by alternating forward and backward sweeps
// over the nodes, applying the per-op rules of sharding_rules.h, until nothing changes -- first
// without the forward proposals of broadcasts that add elements, then with them (a broadcast
// follows its users before its small operand). A value
// only ever gains axes (a sweep refines, never reassigns), so the sweeps end. Parameters keep
// their annotation or are replicated; values nothing reaches end replicated. When the proposals
// for one value conflict, the one with the lowest cost wins: the bytes of the tensors that would
// have to be resharded at the edges whose proposal is not followed (so the layouts of larger
// tensors win); ties go to the proposal that splits the value into more shards, then to the
// first one. With AXLE_DEBUG=1 every conflict is explained on stderr. A layout on a dim beats a
// pending sum over the same axis. A final forward sweep sets each computed value's partial-sum
// axes from its operands' final shardings; values the entry function returns get none (they are
// returned complete).
//
// Other functions of the module are left as they are. Access a result by Value::sharding().
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace axle::spmd {

struct PropagationReport {
  bool changed = false;  // whether any value got or changed a sharding
  int sweeps = 0;        // forward + backward sweeps run, the final partial sweep not counted
  int conflicts = 0;     // decisions where some proposal for a value had to be ignored
  // One line per annotated dimension the shard count does not divide (allowed: the partitioner
  // pads it); AXLE_DEBUG prints them too.
  std::vector<std::string> notes;
};

// Propagates shardings through module.entry() (see above). Throws axle::Error when the module has
// no mesh or is already partitioned (num_replicas != 1), or when a user annotation is impossible (rank mismatch, an empty or unknown axis, an
// axis used twice), naming the value and the spec. A dimension whose size the shard count does
// not divide is allowed (the partitioner pads it); AXLE_DEBUG notes it.
PropagationReport PropagateShardings(ir::Module& module);

// Checks the annotations of the entry function's values against the module's mesh as above
// (PropagateShardings does this first); returns the notes on uneven dimensions.
std::vector<std::string> CheckAnnotations(const ir::Module& module);

}  // namespace axle::spmd
