// The JIT driver (see jit.h).
#include "backends/cpu/jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/error.h"

extern char** environ;

#ifndef AXLE_HOST_CXX
#define AXLE_HOST_CXX "c++"
#endif

namespace axle::codegen {
namespace {

std::mutex mu;
JitStats stats;
std::string compiler_override;

uint64_t Fnv(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  if (!f) Fail("jit: cannot write {}", path);
}

// A fresh private directory under $TMPDIR (else /tmp); removed by the guard.
struct TempDir {
  std::string path;
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/axle-jit-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) Fail("jit: cannot create a temporary directory {}", tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::shared_ptr<JitLibrary> Load(const std::string& so) {
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) Fail("jit: dlopen {} failed: {}", so, dlerror());
  return std::make_shared<JitLibrary>(h);
}

// Runs argv with stderr (and stdout) into `log`; returns the exit status (or throws when it
// cannot start).
int Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) Fail("jit: cannot run the C++ compiler '{}': {}", argv[0], std::strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) Fail("jit: waitpid failed: {}", std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

JitLibrary::~JitLibrary() {
  if (handle_) dlclose(handle_);
}

void* JitLibrary::Symbol(const std::string& name) const {
  dlerror();
  void* p = dlsym(handle_, name.c_str());
  if (p == nullptr) Fail("jit: symbol {} not found in the compiled kernels", name);
  return p;
}

JitStats GetJitStats() {
  std::lock_guard<std::mutex> l(mu);
  return stats;
}
void ResetJitStats() {
  std::lock_guard<std::mutex> l(mu);
  stats = {};
}

std::string JitCompiler() {
  std::lock_guard<std::mutex> l(mu);
  return compiler_override.empty() ? std::string(AXLE_HOST_CXX) : compiler_override;
}
void SetJitCompilerForTesting(std::string path) {
  std::lock_guard<std::mutex> l(mu);
  compiler_override = std::move(path);
}

std::vector<std::string> JitFlags() {
  std::vector<std::string> flags = {"-O3", "-march=native"};
  // GCC vectorises with 256-bit registers even where AVX-512 is available (its tuning for the
  // clock penalty of early AVX-512 parts); the generated kernels are element loops whose lanes
  // are independent, so 512-bit vectors give the same bits in half the instructions (GPT-2's
  // GELU kernels: 1.03 -> 0.57 ms a call on one core).
  // On Zen 1 (znver1: AVX2 on 128-bit units) GCC's tuning picks 16-byte vectors; 32-byte ones
  // still halve the instruction count there, and the front end is what binds these kernels (one
  // thread, GPT-2 small's: GELU backward 1.45 -> 1.13 ms, GELU 0.74 -> 0.60-0.64, the attention
  // softmax 0.60-0.86 -> 0.54; the same bits). Elsewhere with AVX2 it is already GCC's choice.
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    flags.push_back("-mprefer-vector-width=512");
  else if (__builtin_cpu_supports("avx2"))
    flags.push_back("-mprefer-vector-width=256");
#endif
  flags.insert(flags.end(), {"-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-std=c++17"});
  return flags;
}

std::string JitCacheKey(const std::string& source) {
  std::string all = source + '\0' + JitCompiler();
  for (const std::string& f : JitFlags()) all += '\0' + f;
  return fmt::format("jit{:016x}{:016x}", Fnv(all), Fnv(all, 0x84222325cbf29ce4ull));
}

std::shared_ptr<JitLibrary> CompileAndLoad(const std::string& source, const BlobCache* cache, bool* disk_hit) {
  if (disk_hit) *disk_hit = false;
  const std::string key = JitCacheKey(source);
  TempDir dir;
  const std::string so = dir.path + "/kernels.so";
  if (cache && cache->get) {
    if (std::optional<std::string> blob = cache->get(key)) {
      WriteFile(so, *blob);
      auto lib = Load(so);
      std::lock_guard<std::mutex> l(mu);
      ++stats.disk_hits;
      if (disk_hit) *disk_hit = true;
      return lib;
    }
  }
  const std::string src = dir.path + "/kernels.cc";
  const std::string log = dir.path + "/compiler.log";
  WriteFile(src, source);
  std::vector<std::string> argv = {JitCompiler()};
  for (const std::string& f : JitFlags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", so, src});
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  try {
    rc = Spawn(argv, log);
  } catch (const Error&) {
    std::lock_guard<std::mutex> l(mu);
    ++stats.failures;
    throw;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    {
      std::lock_guard<std::mutex> l(mu);
      ++stats.failures;
    }
    std::string msg = ReadFile(log);
    if (msg.size() > 4000) msg = msg.substr(0, 4000) + "\n...";
    Fail("jit: the C++ compiler '{}' failed (exit status {}) on the generated kernels:\n{}", argv[0], rc, msg);
  }
  std::string bytes = ReadFile(so);
  auto lib = Load(so);
  {
    std::lock_guard<std::mutex> l(mu);
    ++stats.compiles;
    stats.compile_seconds += secs;
  }
  if (cache && cache->put) cache->put(key, bytes);
  return lib;
}

}  // namespace axle::codegen
