#include "ir/type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace axle::ir {

std::string TensorType::ToString() const {
  return fmt::format("{}{}", DTypeName(dtype), shape.ToString());
}

std::string Sharding::ToString() const {
  std::vector<std::string> parts;
  for (const auto& axes : dims) parts.push_back(fmt::format("[{}]", fmt::join(axes, ",")));
  if (!partial.empty()) parts.push_back(fmt::format("partial=[{}]", fmt::join(partial, ",")));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

}  // namespace axle::ir
