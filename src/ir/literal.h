// A dense host tensor: a TensorType plus its row-major bytes.
//
// Literals are the values of `constant` nodes and the inputs and outputs of the reference
// interpreter. bf16 and f16 elements are stored as their 16-bit patterns, bool as one byte (0/1).
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/type.h"

namespace axle::ir {

// Literal storage: 64-byte aligned (whole cache lines, aligned vector loads in generated code),
// and resize() leaves bytes uninitialized (Literal zero-fills explicitly unless asked not to).
//
// Note [Aligning by hand]: the 64-byte alignment comes from malloc(n + 64), with the block's
// address stored just below the aligned one, not from aligned operator new. glibc's memalign
// splits and frees the block's edges, and a training step's pattern of large aligned
// allocations then walked up the heap: each step's buffers landed on fresh pages (a test that
// allocates 64 + 32 MB and frees them, four times, faulted 16K pages in every round, the heap
// growing by 64 MB a round) instead of reusing the last step's (CpuMemoryTest in
// tests/backends/cpu/backend_test.cc; Note [Keeping freed memory] in backends/cpu/executor.cc).
namespace detail {
void* AllocateAligned64(size_t bytes);
void FreeAligned64(void* p) noexcept;
}  // namespace detail

// A literal's bytes: its own 64-byte aligned block, or (Note [Literals over an arena]) a range of
// memory it borrows. Copies always own theirs.
class LiteralBytes {
 public:
  LiteralBytes() = default;
  LiteralBytes(const LiteralBytes& o) { CopyFrom(o); }
  LiteralBytes(LiteralBytes&& o) noexcept { Take(o); }
  LiteralBytes& operator=(const LiteralBytes& o) {
    if (this != &o) {
      Reset();
      CopyFrom(o);
    }
    return *this;
  }
  LiteralBytes& operator=(LiteralBytes&& o) noexcept {
    if (this != &o) {
      Reset();
      Take(o);
    }
    return *this;
  }
  ~LiteralBytes() { Reset(); }

  // `n` uninitialized bytes of its own.
  void Allocate(size_t n) {
    Reset();
    if (n == 0) return;
    data_ = static_cast<uint8_t*>(detail::AllocateAligned64(n));
    size_ = n;
    owned_ = true;
  }
  // `n` bytes at `p`, which outlive this (and every literal that borrows them).
  void Borrow(uint8_t* p, size_t n) {
    Reset();
    data_ = n == 0 ? nullptr : p;
    size_ = n;
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool borrowed() const { return size_ > 0 && !owned_; }
  bool operator==(const LiteralBytes& o) const {
    return size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0);
  }

 private:
  void Reset() noexcept {
    if (owned_) detail::FreeAligned64(data_);
    data_ = nullptr;
    size_ = 0;
    owned_ = false;
  }
  void CopyFrom(const LiteralBytes& o) {
    Allocate(o.size_);
    if (size_ > 0) std::memcpy(data_, o.data_, size_);
  }
  void Take(LiteralBytes& o) noexcept {
    data_ = o.data_;
    size_ = o.size_;
    owned_ = o.owned_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.owned_ = false;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
};

class Literal {
 public:
  // A zero f32 scalar.
  Literal() : Literal(TensorType(DType::kF32, Shape{})) {}
  // A zero-filled literal of `type`. Throws axle::Error when the type's shape is invalid.
  explicit Literal(TensorType type);
  // A literal of `type` whose bytes are not initialized: for kernel outputs that write every
  // element (the executors' allocations).
  static Literal Uninitialized(TensorType type);
  // Note [Literals over an arena]: a literal of `type` whose elements are the type's byte size at
  // `data` (64-byte aligned), which it does not own: the memory must outlive it and every use.
  // Copying it copies the elements into storage of the copy's own.
  static Literal Borrowing(TensorType type, uint8_t* data);
  bool borrows() const { return bytes_.borrowed(); }

  // Makes a literal from host values of the storage type (uint16_t for bf16/f16).
  template <typename T>
  static Literal FromVector(DType dtype, Shape shape, const std::vector<T>& values) {
    Literal lit(TensorType(dtype, std::move(shape)));
    AXLE_CHECK(static_cast<int64_t>(values.size()) == lit.NumElements() &&
                   sizeof(T) == static_cast<size_t>(DTypeSize(dtype)),
               "FromVector: {} values of size {} for {}", values.size(), sizeof(T),
               lit.type().ToString());
    if (!values.empty()) std::memcpy(lit.bytes_.data(), values.data(), lit.bytes_.size());
    return lit;
  }
  // A literal from doubles, each converted to `dtype` as `convert` would.
  static Literal FromDoubles(DType dtype, Shape shape, const std::vector<double>& values);
  // A literal of `type` with every element equal to `value` (converted as `convert` would).
  static Literal Splat(TensorType type, double value);

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t NumElements() const { return type_.NumElements(); }

  // Raw element storage.
  std::span<const uint8_t> bytes() const { return {bytes_.data(), bytes_.size()}; }
  std::span<uint8_t> mutable_bytes() { return {bytes_.data(), bytes_.size()}; }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  template <typename T>
  T* mutable_data() { return reinterpret_cast<T*>(bytes_.data()); }

  // Reinterprets the storage as `type`, which must have the same byte size (the executors
  // recycle a dead buffer for a result of another shape or dtype; the contents are unspecified).
  void Retype(TensorType type) {
    AXLE_CHECK(type.ByteSize() == type_.ByteSize(), "Retype: {} as {}", type_.ToString(), type.ToString());
    type_ = std::move(type);
  }

  // Element i (flat, row-major) as a double; bf16/f16 are widened exactly, i64/u32 may round.
  double GetDouble(int64_t i) const;
  // Element i as an int64 (floats truncate toward zero; out of range saturates, NaN -> 0).
  int64_t GetInt64(int64_t i) const;
  // Stores `v` into element i, converting as `convert` does (rounding to nearest even for
  // floats, truncating and saturating for integers, nonzero -> true for bool).
  void SetDouble(int64_t i, double v);
  void SetInt64(int64_t i, int64_t v);

  // True when every element has the same bit pattern as element 0 (false when empty).
  bool IsSplat() const;

  // Bitwise equality of type and contents.
  bool operator==(const Literal& other) const {
    return type_ == other.type_ && bytes_ == other.bytes_;
  }
  // "f32[2] [1, 2]": for debugging and test failure messages (long literals are elided).
  std::string ToString(int64_t max_elements = 16) const;

 private:
  struct NoInit {};
  Literal(TensorType type, NoInit);

  TensorType type_;
  LiteralBytes bytes_;
};

// The storage bits of element i, zero-extended (e.g. 0x3f80 for a bf16 1.0), and the inverse.
uint64_t ElementBits(const Literal& lit, int64_t i);
void SetElementBits(Literal& lit, int64_t i, uint64_t bits);

// Element formatting shared by the printer and Literal::ToString: the shortest text that parses
// back to the same bits ("1", "0.5", "-0", "nan", "inf", "true"; a NaN other than the default
// quiet NaN prints its storage bits: "nan.0xffc00000").
std::string FormatElement(const Literal& lit, int64_t i);

}  // namespace axle::ir
