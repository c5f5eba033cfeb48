// Small hand-built models shared by the backend tests.
#pragma once
#include <cstdint>
#include <memory>

#include "ir/module.h"

namespace axle::testing {

// A two-layer MLP's loss, parameters x [b, i], w1 [i, h], b1 [h], w2 [h, o], b2 [o],
// target [b, o] (f32): loss = sum((tanh(x w1 + b1) w2 + b2 - target)^2) / b.
std::unique_ptr<ir::Module> MlpLossModule(int64_t b, int64_t i, int64_t h, int64_t o);

}  // namespace axle::testing
