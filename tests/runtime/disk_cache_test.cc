// The on-disk cache of compiled artifacts (runtime/disk_cache.h): round trips, misses, corrupt
// entries, concurrent writers (threads and processes), LRU eviction, unwritable directories, the
// `axle cache` CLI. Each test uses its own temporary directory.
#include "runtime/disk_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/flags.h"

namespace axle::runtime {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "axle-disk-cache-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Deterministic content for a key: 1..20 KiB of bytes derived from the key (zeros included).
std::string Blob(const std::string& key) {
  uint64_t h = Fnv1a64(key);
  std::string s(1 + h % 20000, '\0');
  for (size_t i = 0; i < s.size(); ++i) {
    h ^= h << 13;
    h ^= h >> 7;
    h ^= h << 17;
    s[i] = static_cast<char>(i % 97 == 0 ? 0 : h & 0xff);
  }
  return s;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteBytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

int CountLines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

TEST(DiskCache, RoundTrip) {
  TempDir t;
  DiskCache c(t.path() + "/sub/dir");  // created on the first put
  std::string blob("compiled\0kernel\xff", 16);
  c.Put("k1", blob);
  c.Put("empty", "");
  EXPECT_EQ(c.Get("k1"), blob);
  EXPECT_EQ(c.Get("empty"), std::string());
  c.Put("k1", "replaced");
  EXPECT_EQ(c.Get("k1"), "replaced");
  DiskCache::Stats s = c.ScanDirectory();
  EXPECT_EQ(s.hits, 3);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.puts, 3);
  EXPECT_EQ(s.entries, 2);
  EXPECT_GT(s.bytes, 8);
  // A second object on the same directory (another process, say) sees the entries.
  DiskCache other(t.path() + "/sub/dir/");
  EXPECT_EQ(other.Get("k1"), "replaced");
  // No temporaries left behind.
  for (const std::string& name : DirNames(c.dir())) EXPECT_EQ(name.find(".tmp-"), std::string::npos);
}

TEST(DiskCache, MissIsSilent) {
  TempDir t;
  DiskCache c(t.path());
  testing::internal::CaptureStderr();
  EXPECT_EQ(c.Get("absent"), std::nullopt);
  DiskCache nowhere(t.path() + "/does/not/exist");
  EXPECT_EQ(nowhere.Get("absent"), std::nullopt);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(c.stats().misses, 1);
  EXPECT_EQ(c.stats().corrupt, 0);
}

TEST(DiskCache, UnsafeKeysStayInsideTheDirectory) {
  TempDir t;
  DiskCache c(t.path());
  const std::string key = "../../etc/passwd\n with spaces";
  EXPECT_EQ(fs::path(c.PathFor(key)).parent_path().string(), t.path());
  c.Put(key, "x");
  EXPECT_EQ(c.Get(key), "x");
  EXPECT_EQ(c.Get("../../etc/passwd"), std::nullopt);
  EXPECT_EQ(c.PathFor("abc123"), t.path() + "/abc123.axc");
}

struct Damage {
  const char* name;
  const char* reason;  // expected in the warning
  void (*apply)(const std::string& path, const std::string& other_entry);
};

const Damage kDamages[] = {
    {"flip_payload_byte", "checksum mismatch",
     [](const std::string& p, const std::string&) {
       std::string d = ReadBytes(p);
       d[d.size() - 5] ^= 0x40;
       WriteBytes(p, d);
     }},
    {"truncate_payload", "payload size",
     [](const std::string& p, const std::string&) {
       std::string d = ReadBytes(p);
       WriteBytes(p, d.substr(0, d.size() - 100));
     }},
    {"truncate_header", "truncated header",
     [](const std::string& p, const std::string&) { WriteBytes(p, ReadBytes(p).substr(0, 11)); }},
    {"empty_file", "truncated header", [](const std::string& p, const std::string&) { WriteBytes(p, ""); }},
    {"garbage_header", "bad magic",
     [](const std::string& p, const std::string&) {
       std::string d = ReadBytes(p);
       for (size_t i = 0; i < 32; ++i) d[i] = static_cast<char>(0xa5 + i);
       WriteBytes(p, d);
     }},
    {"wrong_version", "format version",
     [](const std::string& p, const std::string&) {
       std::string d = ReadBytes(p);
       d[8] = 7;
       WriteBytes(p, d);
     }},
    {"wrong_key", "key mismatch",
     [](const std::string& p, const std::string& other) { WriteBytes(p, ReadBytes(other)); }},
    {"huge_key_length", "truncated key",
     [](const std::string& p, const std::string&) {
       std::string d = ReadBytes(p);
       d[15] = 0x7f;
       WriteBytes(p, d);
     }},
};

TEST(DiskCache, CorruptEntryIsAWarnedMissAndRemoved) {
  for (const Damage& damage : kDamages) {
    SCOPED_TRACE(damage.name);
    TempDir t;
    DiskCache c(t.path());
    const std::string key = "victim";
    c.Put(key, Blob("victim-blob-of-some-size"));
    c.Put("other", Blob("other"));
    const std::string path = c.PathFor(key);
    damage.apply(path, c.PathFor("other"));

    testing::internal::CaptureStderr();
    std::optional<std::string> got;
    EXPECT_NO_THROW(got = c.Get(key));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(got, std::nullopt);
    EXPECT_EQ(CountLines(err), 1) << err;
    EXPECT_NE(err.find("warning"), std::string::npos) << err;
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find(damage.reason), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(c.stats().corrupt, 1);
    EXPECT_EQ(c.stats().misses, 1);
    // The other entry is untouched, and the key can be stored again.
    EXPECT_EQ(c.Get("other"), Blob("other"));
    c.Put(key, "fresh");
    EXPECT_EQ(c.Get(key), "fresh");
  }
}

// Writes and reads `rounds` shared keys and `rounds` keys of its own; returns the number of
// wrong reads (a read is either a miss or the exact blob).
int Hammer(const std::string& dir, const std::string& who, int rounds) {
  DiskCache c(dir);
  int bad = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string shared = "shared-" + std::to_string(i % 6);
    const std::string own = who + "-" + std::to_string(i);
    c.Put(shared, Blob(shared));
    c.Put(own, Blob(own));
    for (const std::string& k : {shared, std::string("shared-") + std::to_string((i + 3) % 6), own}) {
      std::optional<std::string> got = c.Get(k);
      if (got && *got != Blob(k)) ++bad;
    }
  }
  if (c.stats().corrupt != 0) bad += 1000;
  return bad;
}

TEST(DiskCache, ConcurrentThreadsAndProcesses) {
  TempDir t;
  constexpr int kRounds = 12, kThreads = 8, kProcs = 3;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int bad = Hammer(t.path(), "proc" + std::to_string(p), kRounds);
      ::_exit(bad == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { bad += Hammer(t.path(), "thread" + std::to_string(i), kRounds); });
  for (std::thread& th : threads) th.join();
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  EXPECT_EQ(bad, 0);

  DiskCache c(t.path());
  std::vector<std::string> keys;
  for (int i = 0; i < 6; ++i) keys.push_back("shared-" + std::to_string(i));
  for (int w = 0; w < kThreads; ++w)
    for (int i = 0; i < kRounds; ++i) keys.push_back("thread" + std::to_string(w) + "-" + std::to_string(i));
  for (int w = 0; w < kProcs; ++w)
    for (int i = 0; i < kRounds; ++i) keys.push_back("proc" + std::to_string(w) + "-" + std::to_string(i));
  for (const std::string& k : keys) EXPECT_EQ(c.Get(k), Blob(k)) << k;
  EXPECT_EQ(c.stats().corrupt, 0);
  EXPECT_EQ(c.ScanDirectory().entries, static_cast<int64_t>(keys.size()));
  for (const std::string& name : DirNames(t.path())) EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
}

TEST(DiskCache, EvictsLeastRecentlyUsedFirst) {
  TempDir t;
  const std::string payload(1000, 'p');
  {
    DiskCache big(t.path());
    for (const char* k : {"a", "b", "c", "d"}) big.Put(k, payload);
    // Distinct last-use times, oldest first: a, b, c, d.
    auto now = fs::file_time_type::clock::now();
    int age = 40;
    for (const char* k : {"a", "b", "c", "d"}) {
      fs::last_write_time(big.PathFor(k), now - std::chrono::seconds(age));
      age -= 10;
    }
    EXPECT_EQ(big.Get("a"), payload);  // a becomes the most recently used
  }
  const int64_t entry = static_cast<int64_t>(fs::file_size(t.path() + "/a.axc"));
  // Room for 4 entries; a fifth put goes over, and 90% of the cap holds 3 entries.
  DiskCache c(t.path(), 4 * entry + entry / 5);
  c.Put("e", payload);
  EXPECT_EQ(c.stats().evictions, 2);
  EXPECT_FALSE(fs::exists(c.PathFor("b")));
  EXPECT_FALSE(fs::exists(c.PathFor("c")));
  EXPECT_EQ(c.Get("a"), payload);
  EXPECT_EQ(c.Get("d"), payload);
  EXPECT_EQ(c.Get("e"), payload);
  DiskCache::Stats s = c.ScanDirectory();
  EXPECT_EQ(s.entries, 3);
  EXPECT_LE(s.bytes, (4 * entry + entry / 5) / 10 * 9);
}

TEST(DiskCache, EvictionRemovesStaleTemporaries) {
  TempDir t;
  const std::string stale = t.path() + "/.tmp-9-9-9.axc.tmp", fresh = t.path() + "/.tmp-8-8-8.axc.tmp";
  WriteBytes(stale, "crashed writer");
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  WriteBytes(fresh, "in flight");
  WriteBytes(t.path() + "/other.txt", std::string(5000, 'o'));  // not ours: never counted or removed
  DiskCache c(t.path(), 1500);
  c.Put("a", std::string(1000, 'a'));
  EXPECT_TRUE(fs::exists(stale));  // under the cap: no scan for temporaries
  c.Put("b", std::string(1000, 'b'));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_TRUE(fs::exists(t.path() + "/other.txt"));
  EXPECT_EQ(c.ScanDirectory().entries, 1);
}

TEST(DiskCache, ConcurrentPutsUnderEvictionNeverTear) {
  TempDir t;
  constexpr int kThreads = 8, kRounds = 25;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w)
    threads.emplace_back([&, w] {
      DiskCache c(t.path(), 60000);  // a few entries' worth: most puts evict
      for (int i = 0; i < kRounds; ++i) {
        const std::string k = fmt::format("k{}", (w * 7 + i) % 30);
        c.Put(k, Blob(k));
        for (int j = 0; j < 3; ++j) {
          const std::string r = fmt::format("k{}", (w + i + j * 11) % 30);
          std::optional<std::string> got = c.Get(r);
          if (got && *got != Blob(r)) ++bad;
        }
      }
      if (c.stats().corrupt != 0) bad += 1000;
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  DiskCache c(t.path());
  EXPECT_LE(c.ScanDirectory().bytes, 60000 + 20100);  // the cap, give or take an in-flight put
  for (const std::string& name : DirNames(t.path())) EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
}

TEST(DiskCache, UnwritableDirectoryWarnsOnceAndNeverThrows) {
  TempDir t;
  // A directory below a regular file cannot be created, even by root.
  WriteBytes(t.path() + "/file", "not a directory");
  DiskCache c(t.path() + "/file/cache");
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(c.Put("k", "v"));
  EXPECT_NO_THROW(c.Put("k2", "v2"));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountLines(err), 1) << err;
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_EQ(c.Get("k"), std::nullopt);
  EXPECT_EQ(c.stats().puts, 0);
  if (::geteuid() != 0) {  // permissions do not stop root
    TempDir ro;
    fs::permissions(ro.path(), fs::perms::owner_read | fs::perms::owner_exec);
    DiskCache r(ro.path());
    testing::internal::CaptureStderr();
    EXPECT_NO_THROW(r.Put("k", "v"));
    EXPECT_EQ(CountLines(testing::internal::GetCapturedStderr()), 1);
    fs::permissions(ro.path(), fs::perms::owner_all);
  }
}

TEST(DiskCache, DisabledCacheNeitherReadsNorWrites) {
  TempDir t;
  DiskCache on(t.path());
  on.Put("k", "v");
  DiskCache off(t.path() + "/off", DiskCache::kDefaultMaxBytes, /*enabled=*/false);
  off.Put("k", "v");
  EXPECT_FALSE(fs::exists(t.path() + "/off"));
  DiskCache off_same(t.path(), DiskCache::kDefaultMaxBytes, false);
  EXPECT_EQ(off_same.Get("k"), std::nullopt);
}

TEST(DiskCache, FingerprintAndKeys) {
  std::string fp = DiskCache::Fingerprint();
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp, DiskCache::Fingerprint());
  const std::string src = DiskCache::FingerprintSource();
  EXPECT_EQ(src.rfind("axle-cache-format=1;", 0), 0u) << src;
  EXPECT_NE(src.find(";isa="), std::string::npos) << src;
  EXPECT_TRUE(src.find(";build-id=") != std::string::npos || src.find(";exe=") != std::string::npos)
      << src;
  EXPECT_EQ(DiskCache::MakeKey("0123abcd"), "0123abcd-" + fp);
  std::string odd = DiskCache::MakeKey("not hex / at all");
  EXPECT_EQ(odd.size(), 32u + 1 + 16);
  EXPECT_NE(odd, DiskCache::MakeKey("not hex / at all!"));
  TempDir t;
  DiskCache c(t.path());
  EXPECT_EQ(c.PathFor(odd), t.path() + "/" + odd + ".axc");
}

TEST(DiskCache, Flags) {
  flags::ResetForTesting();
  ::setenv("AXLE_CACHE_DIR", "/some/where", 1);
  ::setenv("AXLE_CACHE", "0", 1);
  ::setenv("AXLE_CACHE_MAX_BYTES", "12345", 1);
  EXPECT_EQ(flags::cache_dir(), "/some/where");
  EXPECT_FALSE(flags::cache());
  EXPECT_EQ(flags::cache_max_bytes(), 12345);
  ::unsetenv("AXLE_CACHE_DIR");
  ::unsetenv("AXLE_CACHE");
  ::unsetenv("AXLE_CACHE_MAX_BYTES");
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  std::string saved = old_xdg ? old_xdg : "";
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  flags::ResetForTesting();
  EXPECT_EQ(flags::cache_dir(), "/xdg/axle");
  EXPECT_TRUE(flags::cache());
  EXPECT_EQ(flags::cache_max_bytes(), int64_t{2} << 30);
  if (old_xdg) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
  flags::ResetForTesting();
}

TEST(DiskCache, DefaultReadsTheFlags) {
  TempDir t;
  // Default() is a process-wide singleton: check it in a child so this process's stays unread.
  ::setenv("AXLE_CACHE_DIR", (t.path() + "/default").c_str(), 1);
  ::setenv("AXLE_CACHE_MAX_BYTES", "4096", 1);
  flags::ResetForTesting();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    DiskCache& c = DiskCache::Default();
    bool ok = &c == &DiskCache::Default() && c.dir() == t.path() + "/default" &&
              c.max_bytes() == 4096 && c.enabled();
    c.Put("k", "v");
    ok = ok && c.Get("k") == std::optional<std::string>("v");
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::unsetenv("AXLE_CACHE_DIR");
  ::unsetenv("AXLE_CACHE_MAX_BYTES");
  flags::ResetForTesting();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(fs::exists(t.path() + "/default/k.axc"));
}

// Runs `axle <args>`; returns the exit code and fills `out` with stdout and stderr.
int RunAxle(const std::string& args, std::string& out, const std::string& env = "") {
  std::string cmd = env + " " + std::string(AXLE_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  out.clear();
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DiskCache, Cli) {
  TempDir t;
  {
    DiskCache c(t.path());
    c.Put("aaaa1111-fingerprint", std::string(100, 'x'));
    c.Put("bbbb2222-fingerprint", std::string(200, 'y'));
  }
  WriteBytes(t.path() + "/notes.txt", "not the cache's");
  WriteBytes(t.path() + "/.tmp-1-2-3.axc.tmp", "a crashed writer's leftover");
  fs::last_write_time(t.path() + "/.tmp-1-2-3.axc.tmp",
                      fs::file_time_type::clock::now() - std::chrono::minutes(5));
  WriteBytes(t.path() + "/.tmp-4-5-6.axc.tmp", "a put in flight");
  std::string out;
  ASSERT_EQ(RunAxle("cache stats --dir " + t.path(), out), 0) << out;
  EXPECT_NE(out.find("directory: " + t.path()), std::string::npos) << out;
  EXPECT_NE(out.find("entries:   2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cap:       2147483648"), std::string::npos) << out;

  WriteBytes(t.path() + "/damaged.axc", "garbage");
  ASSERT_EQ(RunAxle("cache ls --dir " + t.path(), out), 0) << out;
  EXPECT_NE(out.find("<unreadable header>"), std::string::npos) << out;
  EXPECT_NE(out.find("aaaa1111-fingerprint"), std::string::npos) << out;
  EXPECT_NE(out.find("bbbb2222-fingerprint"), std::string::npos) << out;
  EXPECT_NE(out.find("3 entries"), std::string::npos) << out;

  // Without --dir: AXLE_CACHE_DIR.
  ASSERT_EQ(RunAxle("cache stats", out, "AXLE_CACHE_DIR=" + t.path()), 0) << out;
  EXPECT_NE(out.find("entries:   3\n"), std::string::npos) << out;

  ASSERT_EQ(RunAxle("cache clear --dir " + t.path(), out), 0) << out;
  EXPECT_NE(out.find("removed 3 entries"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(t.path() + "/notes.txt"));
  EXPECT_FALSE(fs::exists(t.path() + "/.tmp-1-2-3.axc.tmp"));
  EXPECT_TRUE(fs::exists(t.path() + "/.tmp-4-5-6.axc.tmp"));
  ASSERT_EQ(RunAxle("cache stats --dir " + t.path(), out), 0) << out;
  EXPECT_NE(out.find("entries:   0\n"), std::string::npos) << out;

  EXPECT_NE(RunAxle("cache", out), 0);  // a subcommand is required
}

}  // namespace
}  // namespace axle::runtime
