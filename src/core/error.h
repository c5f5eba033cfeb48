// The one error type of Axle.
//
// Errors are for people: the message names the op, the shapes, the file and line, and what to do.
// Library code throws axle::Error; the CLI and the tests catch it. A SourceLoc points at the
// offending spot of an .axir file or of the user's C++ call.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace axle {

struct SourceLoc {
  std::string file;  // may be empty ("<string>" is used when printing)
  int line = 0;      // 1-based; 0 = unknown
  int col = 0;       // 1-based; 0 = unknown

  bool known() const { return line > 0; }
  // "file:line:col" (or "file:line" without a column).
  std::string ToString() const;
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {}
  Error(SourceLoc loc, std::string message);

  // The message without the location prefix.
  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

// Throws axle::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
[[noreturn]] void FailAt(const SourceLoc& loc, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(loc, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace axle

// Internal invariant check: a failure is a bug in Axle, not in the user's input.
#define AXLE_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond))                                                                     \
      ::axle::Fail("internal error at {}:{}: check '{}' failed. {}", __FILE__, __LINE__, \
                   #cond, ::fmt::format(__VA_ARGS__));                               \
  } while (0)
