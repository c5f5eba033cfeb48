// C++ source for fused kernels (docs/compiler.md).
//
// Each fused Kernel becomes
//   extern "C" void kN(const void* const* in, void* const* out, int64_t begin, int64_t end)
// with one flat loop over [begin, end) of the kernel's domain whose body evaluates the group per
// element: in[j] points at kernel.inputs[j]'s elements, out[j] at kernel.outputs[j]'s. Scalars
// are read at element 0 (integer scalar constants are inlined as literals); a broadcast, slice or
// transpose of an outside value reads it at an index computed from i with constant strides and
// offsets baked in; iota computes its value from i. Integer ops wrap and follow the
// interpreter's division-by-zero, MIN / -1 and saturating float -> int rules. The numerics are the interpreter's, operation by operation:
// f32 in float, f64 in double, transcendental functions from <cmath> (std::exp(float) etc., the
// same C library calls), the max/min NaN and signed-zero rule, f64 -> f32 rounding once. The
// translation unit includes only <cmath> and <cstdint>, and must be compiled with
// -ffp-contract=off (no fused multiply-add: the interpreter rounds every operation).
//
// With EmitOptions::exact_math = false, f32 exp, log, log1p, tanh, logistic and erf are instead
// branch-free polynomial approximations from the generated prelude (ax_fexp, ...) that GCC
// vectorises; their accuracy in ulp is in docs/compiler.md. f32 sin and cos in a loop kernel are
// ax_fsin / ax_fcos with a check of the argument: the elements with |x| > 2e8 or NaN are
// recomputed with the C library's (Note [Checked sin and cos] in emit_cpp.cc); in a reduction's
// prologue they stay the library's (fast_trig: unchecked fast ones everywhere). f64 keeps the
// <cmath> functions.
//
// A reduction kernel (Kernel::reduce) has the same signature, but [begin, end) ranges over the
// reduce's outputs: a row reduction loops, per output o, over its R operand elements i = o R + r
// in strips of 256 (the strip's prologue into a local buffer, a loop that vectorises, then the
// buffer accumulated in order); a column reduction keeps a block of double accumulators and, for
// r in [0, R), adds element i = r B + b to accumulator b (so each output still sees its inputs in
// row order). The prologue is evaluated at i (extra outputs stored there); out[0] is the
// reduce's result, accumulated in double exactly as the interpreter's reduce (one accumulator per
// output, no reassociation), so results are bitwise equal to it in exact mode. A row kernel
// (Kernel::reduces, emit_rows.cc) ranges over rows: per row, one loop over its elements per level
// of reductions and one for what follows, each the same operations as the kernels it replaces.
// Every kernel reads its scalar inputs once, before its loop.
//
// Aliasing contract: kernel pointers are not __restrict; the loop carries `#pragma GCC ivdep`
// and each iteration reads every input element it needs before storing any output. So
// out[j] may equal in[k] when input k is read only at index i (not through a broadcast or as a
// scalar) -- InputsReadAtIndex says which inputs those are. Outputs never overlap each other,
// and no output may overlap an input at any other offset.
#pragma once

#include <string>
#include <vector>

#include "codegen/fusion.h"

namespace axle::codegen {

struct EmittedModule {
  std::string source;
  std::vector<std::string> symbols;  // per kernel: its function name, "" for non-fused kernels
  // Per kernel, per input: InputsReadAtIndex (all false for non-fused kernels).
  std::vector<std::vector<bool>> inputs_read_at_index;
  // Per kernel: ColumnRowBlocks (1 for every kernel but the column sums it splits by rows).
  std::vector<int64_t> row_blocks;
};

struct EmitOptions {
  // true: transcendental functions are the C library's (bitwise equal to the interpreter);
  // false: f32 exp/log/log1p/tanh/logistic/erf/sin/cos as vectorisable approximations
  // (docs/compiler.md).
  bool exact_math = true;
  // With exact_math = false: f32 sin/cos as the vectorisable ax_fsin/ax_fcos everywhere, with no
  // check of the argument. Off by default (the compiled backend leaves it off): they are accurate
  // (0.5 ulp) only for |x| <= ~2.1e8, and beyond that return a value in [-1, 1] with no accuracy
  // (no Payne-Hanek reduction yet). Off, loop kernels still use them where |x| <= 2e8 and the
  // C library's elsewhere (Note [Checked sin and cos]); tests and benchmarks turn it on.
  bool fast_trig = false;
};

// One translation unit holding every fused kernel of `kernels`; kernel i is named "k<i>".
// Per input of a fused kernel: true when every read of it inside the loop is at the flat index i
// (not through a broadcast_in_dim, slice or transpose's computed index, not as a scalar at element 0 when
// num_elements != 1). Such an input's buffer may be reused as an output of the same kernel.
// All false for a non-fused kernel and for a reduction kernel (it reads at the operand index).
std::vector<bool> InputsReadAtIndex(const Kernel& k);

// Per input of a fused loop or row kernel: whether the loop reads it only in order, at its own
// flat index (element i, or element o * reduced + r of row o, or per row at o), so that loop
// elements (rows) [b, e) read only the matching range of it. Note [Batch-sliced chains]
// (backends/cpu/chains.cc) runs such kernels by slices next to the products that write their inputs.
std::vector<bool> InputsReadInOrder(const Kernel& k);

// Note [Column sums by blocks of rows]: a column reduction [R, B] reads every row of its columns.
// Split by columns over two threads, each thread reads half of every row, and half rows stream
// badly: a harness on the Zen 4 host of session 26 ran GPT-2's GELU backward with its bias
// gradient (1024 x 512, 4 input streams) whole in 0.16 ms hot and 0.35 cold, and its two column
// halves one after the other in 0.21 hot and 0.79 cold. In fast math an f32 column sum is cut
// instead into ColumnRowBlocks = clamp(R / kRowsPerBlock, 1, kMaxRowBlocks) blocks of whole rows,
// each summed in double into its own partials, which are then added in block order (reassociated, as fast
// math's row sums are; the blocks depend only on R, so the bits do not depend on threads or
// chunks). Exact math, other kinds (max, min) and dtypes keep one sum per column in row order.
// GPT-2 small (512 rows): that kernel 0.31 -> 0.075 ms a call (AXLE_PROFILE, 300 steps), the step
// 10.4-11.3 -> 10.0-10.7 ms in 8 alternated pairs of 300-step runs; its losses kept their bits.
inline constexpr int64_t kRowsPerBlock = 64;
inline constexpr int64_t kMaxRowBlocks = 8;
int64_t ColumnRowBlocks(const Kernel& k, const EmitOptions& options);

// The documented error bound, in ulp of the correctly rounded f32 result, of fast math's
// approximation of `op` (docs/compiler.md's table, measured by tests/codegen/fast_math_test.cc;
// `axle test-ops` widens the compiled backend's tolerances by it); 0 for an op fast math computes
// as exact math does.
double FastMathUlpBound(ir::OpKind op);

EmittedModule EmitCpp(const std::vector<Kernel>& kernels, const EmitOptions& options = {});

}  // namespace axle::codegen
