// C++ source for fused kernels (docs/compiler.md).
//
// Each fused Kernel becomes
//   extern "C" void kN(const void* const* in, void* const* out, int64_t begin, int64_t end)
// with one flat loop over [begin, end) of the kernel's domain whose body evaluates the group per
// element: in[j] points at kernel.inputs[j]'s elements, out[j] at kernel.outputs[j]'s. Scalars
// are read at element 0; a broadcast of an outside value reads it at an index computed from i
// with constant strides baked in. The numerics are the interpreter's, operation by operation:
// f32 in float, f64 in double, transcendental functions from <cmath> (std::exp(float) etc., the
// same C library calls), the max/min NaN and signed-zero rule, f64 -> f32 rounding once. The
// translation unit includes only <cmath> and <cstdint>, and must be compiled with
// -ffp-contract=off (no fused multiply-add: the interpreter rounds every operation).
#pragma once

#include <string>
#include <vector>

#include "codegen/fusion.h"

namespace axle::codegen {

struct EmittedModule {
  std::string source;
  std::vector<std::string> symbols;  // per kernel: its function name, "" for non-fused kernels
};

struct EmitOptions {
  // true: transcendental functions are the C library's (bitwise equal to the interpreter);
  // false: vectorisable approximations (TODO: not implemented yet; both emit the same code).
  bool exact_math = true;
};

// One translation unit holding every fused kernel of `kernels`; kernel i is named "k<i>".
EmittedModule EmitCpp(const std::vector<Kernel>& kernels, const EmitOptions& options = {});

}  // namespace axle::codegen
