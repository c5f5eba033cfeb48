// Collectives between the devices of a replicated step (docs/runtime.md, "Devices and collectives").
//
// A Communicator is one object per group of devices (a step's replicas: device r runs replica r).
// Each device calls it from its own thread with its own device id, its operand and an output
// literal of the collective's result type, in the same order on every device (SPMD: every device
// runs the same program). A call blocks until the members of the caller's replica group have
// arrived and the result is in `out`. Replica groups and pairs are exactly the IR attributes
// (ir::AllReduceAttrs etc.: an empty group list is one group of all devices), and results are
// bitwise the reference interpreter's (ir::EvaluateReplicated): reductions combine the members'
// operands element by element in group member order, floats in double rounded once (Note
// [Accumulation] in ir/interpreter_reduce.cc), and a device that receives nothing in a
// collective_permute gets zeros.
//
//   std::unique_ptr<Communicator> comm = NewInProcessCommunicator(4);
//   // on device d's thread:
//   comm->AllReduce(d, x, out, ir::ReduceKind::kSum, {{0, 1}, {2, 3}});
//
// The in-process implementation meets in shared memory; Gloo/MPI (processes) and NCCL (GPUs)
// implementations of the same interface take their place.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ir/attrs.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "runtime/backend.h"

namespace axle::runtime {

enum class CollectiveKind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kCollectivePermute };
// "all_reduce", ... (the IR op names).
std::string_view CollectiveName(CollectiveKind kind);

// Counters of one device's collective calls. Bytes are payload bytes: the operand each call
// contributes (collective_permute: only when the device sends), summed over calls; not the wire
// traffic of any particular algorithm.
struct CollectiveStats {
  int64_t collectives = 0;  // calls of any kind
  int64_t all_reduce_bytes = 0;
  int64_t all_gather_bytes = 0;
  int64_t reduce_scatter_bytes = 0;
  int64_t all_to_all_bytes = 0;
  int64_t collective_permute_bytes = 0;
  // Wall time inside the calls (waiting for peers included): RunCollectiveNode measures it.
  double seconds = 0;

  CollectiveStats& operator+=(const CollectiveStats& o);
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int num_devices() const = 0;

  // Each call: `device` in [0, num_devices()); `out` of the collective's result type (its
  // contents are overwritten). Throws axle::Error on invalid groups, a wrong `out` type, devices
  // disagreeing on the collective (kind, attributes or operand type at the same position of their
  // call sequences), and when the step was aborted (see Abort).
  virtual void AllReduce(int device, const ir::Literal& in, ir::Literal& out, ir::ReduceKind kind,
                         const ir::ReplicaGroups& groups) = 0;
  // Concatenation of the group members' operands along `dim`, in member order.
  virtual void AllGather(int device, const ir::Literal& in, ir::Literal& out, int64_t dim,
                         const ir::ReplicaGroups& groups) = 0;
  // Member k gets chunk k (along `dim`) of the combination of the members' operands.
  virtual void ReduceScatter(int device, const ir::Literal& in, ir::Literal& out, ir::ReduceKind kind, int64_t dim,
                             const ir::ReplicaGroups& groups) = 0;
  // Member j splits its operand into n chunks along split_dim and sends chunk k to member k;
  // member k concatenates what it receives along concat_dim in member order.
  virtual void AllToAll(int device, const ir::Literal& in, ir::Literal& out, int64_t split_dim, int64_t concat_dim,
                        const ir::ReplicaGroups& groups) = 0;
  // Each [source, target] pair sends source's operand to target; a device no pair targets gets
  // zeros.
  virtual void CollectivePermute(int device, const ir::Literal& in, ir::Literal& out,
                                 const ir::ReplicaGroups& pairs) = 0;

  // Device `device` failed with `reason`: every device blocked in a collective, or calling one
  // later in this step, throws axle::Error "device <device> failed: <reason>" instead of waiting
  // for it. The first abort of a step wins; later ones are ignored.
  virtual void Abort(int device, const std::string& reason) = 0;
  // Device `device` finished its step: devices still waiting for it in a collective it never
  // called throw instead of hanging (the devices ran different programs).
  virtual void EndStep(int device) = 0;
  // The abort message of this step ("device 3 failed: ..."), empty when none.
  virtual std::string abort_message() const = 0;
  // Starts a new step: forgets the last step's calls, abort and counters. Only while no device is
  // inside a call.
  virtual void Reset() = 0;
  // Counters of `device` since the last Reset.
  virtual CollectiveStats stats(int device) const = 0;
  // Adds to `device`'s CollectiveStats::seconds (RunCollectiveNode, around each call).
  virtual void AddSeconds(int device, double seconds) = 0;
};

// Devices that are threads of this process: calls meet under a mutex and condition variable
// (waiting devices sleep; they never spin), each device computes its own result from the group
// members' operands in place, and all_reduce splits the combination over the members.
std::unique_ptr<Communicator> NewInProcessCommunicator(int num_devices);

// The result of one group member given the group's operands in member order (all of one type):
// the arithmetic every implementation must reproduce bit for bit. `out` has the result type.
namespace collective {
// Elements [begin, end) of the combination (all_reduce on the whole range).
void Combine(std::span<const ir::Literal* const> group, ir::ReduceKind kind, ir::Literal& out, int64_t begin,
             int64_t end);
void AllGather(std::span<const ir::Literal* const> group, int64_t dim, ir::Literal& out);
void ReduceScatter(std::span<const ir::Literal* const> group, ir::ReduceKind kind, int64_t dim, size_t position,
                   ir::Literal& out);
void AllToAll(std::span<const ir::Literal* const> group, int64_t split_dim, int64_t concat_dim, size_t position,
              ir::Literal& out);
// out[i] = the combination of members[m][i] over m in order, i < count, for f32 and f64 sum and
// prod (the gradients' all-reduce) straight from element pointers, bitwise Combine's; false (and
// nothing done) for other dtypes and kinds, which go through Combine.
bool CombineContiguous(DType dtype, ir::ReduceKind kind, std::span<const void* const> members, void* out,
                       int64_t count);
// Chunk k of n along `dim` (dims[dim] divisible by n): what reduce_scatter and all_to_all send
// to member k.
ir::Literal Chunk(const ir::Literal& x, int64_t dim, int64_t k, int64_t n);
}  // namespace collective

// Runs collective node `n` of `device` through its communicator into `out` (of the result type).
void RunCollectiveNode(const ir::Node& n, const DeviceContext& device, const ir::Literal& in, ir::Literal& out);

}  // namespace axle::runtime
