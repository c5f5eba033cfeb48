// The pieces of the C++ emitter that its files share (emit_cpp.cc: loop kernels and column
// reductions; emit_rows.cc: row reductions and row kernels). Private to src/codegen.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/emit_cpp.h"
#include "codegen/fusion.h"

namespace axle::codegen::internal {

// The C type of a value of dtype t in expressions, and in memory (bool is one byte 0/1).
// A half (bf16, f16) is a float in expressions and its 16 bits in memory (Note [Halves in
// generated kernels], emit_cpp.cc).
const char* CType(DType t);
const char* SType(DType t);
// The stored form of expression value v, and the value of stored element `stored`.
std::string StoreText(DType t, const std::string& v);
std::string LoadText(DType t, const std::string& stored);

// The expression of elementwise node n over the operand expressions `a` (the interpreter's
// numerics; fast f32 functions when options.exact_math is false).
std::string Expr(const ir::Node& n, const std::vector<std::string>& a, const EmitOptions& options);

// How a loop names its flat index i. A kernel whose loop runs over rows of L elements (row r,
// column j: i = r * L + j, 0 <= j < L) has its index arithmetic rewritten in r and j, so a bias
// broadcast along the rows reads in[j] (contiguous: a vector load, not a gather of i % L) and a
// per-row value reads in[r] (one load per row).
struct Index {
  int64_t row = 0;       // L; 0: only the flat i
  std::string r = "r";   // the row and column variables
  std::string j = "j";

  // Coordinate (i / stride) % extent of flat index i (no modulo when `mod` is false).
  std::string Coord(int64_t stride, int64_t extent, bool mod) const;
};

// The loads and operands of one loop body: how an outside value is read at an index (an input
// pointer, or an inlined integer constant) and how a node's operand is spelled (a variable of the
// body, else the input read at i, or at 0 for a scalar).
struct BodyContext {
  const Kernel* kernel = nullptr;
  std::unordered_map<const ir::Value*, int> input_index;
  std::function<bool(const ir::Value*)> member;          // computed in this kernel
  std::function<std::string(const ir::Value*)> operand;  // a member's variable, else Load at i

  explicit BodyContext(const Kernel& k);
  // Every scalar input is read once, before the loop, into s<j>: a load inside the loop that
  // GCC cannot hoist (an output store might alias it, for all it knows) can keep the loop from
  // vectorising (a softmax row kernel's exp loop ran scalar, 3.5x slower).
  std::string ScalarDecls() const;
  std::string Load(const ir::Value* v, const std::string& index) const;
  // A non-member read at the loop index i: a scalar is read at element 0.
  std::string LoadAtIndex(const ir::Value* v) const;
};

// The expression of member node n (not a reduce) at the loop's index.
std::string NodeExpr(const ir::Node& n, const Index& ix, const BodyContext& c, const EmitOptions& options);

// A reduce's accumulation, the interpreter's (kernels_reduce.cc): in double from -0 (sum) or
// -inf / +inf (max / min, with ax_max / ax_min's NaN and signed-zero rules), rounded once at the
// end; an empty sum is +0.
const char* ReduceInit(ir::ReduceKind kind);
std::string ReduceCombine(ir::ReduceKind kind, const std::string& acc, const std::string& v);
std::string ReduceFinish(const ir::Node& reduce, int64_t reduced, const std::string& acc);

// A row reduction or a row kernel (Note [Row kernels]), as the function `name`.
void EmitRowKernel(const Kernel& k, const std::string& name, const EmitOptions& options, std::string& s);

}  // namespace axle::codegen::internal
