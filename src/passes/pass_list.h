// Factories of the registered passes (internal to src/passes; pass_registry.cc lists them).
#pragma once

#include <memory>

#include "passes/pass.h"

namespace axle::passes {

std::unique_ptr<Pass> MakeVerifyPass();
std::unique_ptr<Pass> MakeCanonicalizePass();

}  // namespace axle::passes
