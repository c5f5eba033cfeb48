// Static tensor shapes: a list of non-negative dimension sizes (rank 0 is a scalar).
#pragma once

#include <cstdint>
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace axle {

// A shape's dims as a read-only range of int64_t (what Shape::dims() returns): indexable,
// iterable, comparable, and convertible to std::vector<int64_t> where a function needs one.
// Like a reference into the shape, it is valid while the shape lives and is not modified.
class DimsView {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using const_iterator = const int64_t*;
  using iterator = const int64_t*;
  using const_reference = const int64_t&;
  using reference = const int64_t&;

  DimsView(const int64_t* data, size_t size) : data_(data), size_(size) {}
  DimsView(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }
  std::vector<int64_t> ToVector() const { return std::vector<int64_t>(begin(), end()); }

  friend bool operator==(DimsView a, DimsView b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(DimsView a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  const int64_t* data_;
  size_t size_;
};

// DimsView are stored inline up to kInlineRank (every shape a transformer step builds), on the heap
// beyond: the lazy tensor trace creates several shapes per node every step, and an allocation for
// each was a quarter of the host's mallocs.
class Shape {
 public:
  static constexpr size_t kInlineRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { Assign(dims.begin(), dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { Assign(dims.data(), dims.size()); }
  explicit Shape(DimsView dims) { Assign(dims.data(), dims.size()); }
  Shape(const Shape& o) { Assign(o.data(), o.rank_); }
  Shape(Shape&& o) noexcept { MoveFrom(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) Assign(o.data(), o.rank_);
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) MoveFrom(o);
    return *this;
  }
  ~Shape() = default;

  int64_t rank() const { return static_cast<int64_t>(rank_); }
  int64_t dim(int64_t i) const { return data()[static_cast<size_t>(i)]; }
  DimsView dims() const { return DimsView(data(), rank_); }
  void set_dim(int64_t i, int64_t d) { mutable_data()[static_cast<size_t>(i)] = d; }

  // Product of the dims (1 for a scalar). Only meaningful when ElementCountFits() holds.
  int64_t NumElements() const;
  // True when every dim is >= 0 and the element count fits in int64 without overflow.
  bool IsValid() const;
  // Row-major strides in elements.
  std::vector<int64_t> Strides() const;

  // "[2,3]" (and "[]" for a scalar), as in the text format.
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims() == b.dims(); }

 private:
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t* mutable_data() { return heap_ ? heap_.get() : inline_; }
  void Assign(const int64_t* d, size_t n) {
    if (n > kInlineRank) {
      std::unique_ptr<int64_t[]> h(new int64_t[n]);
      std::copy(d, d + n, h.get());
      heap_ = std::move(h);
    } else {
      std::copy(d, d + n, inline_);  // d may be our own inline storage only when this == &o
      heap_.reset();
    }
    rank_ = n;
  }
  void MoveFrom(Shape& o) {
    heap_ = std::move(o.heap_);
    std::copy(o.inline_, o.inline_ + std::min(o.rank_, kInlineRank), inline_);
    rank_ = o.rank_;
    o.rank_ = 0;
  }

  size_t rank_ = 0;
  int64_t inline_[kInlineRank] = {};
  std::unique_ptr<int64_t[]> heap_;
};

std::optional<int64_t> CheckedNumElements(DimsView dims);  // a std::vector converts

}  // namespace axle
