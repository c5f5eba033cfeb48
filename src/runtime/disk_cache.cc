#include "runtime/disk_cache.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "core/flags.h"

namespace axle::runtime {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'A', 'X', 'L', 'E', 'C', 'A', 'C', 'H'};
constexpr uint32_t kFormatVersion = 1;
// magic[8] version:u32 key_len:u32 payload_size:u64 checksum:u64, then the key, then the payload.
constexpr size_t kHeaderSize = 32;
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kTempExtension = ".axc.tmp";

std::string Hex(uint64_t v, int digits = 16) {
  static const char* d = "0123456789abcdef";
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = d[v & 15];
  return s;
}

bool IsSafeName(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          c == '_' || c == '-'))
      return false;
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool IsEntryName(std::string_view name) {
  return EndsWith(name, DiskCache::kExtension) && name.substr(0, 5) != kTempPrefix;
}
bool IsTempName(std::string_view name) {
  return name.substr(0, 5) == kTempPrefix && EndsWith(name, kTempExtension);
}

template <typename T>
void Store(std::string& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <typename T>
T Load(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads the whole file behind `fd`; false on an I/O error.
bool ReadAll(int fd, std::string& out) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;  // shrank under us: whatever we have is checked below
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return true;
}

std::string TempName() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^
           std::hash<std::thread::id>{}(std::this_thread::get_id());
  }());
  return std::string(kTempPrefix) + std::to_string(::getpid()) + "-" +
         Hex(std::hash<std::thread::id>{}(std::this_thread::get_id()), 8) + "-" + Hex(rng()) +
         kTempExtension;
}

// The GNU build id of the main program, "" when it has none.
std::string MainProgramBuildId() {
  std::string id;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* out = static_cast<std::string*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const size_t align = ph.p_align == 8 ? 8 : 4;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p, sizeof nh);
            const char* name = p + sizeof nh;
            const char* desc = name + ((nh.n_namesz + align - 1) & ~(align - 1));
            const char* next = desc + ((nh.n_descsz + align - 1) & ~(align - 1));
            if (next > end) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
              for (uint32_t b = 0; b < nh.n_descsz; ++b)
                *out += Hex(static_cast<unsigned char>(desc[b]), 2);
              return 1;
            }
            p = next;
          }
        }
        return 1;  // the first object is the main program; stop there
      },
      &id);
  return id;
}

std::string BuildDescription() {
  std::string d = "axle-cache-format=" + std::to_string(kFormatVersion);
  std::string id = MainProgramBuildId();
  if (!id.empty()) {
    d += ";build-id=" + id;
  } else {
    struct stat st;
    if (::stat("/proc/self/exe", &st) == 0)
      d += ";exe=" + std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
    d += std::string(";built=") + __DATE__ + " " + __TIME__;
  }
#ifdef __VERSION__
  d += std::string(";cc=") + __VERSION__;
#endif
  d += ";ptr=" + std::to_string(sizeof(void*));
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  d += ";isa=x86";
  if (__builtin_cpu_supports("avx2")) d += ",avx2";
  if (__builtin_cpu_supports("avx512f")) d += ",avx512f";
  if (__builtin_cpu_supports("fma")) d += ",fma";
#elif defined(__aarch64__)
  d += ";isa=aarch64";
#else
  d += ";isa=other";
#endif
  return d;
}

}  // namespace

uint64_t Fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

DiskCache::DiskCache(std::string dir, int64_t max_bytes, bool enabled)
    : dir_(std::move(dir)), max_bytes_(max_bytes), enabled_(enabled) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

DiskCache& DiskCache::Default() {
  static DiskCache* cache =
      new DiskCache(flags::cache_dir(), flags::cache_max_bytes(), flags::cache());
  return *cache;
}

std::string DiskCache::FingerprintSource() {
  static const std::string source = BuildDescription();
  return source;
}

std::string DiskCache::Fingerprint() {
  static const std::string fp = Hex(Fnv1a64(FingerprintSource()));
  return fp;
}

std::string DiskCache::MakeKey(std::string_view module_hash) {
  std::string m = IsSafeName(module_hash, 64) ? std::string(module_hash)
                                              : Hex(Fnv1a64(module_hash)) +
                                                    Hex(Fnv1a64(module_hash, 0x84222325cbf29ce4ull));
  return m + "-" + Fingerprint();
}

std::string DiskCache::PathFor(std::string_view key) const {
  // A safe key is its own file name; any other key is named by a 128-bit hash ("x." cannot
  // start a safe key, so the two kinds never collide). The header's key settles the rest.
  std::string name = IsSafeName(key, 200)
                         ? std::string(key)
                         : "x." + Hex(Fnv1a64(key)) + Hex(Fnv1a64(key, 0x84222325cbf29ce4ull));
  return dir_ + "/" + name + kExtension;
}

void DiskCache::Corrupt(const std::string& path, int fd, const std::string& reason) {
  corrupt_++;
  misses_++;
  // Remove the file only if it is still the one we read (a writer may have renamed a good entry
  // over it meanwhile).
  struct stat mine, now;
  bool same = ::fstat(fd, &mine) == 0 && ::stat(path.c_str(), &now) == 0 &&
              mine.st_dev == now.st_dev && mine.st_ino == now.st_ino;
  bool removed = same && ::unlink(path.c_str()) == 0;
  std::fprintf(stderr, "axle: warning: disk cache: corrupt entry '%s' (%s); treated as a miss%s\n",
               path.c_str(), reason.c_str(), removed ? " and removed" : "");
}

std::optional<std::string> DiskCache::Get(std::string_view key) {
  if (!enabled_) {
    misses_++;
    return std::nullopt;
  }
  const std::string path = PathFor(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    misses_++;
    return std::nullopt;
  }
  std::string data;
  std::string reason;
  if (!ReadAll(fd, data)) {
    reason = std::string("read error: ") + std::strerror(errno);
  } else if (data.size() < kHeaderSize) {
    reason = "truncated header: " + std::to_string(data.size()) + " bytes";
  } else if (std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    reason = "bad magic";
  } else if (uint32_t v = Load<uint32_t>(data, 8); v != kFormatVersion) {
    reason = "format version " + std::to_string(v) + ", expected " + std::to_string(kFormatVersion);
  } else {
    const uint64_t key_len = Load<uint32_t>(data, 12);
    const uint64_t size = Load<uint64_t>(data, 16);
    const uint64_t sum = Load<uint64_t>(data, 24);
    if (key_len > data.size() - kHeaderSize) {
      reason = "truncated key";
    } else if (std::string_view(data).substr(kHeaderSize, key_len) != key) {
      reason = "key mismatch";
    } else if (size != data.size() - kHeaderSize - key_len) {
      reason = "payload size " + std::to_string(data.size() - kHeaderSize - key_len) +
               ", header says " + std::to_string(size);
    } else {
      std::string payload = data.substr(kHeaderSize + key_len);
      if (Fnv1a64(payload) != sum) {
        reason = "checksum mismatch";
      } else {
        ::futimens(fd, nullptr);  // the LRU clock; best effort
        ::close(fd);
        hits_++;
        return payload;
      }
    }
  }
  Corrupt(path, fd, reason);
  ::close(fd);
  return std::nullopt;
}

void DiskCache::WarnPutFailure(const std::string& what, int err) {
  if (put_warned_.exchange(true)) return;
  std::fprintf(stderr,
               "axle: warning: disk cache: %s: %s; compiled artifacts will not be cached "
               "(further failures are not reported)\n",
               what.c_str(), std::strerror(err));
}

void DiskCache::Put(std::string_view key, std::string_view blob) {
  if (!enabled_) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return WarnPutFailure("cannot create directory '" + dir_ + "'", ec.value());

  std::string header(kHeaderSize, '\0');
  std::memcpy(header.data(), kMagic, sizeof kMagic);
  Store<uint32_t>(header, 8, kFormatVersion);
  Store<uint32_t>(header, 12, static_cast<uint32_t>(key.size()));
  Store<uint64_t>(header, 16, blob.size());
  Store<uint64_t>(header, 24, Fnv1a64(blob));
  header += key;

  const std::string tmp = dir_ + "/" + TempName();
  const std::string path = PathFor(key);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return WarnPutFailure("cannot create '" + tmp + "'", errno);
  if (!WriteAll(fd, header) || !WriteAll(fd, blob) || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return WarnPutFailure("cannot write '" + tmp + "'", err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return WarnPutFailure("cannot write '" + tmp + "'", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return WarnPutFailure("cannot rename '" + tmp + "' to '" + path + "'", err);
  }
  if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // makes the rename durable; best effort
    ::close(dfd);
  }
  puts_++;
  EvictIfNeeded();
}

namespace {
struct FileInfo {
  std::string path;
  int64_t bytes;
  fs::file_time_type mtime;
};
std::vector<FileInfo> ScanEntries(const std::string& dir) {
  std::vector<FileInfo> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsEntryName(name)) continue;
    std::error_code e1, e2, e3;
    if (!it->is_regular_file(e1) || e1) continue;
    auto size = it->file_size(e2);
    auto mtime = fs::last_write_time(it->path(), e3);
    if (e2 || e3) continue;  // removed meanwhile
    out.push_back({it->path().string(), static_cast<int64_t>(size), mtime});
  }
  return out;
}
// Removes the temporaries (crashed writers' leftovers) last written more than `age` ago.
void RemoveStaleTemporaries(const std::string& dir, std::chrono::seconds age) {
  const auto cutoff = fs::file_time_type::clock::now() - age;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e1, e2;
    if (!IsTempName(it->path().filename().string()) || !it->is_regular_file(e1) || e1) continue;
    auto mtime = fs::last_write_time(it->path(), e2);
    if (!e2 && mtime < cutoff) doomed.push_back(it->path());
  }
  for (const fs::path& p : doomed) ::unlink(p.c_str());
}

}  // namespace

void DiskCache::EvictIfNeeded() {
  if (max_bytes_ <= 0) return;  // no cap
  std::vector<FileInfo> files = ScanEntries(dir_);
  int64_t total = 0;
  for (const FileInfo& f : files) total += f.bytes;
  if (total <= max_bytes_) return;
  RemoveStaleTemporaries(dir_, std::chrono::hours(1));
  const int64_t target = max_bytes_ / 10 * 9;
  std::sort(files.begin(), files.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.mtime < b.mtime; });
  for (const FileInfo& f : files) {
    if (total <= target) break;
    // Another process may have evicted it already: it is gone either way.
    if (::unlink(f.path.c_str()) == 0) evictions_++;
    total -= f.bytes;
  }
}

DiskCache::Stats DiskCache::stats() const {
  Stats s;
  s.hits = hits_;
  s.misses = misses_;
  s.corrupt = corrupt_;
  s.puts = puts_;
  s.evictions = evictions_;
  return s;
}

DiskCache::Stats DiskCache::ScanDirectory() const {
  Stats s = stats();
  for (const FileInfo& f : ScanEntries(dir_)) {
    s.entries++;
    s.bytes += f.bytes;
  }
  return s;
}

std::vector<DiskCache::Entry> DiskCache::List() const {
  std::vector<Entry> out;
  for (const FileInfo& f : ScanEntries(dir_)) {
    Entry e;
    e.file = f.path;
    e.bytes = f.bytes;
    struct stat st;
    if (::stat(f.path.c_str(), &st) == 0) e.last_use = st.st_mtime;
    int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::string head(kHeaderSize, '\0');
      if (::pread(fd, head.data(), kHeaderSize, 0) == static_cast<ssize_t>(kHeaderSize) &&
          std::memcmp(head.data(), kMagic, sizeof kMagic) == 0) {
        uint32_t key_len = Load<uint32_t>(head, 12);
        if (key_len <= 4096) {
          std::string key(key_len, '\0');
          if (::pread(fd, key.data(), key_len, kHeaderSize) == static_cast<ssize_t>(key_len))
            e.key = std::move(key);
        }
      }
      ::close(fd);
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.last_use != b.last_use ? a.last_use > b.last_use : a.file < b.file;
  });
  return out;
}

int64_t DiskCache::Clear() {
  int64_t removed = 0;
  for (const FileInfo& f : ScanEntries(dir_))
    if (::unlink(f.path.c_str()) == 0) removed++;
  // A temporary younger than a minute may be a put in flight in another process: removing it
  // would fail that put's rename.
  RemoveStaleTemporaries(dir_, std::chrono::minutes(1));
  return removed;
}

}  // namespace axle::runtime
