// Numeric flag checks with plain-sentence errors (commands.h).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "tools/commands.h"

namespace axle::tools {
namespace {

// The number `text` spells (all of it), or NaN when it spells none.
double Number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' ? v : std::nan("");
}

}  // namespace

const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      const double v = Number(text);
      if (std::isnan(v)) return text + " is not a number";
      return v > 0 ? "" : text + " is not a positive number (it must be greater than 0)";
    },
    "POSITIVE");

const CLI::Validator kNonNegative(
    [](std::string& text) -> std::string {
      const double v = Number(text);
      if (std::isnan(v)) return text + " is not a number";
      return v >= 0 ? "" : text + " is negative (it must be 0 or more)";
    },
    "NONNEGATIVE");

CLI::Validator InRange(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const double v = Number(text);
        if (std::isnan(v)) return text + " is not a number";
        return v >= lo && v <= hi ? "" : fmt::format("{} is outside [{}, {}]", text, lo, hi);
      },
      fmt::format("[{}, {}]", lo, hi));
}

}  // namespace axle::tools
