// axle cache stats|ls|clear [--dir DIR]: the on-disk cache of compiled artifacts
// (runtime/disk_cache.h, docs/cache.md). Without --dir: AXLE_CACHE_DIR.
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "core/flags.h"
#include "runtime/disk_cache.h"
#include "tools/commands.h"

namespace axle::tools {
namespace {

std::string HumanBytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string LocalTime(std::time_t t) {
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

runtime::DiskCache Open(const std::string& dir) {
  if (dir.empty())
    return runtime::DiskCache(flags::cache_dir(), flags::cache_max_bytes(), flags::cache());
  return runtime::DiskCache(dir, flags::cache_max_bytes(), flags::cache());
}

}  // namespace

void AddCacheCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  CLI::App* cache = app.add_subcommand("cache", "Inspect or clear the on-disk cache of compiled artifacts");
  cache->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  CLI::App* stats = cache->add_subcommand("stats", "Directory, entry count, bytes and size cap");
  CLI::App* ls = cache->add_subcommand("ls", "List entries, most recently used first");
  CLI::App* clear = cache->add_subcommand("clear", "Remove every entry (only files the cache wrote)");
  for (CLI::App* sub : {stats, ls, clear})
    sub->add_option("--dir", *dir, "Cache directory (default: AXLE_CACHE_DIR)");

  commands.emplace_back(stats, [dir] {
    runtime::DiskCache c = Open(*dir);
    runtime::DiskCache::Stats s = c.ScanDirectory();
    std::printf("directory: %s\n", c.dir().c_str());
    std::printf("entries:   %lld\n", static_cast<long long>(s.entries));
    std::printf("bytes:     %lld (%s)\n", static_cast<long long>(s.bytes), HumanBytes(s.bytes).c_str());
    std::printf("cap:       %lld (%s)\n", static_cast<long long>(c.max_bytes()),
                HumanBytes(c.max_bytes()).c_str());
    std::printf("enabled:   %s\n", c.enabled() ? "yes" : "no (AXLE_CACHE=0)");
    std::printf("fingerprint of this binary: %s (%s)\n", runtime::DiskCache::Fingerprint().c_str(),
                runtime::DiskCache::FingerprintSource().c_str());
  });
  commands.emplace_back(ls, [dir] {
    runtime::DiskCache c = Open(*dir);
    std::vector<runtime::DiskCache::Entry> entries = c.List();
    std::printf("%-40s %12s  %s\n", "KEY", "BYTES", "LAST USE");
    int64_t total = 0;
    for (const auto& e : entries) {
      std::string key = e.key.empty() ? "<unreadable header>" : e.key;
      if (key.size() > 40) key = key.substr(0, 37) + "...";
      std::printf("%-40s %12lld  %s\n", key.c_str(), static_cast<long long>(e.bytes),
                  LocalTime(e.last_use).c_str());
      total += e.bytes;
    }
    std::printf("%zu entries, %s in %s\n", entries.size(), HumanBytes(total).c_str(),
                c.dir().c_str());
  });
  commands.emplace_back(clear, [dir] {
    runtime::DiskCache c = Open(*dir);
    int64_t bytes = c.ScanDirectory().bytes;
    int64_t n = c.Clear();
    std::printf("removed %lld entries (%s) from %s\n", static_cast<long long>(n),
                HumanBytes(bytes).c_str(), c.dir().c_str());
  });
}

}  // namespace axle::tools
