#include "core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "core/error.h"

namespace axle {
namespace {

// Removes `tmp` and throws the error of a failed step.
[[noreturn]] void FailWrite(std::string_view what, const std::string& path, const std::string& tmp,
                            std::string_view step, int err) {
  ::unlink(tmp.c_str());
  Fail("cannot write {} '{}': {} '{}' failed: {}", what, path, step, tmp, std::system_category().message(err));
}

}  // namespace

void WriteFileAtomically(const std::string& path, std::string_view bytes, std::string_view what) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) FailWrite(what, path, tmp, "creating", errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      FailWrite(what, path, tmp, "writing", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    FailWrite(what, path, tmp, "syncing", err);
  }
  if (::close(fd) != 0) FailWrite(what, path, tmp, "closing", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) FailWrite(what, path, tmp, "renaming", errno);
}

}  // namespace axle
