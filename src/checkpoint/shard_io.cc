#include "checkpoint/shard_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.h"

namespace axle::checkpoint {
namespace {

std::string OsError(int err) { return std::system_category().message(err); }

}  // namespace

Box DeviceBlock(const std::vector<int64_t>& shape, const std::vector<std::vector<std::string>>& sharding,
                const ir::Mesh& mesh, int64_t device) {
  Box box;
  for (size_t k = 0; k < shape.size(); ++k) {
    const std::vector<std::string> none;
    const auto& axes = k < sharding.size() ? sharding[k] : none;
    const int64_t n = mesh.AxesSize(axes);
    const int64_t block = (shape[k] + n - 1) / n;
    const int64_t i = axes.empty() ? 0 : mesh.ShardIndex(device, axes);
    box.emplace_back(std::min(shape[k], i * block), std::min(shape[k], (i + 1) * block));
  }
  return box;
}

Box Intersect(const Box& a, const Box& b) {
  AXLE_CHECK(a.size() == b.size(), "Intersect: ranks {} and {}", a.size(), b.size());
  Box out;
  for (size_t k = 0; k < a.size(); ++k) {
    const int64_t lo = std::max(a[k].first, b[k].first), hi = std::min(a[k].second, b[k].second);
    if (lo >= hi) return {{0, 0}};  // marks "no overlap" (BoxElements 0), even for rank 0
    out.emplace_back(lo, hi);
  }
  return out;
}

int64_t BoxElements(const Box& b) {
  int64_t n = 1;
  for (const auto& [lo, hi] : b) n *= std::max<int64_t>(0, hi - lo);
  return n;
}

void CopyRegion(std::span<const uint8_t> src, const Box& src_box, std::span<uint8_t> dst, const Box& dst_box,
                const Box& region, int64_t elem) {
  const size_t rank = region.size();
  if (BoxElements(region) == 0) return;
  if (rank == 0) {
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(elem));
    return;
  }
  auto strides = [&](const Box& box) {
    std::vector<int64_t> st(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) st[d] = st[d + 1] * (box[d + 1].second - box[d + 1].first);
    return st;
  };
  const std::vector<int64_t> ss = strides(src_box), ds = strides(dst_box);
  const size_t row = static_cast<size_t>((region[rank - 1].second - region[rank - 1].first) * elem);
  std::vector<int64_t> idx(rank);
  for (size_t d = 0; d < rank; ++d) idx[d] = region[d].first;
  for (;;) {
    int64_t so = 0, dof = 0;
    for (size_t d = 0; d < rank; ++d) {
      so += (idx[d] - src_box[d].first) * ss[d];
      dof += (idx[d] - dst_box[d].first) * ds[d];
    }
    AXLE_CHECK(static_cast<size_t>(so * elem) + row <= src.size() && static_cast<size_t>(dof * elem) + row <= dst.size(),
               "CopyRegion out of bounds");
    std::memcpy(dst.data() + dof * elem, src.data() + so * elem, row);
    size_t d = rank - 1;
    for (; d-- > 0;) {
      if (++idx[d] < region[d].second) break;
      idx[d] = region[d].first;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

std::string Checksum(std::span<const uint8_t> bytes) {
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

DurableFile::DurableFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail("cannot create checkpoint file '{}': {}", path_, OsError(errno));
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::Write(std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot write checkpoint file '{}': {}", path_, OsError(errno));
    done += static_cast<size_t>(n);
  }
}

void DurableFile::Finish() {
  if (::fsync(fd_) != 0) Fail("cannot fsync checkpoint file '{}': {}", path_, OsError(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) Fail("cannot close checkpoint file '{}': {}", path_, OsError(errno));
}

void WriteFileDurably(const std::string& path, std::span<const uint8_t> bytes) {
  DurableFile f(path);
  f.Write(bytes);
  f.Finish();
}

void SyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open directory '{}' to fsync it: {}", path, OsError(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) Fail("cannot fsync directory '{}': {}", path, OsError(err));
}

bool ReadRange(int fd, const std::string& path, int64_t begin, std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(begin + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot read checkpoint file '{}': {}", path, OsError(errno));
    if (n == 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace axle::checkpoint
