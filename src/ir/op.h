// OpKind and the static facts of each op, generated from the one op table (ops.def).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/attrs.h"

namespace axle::ir {

inline constexpr int kVariadic = -1;

// Op traits (bit flags).
inline constexpr uint32_t kElementwise = 1u << 0;     // result[i] depends on operands[i] only
inline constexpr uint32_t kDeclaresResult = 1u << 1;  // result types are stated, then checked
inline constexpr uint32_t kCollective = 1u << 2;      // communicates between replicas

enum class OpKind : uint16_t {
#define AXLE_OP(e, name, attrs, min_ops, max_ops, results, traits) e,
#include "ir/ops.def"
#undef AXLE_OP
};

inline constexpr int kNumOps = 0
#define AXLE_OP(e, name, attrs, min_ops, max_ops, results, traits) +1
#include "ir/ops.def"
#undef AXLE_OP
    ;

struct OpInfo {
  OpKind kind;
  std::string_view name;     // text name, e.g. "dot_general"
  size_t attrs_index;        // index of the op's struct in the Attrs variant
  int min_operands;
  int max_operands;          // kVariadic = unbounded
  int num_results;           // kVariadic = decided by the shape rule / declaration
  uint32_t traits;

  bool Has(uint32_t trait) const { return (traits & trait) != 0; }
};

// The table, indexed by OpKind.
const std::array<OpInfo, kNumOps>& AllOps();
inline const OpInfo& GetOpInfo(OpKind k) { return AllOps()[static_cast<size_t>(k)]; }
inline std::string_view OpName(OpKind k) { return GetOpInfo(k).name; }
// Looks an op up by its text name.
std::optional<OpKind> ParseOpKind(std::string_view name);
// A default-constructed attribute struct of the right type for `k`.
Attrs DefaultAttrs(OpKind k);

}  // namespace axle::ir
