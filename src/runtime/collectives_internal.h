// What every Communicator implementation checks the same way (collectives.cc): the description
// of a call that peers must agree on, the validation of its attributes, and who talks to whom.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/attrs.h"
#include "ir/literal.h"
#include "runtime/collectives.h"

namespace axle::runtime {

// What one device asks for; every device must ask for the same at the same call.
struct CollectiveRequest {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  ir::ReduceKind reduce = ir::ReduceKind::kSum;
  int64_t dim0 = 0, dim1 = 0;  // dim / split_dim, concat_dim
  ir::ReplicaGroups groups;    // or pairs
  ir::TensorType type;         // the operand's

  bool operator==(const CollectiveRequest&) const = default;
  // "all_reduce(kind=sum, groups=[[0, 1]]) on f32[4]"
  std::string ToString() const;
};

std::string GroupsText(const ir::ReplicaGroups& groups);
void CheckReduceKind(ir::ReduceKind kind, const ir::TensorType& t, const char* op);
void CheckDim(int64_t dim, const ir::TensorType& t, const char* op, const char* what);
void CheckOut(const CollectiveRequest& r, const ir::Literal& out, const ir::TensorType& want);
void CheckDevice(int device, int num_devices);

// The result type of `r` in a group of n members; checks the attributes against the operand
// (dims in range, reduce kind defined for the dtype, divisibility).
ir::TensorType CollectiveResultType(const CollectiveRequest& r, int64_t n);

// The members of `device`'s group (in group order) and its position there; checks the groups.
std::pair<std::vector<int>, size_t> GroupOf(int device, const CollectiveRequest& r, int num_devices);

// collective_permute seen from one device: whom it receives from (-1: nobody, it gets zeros) and
// whom it sends to; checks the pairs.
struct PermuteRoute {
  int source = -1;
  std::vector<int> targets;
};
PermuteRoute RouteOf(int device, const ir::ReplicaGroups& pairs, int num_devices);

}  // namespace axle::runtime
