// AXLE_PROFILE=1: wall time of every kernel the cpu and compiled backends run, summed per label
// ("dot_general f32[256,768] x f32[768,3072]", "fused{sub,mul,exp}[786432]"), printed to stderr
// at exit as a table of the top kernels (calls, total ms, share, GB/s of the bytes they touch).
// The executors label their steps at compile time only when the flag is on; off, a step costs
// one branch.
#pragma once

#include <cstdint>
#include <string>

#include "ir/module.h"

namespace axle::runtime::profile {

bool Enabled();

// Adds one call of `label` taking `seconds` and touching `bytes` (operands + results). Thread safe.
void Record(const std::string& label, double seconds, int64_t bytes);

// The table (the `top` labels by total time) and the total; empty when nothing was recorded.
std::string Report(int top = 30);

// "dot_general f32[256,768], f32[768,3072] -> f32[256,3072]".
std::string NodeLabel(const ir::Node& n);

// Forgets everything recorded (tests).
void Reset();

}  // namespace axle::runtime::profile
