// The op-sample table: one list of small, hand-checked (or NumPy-generated) cases per op that
// drives the interpreter's tests (tests/ir/interpreter_test.cc) and every backend's differential
// check, `axle test-ops` (testing/op_check.h; like ggml's test-backend-ops and PyTorch's OpInfo).
//
// A sample is one node: its op, attributes, operand literals (per replica for collectives),
// declared result types (for kDeclaresResult ops) and expected results. Expected values never come
// from the interpreter: they are derived by hand for small cases, or generated once with NumPy by
// scripts/make_op_goldens.py (src/testing/op_goldens.inc) for transcendental and other
// rounding-sensitive float ops.
//
// The table lives in src/testing/op_samples_<family>.cc, one file per op family, in the
// axle_testing library (the `axle` tool runs it too).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/attrs.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "ir/op.h"

namespace axle::ir::samples {

struct OpSample {
  std::string name;  // unique: "<op>.<dtype>.<what>"
  OpKind op = OpKind::kAdd;
  Attrs attrs = NoAttrs{};
  std::vector<std::vector<Literal>> operands;  // [replica][operand]; one replica unless collective
  std::vector<TensorType> declared;            // result types of kDeclaresResult ops
  std::vector<std::vector<Literal>> expected;  // [replica][result]
  // Further functions of the sample's module in .axir text (a fusion's callee).
  std::string functions;
  // Allowed distance in units in the last place of the result dtype; 0 = bitwise (except that any
  // NaN matches any NaN: NaN payloads and signs are unspecified).
  int64_t ulps = 0;

  int64_t num_replicas() const { return static_cast<int64_t>(operands.size()); }
};

// Every sample, in a fixed order. Names are unique.
const std::vector<OpSample>& AllOpSamples();

// A module with one function "main" holding one parameter per operand (replica 0's types, in
// order), the sample's node, and a return of its results; num_replicas is the sample's. A
// `parameter` sample is the parameter node itself. Built with the Builder (shape rules applied);
// the sample's `functions` are parsed into the module first.
std::unique_ptr<Module> BuildSampleModule(const OpSample& sample);

// Registers the custom_call targets the samples use ("sample.scale2": x * 2 for f32 and
// "sample.sum_and_count": sum of an f32 vector and its length as i32) with the interpreter.
void RegisterSampleCustomCalls();

// Empty when `actual` matches `expected` (type, then elements within `ulps`); otherwise a
// description of the first difference.
std::string CompareLiterals(const Literal& actual, const Literal& expected, int64_t ulps);

// ---------------------------------------------------------------------------------------------
// Helpers for writing samples (op_samples_<family>.cc).

inline const std::vector<DType> kAllDTypes = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                                              DType::kI8,  DType::kI32, DType::kI64,  DType::kU8,
                                              DType::kU32, DType::kBool};
inline const std::vector<DType> kNumericDTypes = {DType::kF32, DType::kF64, DType::kBF16,
                                                  DType::kF16, DType::kI8,  DType::kI32,
                                                  DType::kI64, DType::kU8,  DType::kU32};
inline const std::vector<DType> kFloatDTypes = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16};
inline const std::vector<DType> kIntDTypes = {DType::kI8, DType::kI32, DType::kI64, DType::kU8,
                                              DType::kU32};
inline const std::vector<DType> kSignedDTypes = {DType::kF32, DType::kF64, DType::kBF16,
                                                 DType::kF16, DType::kI8,  DType::kI32, DType::kI64};

// Values that must be exact in `dtype` (checked): small integers, halves, inf, NaN.
Literal Lit(DType dtype, Shape shape, const std::vector<double>& values);
// Integers (checked to be in range; wraps are the test's business).
Literal Ints(DType dtype, Shape shape, const std::vector<int64_t>& values);
// Raw bit patterns (bf16/f16 as 16 bits, f32 as 32, ...).
Literal Bits(DType dtype, Shape shape, const std::vector<uint64_t>& bits);
Literal Bools(Shape shape, const std::vector<bool>& values);
// 1, 2, 3, ... converted to `dtype` (count must stay exact); bool: true, false, true, ...
Literal Seq(DType dtype, Shape shape, int64_t first = 1);

// An element of `sources[src]`, flat index `index`; src = -1 with any index means "zero".
struct From {
  int src;
  int64_t index;
};
// A literal of `shape` whose elements are taken from `sources` (all of one dtype).
Literal Pick(Shape shape, const std::vector<const Literal*>& sources, const std::vector<From>& from);
// Pick from one source: each entry is a flat index of `source`.
Literal Pick(Shape shape, const Literal& source, const std::vector<int64_t>& indices);

// A single-replica sample; `declared` is taken from the expected results for kDeclaresResult ops.
OpSample Sample(std::string name, OpKind op, Attrs attrs, std::vector<Literal> operands,
                std::vector<Literal> expected, int64_t ulps = 0);
// A collective sample: operands[r] and expected[r] for each replica r.
OpSample ReplicaSample(std::string name, OpKind op, Attrs attrs,
                       std::vector<std::vector<Literal>> operands,
                       std::vector<std::vector<Literal>> expected);

// "f32", ... for names.
std::string Name(DType t);

// Per-family lists (each appends to `out`).
void AddElementwiseSamples(std::vector<OpSample>& out);
void AddConvertSamples(std::vector<OpSample>& out);
void AddGoldenSamples(std::vector<OpSample>& out);
void AddMovementSamples(std::vector<OpSample>& out);
void AddReduceSamples(std::vector<OpSample>& out);
void AddMiscSamples(std::vector<OpSample>& out);

}  // namespace axle::ir::samples
