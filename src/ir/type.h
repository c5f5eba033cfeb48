// Value types of the IR: a tensor type (element type + static shape) and a sharding annotation.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace axle::ir {

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  TensorType() = default;
  TensorType(DType d, Shape s) : dtype(d), shape(std::move(s)) {}

  int64_t rank() const { return shape.rank(); }
  int64_t NumElements() const { return shape.NumElements(); }
  int64_t ByteSize() const { return NumElements() * DTypeSize(dtype); }
  // "f32[4,8]", as in the text format.
  std::string ToString() const;
  bool operator==(const TensorType&) const = default;
};

// How a value is laid out over a device mesh (see docs/ir.md, "Shardings").
//   dims[i]  : the mesh axes dimension i is split over, major to minor; empty = replicated.
//   partial  : mesh axes over which the value is a partial sum still to be reduced.
// Printed after the type: f32[8,16]{[x,y], [], partial=[z]}.
struct Sharding {
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> partial;

  std::string ToString() const;
  // No dimension split and nothing partial: every device holds the whole value.
  bool IsReplicated() const {
    for (const auto& d : dims)
      if (!d.empty()) return false;
    return partial.empty();
  }
  bool operator==(const Sharding&) const = default;
};

}  // namespace axle::ir
