// Internals of random_module.cc shared with the per-op generators of random_module_ops.cc.
// Not part of the testing API: include random_module.h instead.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "testing/random_module.h"

namespace axle::testing::internal {

// splitmix64: a tiny PRNG whose stream is the same everywhere. All draws below are defined in
// terms of Next() with integer arithmetic only, so they are portable too.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next();
  // Uniform in [lo, hi], both inclusive; requires lo <= hi.
  int64_t Uniform(int64_t lo, int64_t hi);
  // True with probability percent / 100.
  bool Percent(int percent) { return Uniform(0, 99) < percent; }
  bool Coin() { return (Next() >> 63) != 0; }
  // A uniformly chosen element of a non-empty vector.
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }
  // Fisher-Yates.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i)
      std::swap(v[i - 1], v[static_cast<size_t>(Uniform(0, static_cast<int64_t>(i) - 1))]);
  }
  // 0, 1, ..., n-1 in random order.
  std::vector<int64_t> Permutation(int64_t n);

 private:
  uint64_t state_;
};

// How element values are drawn: percentages of special values (floats: nan, +-inf, +-0, the
// smallest subnormal, +-the largest finite value; integers: 0, -1, min, max) and of random bit
// patterns; the rest are small (multiples of 1/8 in [-4, 4] for floats, [-8, 8] for integers).
// Every value is exact in its type, so no rounding mode is involved.
struct ElementMix {
  int special_percent = 10;
  int raw_bits_percent = 5;
};
// Fills `lit` with random elements. NaNs are always the canonical quiet NaN (the text format
// prints every NaN as `nan`, so other NaN bit patterns would not survive a round trip).
void FillRandom(ir::Literal& lit, Rng& rng, const ElementMix& mix);

using DTypePred = std::function<bool(DType)>;

// Builds one function's worth of random nodes. The per-op generators (OpGenerator below) use the
// helpers to find or make operands, then call Build.
class Generator {
 public:
  Generator(uint64_t seed, const RandomModuleOptions& options);

  std::unique_ptr<ir::Module> Run();

  // --- Helpers for the op generators ---------------------------------------------------------

  Rng& rng() { return rng_; }
  const RandomModuleOptions& options() const { return options_; }
  // Smallest dim size a new shape may have (0 when zero-sized values are allowed, else 1).
  int64_t MinDim() const { return options_.allow_zero_sized ? 0 : 1; }
  // Largest dim size any value may have.
  int64_t DimLimit() const { return 2 * options_.max_dim; }
  // A dim size for a new shape: in [MinDim(), max_dim], rarely 0.
  int64_t RandomDim();
  // A random shape of rank in [min_rank, max_rank] (requires min_rank <= max_rank).
  Shape RandomShape(int64_t min_rank);
  // A random element type of options().dtypes satisfying `pred`, or nullopt.
  std::optional<DType> PickDType(const DTypePred& pred);

  // A random existing value of the function satisfying `pred`, or nullptr.
  ir::Value* Pick(const std::function<bool(const ir::Value&)>& pred);
  // An operand whose element type satisfies `pred` and whose rank is >= min_rank: usually an
  // existing value, else a new source of a random type. nullptr when no type qualifies.
  ir::Value* Operand(const DTypePred& pred, int64_t min_rank = 0);
  // An operand of exactly `type`: an existing value or a new source.
  ir::Value* OfType(const ir::TensorType& type);
  // A new source node of `type`: a parameter, a constant, or an iota.
  ir::Value* Fresh(const ir::TensorType& type);
  // A new constant of integer type `dtype` and `shape` with elements uniform in [lo, hi].
  ir::Value* IndexConstant(DType dtype, const Shape& shape, int64_t lo, int64_t hi);
  // An integer type for index operands: usually i32 or i64, sometimes i8, u8 or u32.
  DType IndexDType();
  // Random replica groups valid for the module's num_replicas, and their group size.
  std::pair<ir::ReplicaGroups, int64_t> RandomGroups();

  // The function being built.
  ir::Function* function() const { return builder_->function(); }

  // Appends a node with the Builder (which checks the shape rule) and makes its results available
  // as operands of later nodes. Throws axle::Error when the node is invalid or breaks the bounds
  // of the options: both are bugs of the generator.
  std::vector<ir::Value*> Build(ir::OpKind op, std::vector<ir::Value*> operands,
                                ir::Attrs attrs = ir::NoAttrs{},
                                std::vector<ir::TensorType> declared = {});

 private:
  bool Fits(const ir::TensorType& t) const;
  std::vector<ir::OpKind> EnabledOps() const;
  void BuildFunction(ir::Function* f);
  void ChooseResults(ir::Function* f);
  void Annotate();
  ir::Sharding RandomSharding(int64_t rank);

  Rng rng_;
  const RandomModuleOptions& options_;
  std::vector<ir::OpKind> ops_;
  // Per function:
  std::optional<ir::Builder> builder_;
  std::vector<ir::Value*> pool_;
  int64_t num_parameters_ = 0;
};

// A per-op generator: adds one node of `op` (and perhaps sources for its operands) and returns
// true, or returns false when the options leave no valid choice (e.g. no float dtype allowed).
using OpGenerator = bool (*)(Generator& g, ir::OpKind op);
// The generator of `op`, or nullptr when random_module_ops.cc has none.
OpGenerator GetOpGenerator(ir::OpKind op);

// A random name for a value, from a small pool so that names often repeat; never empty.
std::string RandomValueName(Rng& rng);

}  // namespace axle::testing::internal
