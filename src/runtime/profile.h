// AXLE_PROFILE=1: wall time of every kernel the cpu and compiled backends run, summed per label
// ("dot_general f32[256,768] x f32[768,3072]", "fused{sub,mul,exp}[786432]"), printed to stderr
// at exit as a table of the top kernels (calls, total ms, share, GB/s of the bytes they touch, ms
// of the calls that ran on one thread).
// The executors label their steps at compile time only when the flag is on; off, a step costs
// one branch.
#pragma once

#include <cstdint>
#include <string>

#include "ir/module.h"

namespace axle::runtime::profile {

bool Enabled();

// Adds one call of `label` taking `seconds` and touching `bytes` (operands + results); `parallel`:
// it split work over the thread pool (the report shows the time of the calls that ran on one
// thread, while the pool's other threads waited). Thread safe.
void Record(const std::string& label, double seconds, int64_t bytes, bool parallel = true);

// The table (the `top` labels by total time) and the total; empty when nothing was recorded.
std::string Report(int top = 30);

// "dot_general f32[256,768], f32[768,3072] -> f32[256,3072]".
std::string NodeLabel(const ir::Node& n);

// Forgets everything recorded (tests).
void Reset();

}  // namespace axle::runtime::profile
