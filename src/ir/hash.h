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
#include <string>

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

}  // namespace axle::ir
