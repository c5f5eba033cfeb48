// Static tensor shapes: a list of non-negative dimension sizes (rank 0 is a scalar).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace axle {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& mutable_dims() { return dims_; }

  // Product of the dims (1 for a scalar). Only meaningful when ElementCountFits() holds.
  int64_t NumElements() const;
  // True when every dim is >= 0 and the element count fits in int64 without overflow.
  bool IsValid() const;
  // Row-major strides in elements.
  std::vector<int64_t> Strides() const;

  // "[2,3]" (and "[]" for a scalar), as in the text format.
  std::string ToString() const;

  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

// Element count of `dims` or nullopt on a negative dim or int64 overflow.
std::optional<int64_t> CheckedNumElements(const std::vector<int64_t>& dims);

}  // namespace axle
