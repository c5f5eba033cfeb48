#include "core/error.h"

namespace axle {

std::string SourceLoc::ToString() const {
  const std::string& f = file.empty() ? std::string("<string>") : file;
  if (col > 0) return fmt::format("{}:{}:{}", f, line, col);
  return fmt::format("{}:{}", f, line);
}

Error::Error(SourceLoc loc, std::string message)
    : std::runtime_error(loc.known() ? loc.ToString() + ": error: " + message : message),
      loc_(std::move(loc)),
      message_(std::move(message)) {}

}  // namespace axle
