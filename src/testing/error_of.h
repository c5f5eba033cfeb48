// The tests' way to look at an error: the message of the axle::Error a call throws.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace axle::testing {

// The message of the axle::Error `f` throws, or "(no error)" (which no expectation matches).
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace axle::testing
