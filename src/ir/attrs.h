// Typed attribute structs of the IR ops.
//
// Each op declares one attribute struct in ops.def. A struct lists its fields once, in
// VisitFields, and the printer, parser, hasher and equality are written once over that list (no
// untyped parameter arrays, no per-op printing code). Field types allowed in VisitFields:
//   int64_t, bool, std::string, DType, CompareDir, ReduceKind, std::vector<int64_t>,
//   ReplicaGroups (std::vector<std::vector<int64_t>>), Literal.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "ir/literal.h"

namespace axle::ir {

// Direction of a `compare`.
enum class CompareDir : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
// The combiner of `reduce`, `all_reduce` and `reduce_scatter`.
enum class ReduceKind : uint8_t { kSum, kProd, kMax, kMin, kAnd, kOr };

// Text names of enum attribute values ("lt", "sum").
template <typename E>
struct EnumNames;
template <>
struct EnumNames<CompareDir> {
  static constexpr std::array<std::string_view, 6> kNames = {"eq", "ne", "lt", "le", "gt", "ge"};
};
template <>
struct EnumNames<ReduceKind> {
  static constexpr std::array<std::string_view, 6> kNames = {"sum", "prod", "max", "min", "and", "or"};
};
template <typename E>
std::string_view EnumName(E e) {
  return EnumNames<E>::kNames[static_cast<size_t>(e)];
}
template <typename E>
std::optional<E> ParseEnum(std::string_view s) {
  for (size_t i = 0; i < EnumNames<E>::kNames.size(); ++i)
    if (EnumNames<E>::kNames[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

// Replica groups of a collective: each inner list is one group of replica ids. An empty list
// means one group holding every replica of the module.
using ReplicaGroups = std::vector<std::vector<int64_t>>;

#define AXLE_ATTR_FIELDS(...)      \
  template <typename V>            \
  void VisitFields(V&& v) {        \
    __VA_ARGS__;                   \
  }                                \
  template <typename V>            \
  void VisitFields(V&& v) const {  \
    __VA_ARGS__;                   \
  }

struct NoAttrs {
  AXLE_ATTR_FIELDS()
};
// constant: the value, whose type is the result type.
struct ConstantAttrs {
  Literal value;
  AXLE_ATTR_FIELDS(v("value", value))
};
// parameter: position in the function's argument list.
struct ParameterAttrs {
  int64_t index = 0;
  AXLE_ATTR_FIELDS(v("index", index))
};
// iota: result[i0, ..., in] = i_dim.
struct IotaAttrs {
  int64_t dim = 0;
  AXLE_ATTR_FIELDS(v("dim", dim))
};
struct CompareAttrs {
  CompareDir dir = CompareDir::kEq;
  AXLE_ATTR_FIELDS(v("dir", dir))
};
// broadcast_in_dim: operand dim i becomes result dim dims[i] (result shape is declared).
struct BroadcastInDimAttrs {
  std::vector<int64_t> dims;
  AXLE_ATTR_FIELDS(v("dims", dims))
};
// transpose: result dim i is operand dim perm[i].
struct TransposeAttrs {
  std::vector<int64_t> perm;
  AXLE_ATTR_FIELDS(v("perm", perm))
};
struct SliceAttrs {
  std::vector<int64_t> start;
  std::vector<int64_t> limit;
  std::vector<int64_t> strides;
  AXLE_ATTR_FIELDS(v("start", start); v("limit", limit); v("strides", strides))
};
struct DynamicSliceAttrs {
  std::vector<int64_t> sizes;
  AXLE_ATTR_FIELDS(v("sizes", sizes))
};
// pad: edge padding low/high (may be negative: cropping) and interior padding between elements.
struct PadAttrs {
  std::vector<int64_t> low;
  std::vector<int64_t> high;
  std::vector<int64_t> interior;
  AXLE_ATTR_FIELDS(v("low", low); v("high", high); v("interior", interior))
};
struct ConcatenateAttrs {
  int64_t dim = 0;
  AXLE_ATTR_FIELDS(v("dim", dim))
};
struct ReverseAttrs {
  std::vector<int64_t> dims;
  AXLE_ATTR_FIELDS(v("dims", dims))
};
// reduce: combines the elements over `dims` (removed from the shape) with `kind`.
struct ReduceAttrs {
  ReduceKind kind = ReduceKind::kSum;
  std::vector<int64_t> dims;
  AXLE_ATTR_FIELDS(v("kind", kind); v("dims", dims))
};
// argmax / argmin over `dim` (removed); the index of the first extreme element.
struct ArgReduceAttrs {
  int64_t dim = 0;
  DType index_dtype = DType::kI32;
  AXLE_ATTR_FIELDS(v("dim", dim); v("index_dtype", index_dtype))
};
// dot_general, as XLA's: result dims are batch, then lhs free, then rhs free.
struct DotGeneralAttrs {
  std::vector<int64_t> lhs_batch;
  std::vector<int64_t> rhs_batch;
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> rhs_contracting;
  AXLE_ATTR_FIELDS(v("lhs_batch", lhs_batch); v("rhs_batch", rhs_batch);
                   v("lhs_contracting", lhs_contracting); v("rhs_contracting", rhs_contracting))
};
// gather / scatter_add: take along `axis` with the leading `batch_dims` dims shared by operand
// and indices (tf.gather's semantics). See docs/ir.md.
struct GatherAttrs {
  int64_t axis = 0;
  int64_t batch_dims = 0;
  AXLE_ATTR_FIELDS(v("axis", axis); v("batch_dims", batch_dims))
};
// cumsum: inclusive running sum along `dim`, from the end when `reverse`.
struct CumsumAttrs {
  int64_t dim = 0;
  bool reverse = false;
  AXLE_ATTR_FIELDS(v("dim", dim); v("reverse", reverse))
};
// sort: stable sort of all operands along `dim` by the first operand.
struct SortAttrs {
  int64_t dim = 0;
  bool descending = false;
  AXLE_ATTR_FIELDS(v("dim", dim); v("descending", descending))
};
struct AllReduceAttrs {
  ReduceKind kind = ReduceKind::kSum;
  ReplicaGroups groups;
  AXLE_ATTR_FIELDS(v("kind", kind); v("groups", groups))
};
struct AllGatherAttrs {
  int64_t dim = 0;
  ReplicaGroups groups;
  AXLE_ATTR_FIELDS(v("dim", dim); v("groups", groups))
};
struct ReduceScatterAttrs {
  ReduceKind kind = ReduceKind::kSum;
  int64_t dim = 0;
  ReplicaGroups groups;
  AXLE_ATTR_FIELDS(v("kind", kind); v("dim", dim); v("groups", groups))
};
struct AllToAllAttrs {
  int64_t split_dim = 0;
  int64_t concat_dim = 0;
  ReplicaGroups groups;
  AXLE_ATTR_FIELDS(v("split_dim", split_dim); v("concat_dim", concat_dim); v("groups", groups))
};
// collective_permute: each [source, target] pair sends source's operand to target; replicas
// that receive nothing get zeros.
struct CollectivePermuteAttrs {
  ReplicaGroups pairs;
  AXLE_ATTR_FIELDS(v("pairs", pairs))
};
// custom_call: a named opaque kernel; result types are declared on the node.
struct CustomCallAttrs {
  std::string target;
  std::string config;
  AXLE_ATTR_FIELDS(v("target", target); v("config", config))
};

// fusion: one kernel the compiler made (the `fuse` pass). `calls` names the function of the
// module it evaluates (parameters = the node's operands, results = the node's results); `kind`
// says how its loop is organised: "loop" (elementwise over the results' elements), "reduce" (a
// row or column reduction, its last node, with an elementwise prologue) or "rows" (row
// reductions over [A, R] and what follows them per row). docs/compiler.md, "Fusion".
struct FusionAttrs {
  std::string kind;
  std::string calls;
  AXLE_ATTR_FIELDS(v("kind", kind); v("calls", calls))
};

#undef AXLE_ATTR_FIELDS

using Attrs = std::variant<NoAttrs, ConstantAttrs, ParameterAttrs, IotaAttrs, CompareAttrs,
                           BroadcastInDimAttrs, TransposeAttrs, SliceAttrs, DynamicSliceAttrs,
                           PadAttrs, ConcatenateAttrs, ReverseAttrs, ReduceAttrs, ArgReduceAttrs,
                           DotGeneralAttrs, GatherAttrs, CumsumAttrs, SortAttrs, AllReduceAttrs,
                           AllGatherAttrs, ReduceScatterAttrs, AllToAllAttrs,
                           CollectivePermuteAttrs, CustomCallAttrs, FusionAttrs>;

// A generic view of one attribute field, for code that handles every struct alike (printer,
// parser, hasher, equality). The pointers are into the Attrs they were taken from.
using FieldRef = std::variant<const int64_t*, const bool*, const std::string*, const DType*,
                              const CompareDir*, const ReduceKind*, const std::vector<int64_t>*,
                              const ReplicaGroups*, const Literal*>;
using MutableFieldRef = std::variant<int64_t*, bool*, std::string*, DType*, CompareDir*,
                                     ReduceKind*, std::vector<int64_t>*, ReplicaGroups*, Literal*>;
struct Field {
  std::string_view name;
  FieldRef ref;
};
struct MutableField {
  std::string_view name;
  MutableFieldRef ref;
};

// The fields of the struct held by `attrs`, in declaration order.
std::vector<Field> AttrFields(const Attrs& attrs);
std::vector<MutableField> MutableAttrFields(Attrs& attrs);

// Field-wise equality of two attribute values (false when they hold different structs).
bool AttrsEqual(const Attrs& a, const Attrs& b);

}  // namespace axle::ir
