// Structural hashing of modules: the key of the compile cache.
//
//   ModuleHash h = HashModule(m);
//   std::string key = h.ToHex();   // "3f9c...": 32 lowercase hex digits
//
// Two modules hash alike when they compute the same thing in the same way: the hash ignores
// value names, source locations, the module's name, the order of independent nodes and the order
// of functions, and depends on everything else (ops, every attribute field, result types,
// operand wiring, shardings, parameter indices, function names and result order, num_replicas).
// It is the same on every machine and in every process. See Note [Structural hash] in hash.cc.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/module.h"

namespace axle::ir {

// A 128-bit hash (XXH3-128 of a canonical byte stream).
struct ModuleHash {
  uint64_t hi = 0;
  uint64_t lo = 0;

  // 32 lowercase hex digits, `hi` first.
  std::string ToHex() const;
  auto operator<=>(const ModuleHash&) const = default;
};

// The structural hash of `m`. `m` need not be verified, but every operand and function result
// must be a value defined by an earlier node of the same function (as the printer requires);
// throws axle::Error otherwise. Cost: linear in the size of the module (nodes, attribute and
// literal bytes), plus sorting the node hashes of each function.
ModuleHash HashModule(const Module& m);

// An exact but order-dependent key of a function being built node by node: equal keys mean the
// same ops, attributes, result types and shardings, dataflow and results, in the same order (and
// the same mesh). It writes each node once into one byte stream and hashes that (XXH3-128): no
// per-node digests, maps or sorting, so it costs a fraction of HashModule. The lazy tensor layer
// keys its in-memory executable cache with it (Note [Trace keys], lazy.cc); HashModule stays the
// canonical key (disk cache, recompilation reports).
class NodeSequenceKey {
 public:
  NodeSequenceKey();
  ~NodeSequenceKey();
  NodeSequenceKey(const NodeSequenceKey&) = delete;
  NodeSequenceKey& operator=(const NodeSequenceKey&) = delete;

  // Appends node `n` with attributes `attrs` (n's, or a renumbered parameter's) and its operands
  // given as the positions of their values among the results of the nodes added so far.
  void AddNode(const Node& n, const Attrs& attrs, const std::vector<int64_t>& operand_ids);
  // The function's results, as value positions; the mesh of its sharding annotations, if any.
  void AddResults(const std::vector<int64_t>& ids);
  void AddMesh(const std::optional<Mesh>& mesh);
  ModuleHash Digest() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace axle::ir
