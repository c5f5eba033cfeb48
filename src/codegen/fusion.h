// Loop fusion: partitions a function's nodes into kernels (docs/compiler.md).
//
// A fused kernel is a connected set of elementwise ops (every float dtype: f32/f64, and bf16/f16
// computed in f32 and rounded after each op, Note [Halves in generated kernels] in emit_cpp.cc;
// bool, and the integer dtypes i8/i32/i64/u8/u32), plus the broadcast_in_dim, reshape, slice,
// transpose and iota nodes that
// feed them, all over one loop domain (the element count of the group's results). Every node of
// a group is evaluated at the flat output index i of one loop; reshape and count-preserving
// broadcasts are identities on i, a broadcast_in_dim, slice or transpose of a value from outside
// the group reads that value at an index computed from i (the operand of a slice or transpose
// is never in the group), an iota computes its value from i. A producer joins its
// consumers' group when all its users are in that group and it has the group's element count,
// or when its other users all come after the group's last node (multi-output fusion: it is then
// also written out; a user recomputed in two groups is inside either, if the other runs later);
// otherwise it is materialized by a group of its own. A result that no node reads joins a later
// group that reads one of its operands (Note [Results beside their siblings], fusion.cc). A
// broadcast that adds elements is duplicated into every consumer group (each reads the operand at
// a mapped index) and materialized only when a non-fused node or the function's results need it.
//
// Note [Recomputing cheap values]: before multi-output fusion, a value whose users are in exactly
// two fused groups of its element count, and that is computed (through at most kMaxRecompute
// elementwise nodes) from at most one full-size value from outside (broadcasts of smaller values
// do not count), joins both groups: each recomputes it, so it is never written and read back. A
// training step's elementwise chains feed a forward kernel and the backward kernel that needs
// their intermediates: GPT-2's GELU forward wrote 7 tensors its backward read back, and now
// writes only its result and its tanh, the backward recomputing the rest from the pre-activation.
// A transcendental (IsTranscendental: exp, log, tanh, erf, ...) is never recomputed: its vector
// polynomial costs more than writing and reading 4 bytes an element (GPT-2 small's GELU backward
// took 745 us recomputing the tanh, 432 reading it, the forward 387 -> 400 writing it), and the
// walk that decides a recomputation stops at it as at a value from outside. Recomputing repeats
// the same operations in the same order, so results are bitwise those of the materialized value.
//
// Reductions with a fused prologue: a reduce (sum/max/min of any float dtype) whose reduced dims, once
// dims of size 1 are dropped, are the innermost block (a row reduction, the operand viewed as
// [A, R]) or the outermost block (a column reduction, [R, B]) and whose operand is an output of a
// fused group becomes one kernel with that group (the prologue): the loop runs over the reduce's
// outputs, and for each over its R inputs in row-major order, evaluating the prologue at the flat
// operand index and accumulating in double as the interpreter does. The group's other outputs
// (values also needed elsewhere) are written by the same kernel at the operand index. Such a
// reduce with no fusible producer (a parameter, a product's result) is a reduction kernel with an
// empty prologue (`reduce[n]`), which reads its operand directly.
//
// Row kernels (Note [Row kernels], row_fusion.cc): a row reduction over [A, R] and the kernels
// after it that read its result only per row or through a broadcast along the rows (the
// per-row arithmetic of a mean or an rsqrt, the next row reduction over the same rows, the
// elementwise kernel that normalizes) become one kernel that loops over the A rows and, per row,
// runs one loop over the R elements for each reduction and one for the elementwise nodes after
// the last. A layer norm was 5 kernels (3 passes over [A, R]), a softmax 5, and is now one.
//
// Every other node (dot_general, reduce, gather, ...; integer pow, an iota of a half, an integer
// converted to a half) is a kernel of its own that the runtime's per-node executor runs. Parameters and
// constants are not kernels: they only bind buffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.h"

namespace axle::codegen {

struct Kernel {
  bool fused = false;                    // a generated loop; false: one node for the executor
  std::vector<const ir::Node*> nodes;    // in the function's order
  std::vector<const ir::Value*> inputs;  // values read from outside, first use order
  std::vector<const ir::Value*> outputs; // values the kernel materializes
  int64_t num_elements = 0;              // fused: the loop domain (a reduction: its output count)
  // A reduction kernel: the reduce node (last in `nodes`, its result outputs[0]); the others are
  // its prologue. Its operand, `reduced` * num_elements elements, is viewed as [num_elements,
  // reduced] (a row reduction) or, with `column`, as [reduced, num_elements].
  const ir::Node* reduce = nullptr;
  int64_t reduced = 0;
  bool column = false;
  // A row kernel (reduce is null): its row reductions in order, each over [num_elements, reduced];
  // its loop runs over num_elements rows. Its other nodes are elementwise over the rows'
  // num_elements * reduced elements or per row (num_elements elements).
  std::vector<const ir::Node*> reduces;
  // A kernel read from a fusion node (KernelsOf): that node. Then nodes, inputs and outputs are
  // values of the function it calls (inputs = its parameters, outputs = its results), and the
  // values they stand for in the caller are the node's operands and results (OuterInput,
  // OuterOutput).
  const ir::Node* fusion = nullptr;
};

// True for a kernel made by row fusion (Kernel::reduces).
inline bool IsRowKernel(const Kernel& k) { return !k.reduces.empty(); }

// True for nodes a fused kernel can evaluate (op and dtypes).
bool IsFusible(const ir::Node& n);

// slice and transpose: inside a fused kernel they read their operand (always a value from
// outside the group) at an index computed from i.
bool IsIndexMap(const ir::Node& n);

// exp, log, log1p, tanh, logistic, erf, sin, cos, pow, atan2: a vector polynomial of tens of
// instructions an element, never recomputed by a second kernel (Note [Recomputing cheap
// values]) and kept in a row buffer by a row kernel (emit_rows.cc).
bool IsTranscendental(const ir::Node& n);

// The kernels of `f` in a valid execution order (every input is a parameter, a constant or an
// output of an earlier kernel). The fuse pass (fuse_pass.cc) writes them into the IR.
std::vector<Kernel> FuseFunction(const ir::Function& f);

// The kernels of a function the fuse pass has run on, in its order: one per fusion node (read
// from the function it calls) and one per other node except parameters and constants. Throws
// axle::Error naming the fusion when its function is not a kernel of its kind that the emitter can
// write (Note [Fusion in the IR], fuse_pass.cc).
std::vector<Kernel> KernelsOf(const ir::Function& f);
// The caller's value for input / output j of k (k's own for a kernel not read from a fusion).
const ir::Value* OuterInput(const Kernel& k, size_t j);
const ir::Value* OuterOutput(const Kernel& k, size_t j);

// A reduce a reduction kernel can compute: sum/max/min of a float dtype whose reduced dims, with dims
// of size 1 dropped, are the innermost block (a row reduction) or the outermost block (a column
// reduction, *column). Sets the reduced element count.
bool ReductionView(const ir::Node& n, int64_t* reduced, bool* column);

// Whether row kernel k (num_elements rows of `reduced`, its reduces set) is one row fusion can
// make: every node per row or over the rows, per-row values read over the rows only through
// broadcasts along them (Note [Row kernels]).
bool IsValidRowKernel(const Kernel& k);

// The elements one iteration range of the kernel's loop covers: num_elements, or for a reduction
// kernel its operand's element count (the domain the prologue is evaluated over), for a row
// kernel its rows' elements.
int64_t PrologueElements(const Kernel& k);

// True when broadcast_in_dim n reads its operand (A elements) at row i / R of its flat output
// index i (A * R elements): a per-row value broadcast along rows of R.
bool IsRowBroadcast(const ir::Node& n, int64_t A, int64_t R);

// Note [Row kernels]: merges each row reduction kernel of `kernels` (in execution order) with the
// later kernels that can join it; called by FuseFunction.
void FuseRows(const ir::Function& f, std::vector<Kernel>& kernels);

// "3 kernels: fused{add,exp,broadcast_in_dim}[1024], reduce, reduce{mul}[4]" (tests, docs,
// debug); a reduction kernel lists its prologue and its output count.
std::string DescribeKernels(const std::vector<Kernel>& kernels);
// One kernel as DescribeKernels writes it.
std::string DescribeKernel(const Kernel& k);

}  // namespace axle::codegen
