// The IR verifier: checks that a module is well formed before any pass or backend touches it.
//
// It checks, for every node: operands defined earlier in the same function; the op's operand count
// and attribute struct; the result types against the op's shape rule (shape_inference.h); valid
// shapes; well-formed sharding annotations. Per function: parameter indices 0..n-1 each once;
// results defined. Per module: unique function names, num_replicas >= 1.
#pragma once

#include "ir/module.h"

namespace axle::ir {

// Throws axle::Error at the first problem. The message names the function, the node (in IR
// text), its operand types and the rule broken; the error's location is the node's SourceLoc.
void Verify(const Module& module);
// With a mesh, every sharding's axes must be the mesh's.
void VerifyFunction(const Function& function, int64_t num_replicas = 1, const Mesh* mesh = nullptr);

}  // namespace axle::ir
