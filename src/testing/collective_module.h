// A module on n replicas with every collective kind over many replica-group shapes and dtypes:
// the conformance program of every Communicator (the in-process one in tests/runtime, Gloo's
// across processes in tests/dist), checked against ir::EvaluateReplicated.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/attrs.h"
#include "ir/module.h"

namespace axle::testing {

// Replica group shapes for n devices: all (empty), one explicit group in reverse order, pairs or
// quads of neighbours, strided groups, singletons.
std::vector<ir::ReplicaGroups> GroupShapes(int64_t n);
// collective_permute pairs for n devices: none, a ring, one pair, neighbour swaps.
std::vector<ir::ReplicaGroups> PairShapes(int64_t n);
// Every collective kind over GroupShapes(n) and PairShapes(n), on f32, bf16, f16, f64, i32, u8
// and bool; elementwise ops before and after so the compiled backend fuses around them.
std::unique_ptr<ir::Module> CollectiveModule(int64_t n);

}  // namespace axle::testing
