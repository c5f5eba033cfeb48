// The harness of the multi-process tests (dist_tests): each test starts its processes as the test
// binary again, with torchrun's variables and AXLE_DIST_TEST_WORKER naming the DistWorker test that
// each child runs; the parent checks their exit codes and output.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/flags.h"
#include "dist/tcp_store.h"

namespace axle::dist_testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string Worker() { return flags::LauncherVariable("AXLE_DIST_TEST_WORKER").value_or(""); }

#define WORKER_ONLY(name)                                                   \
  if (::axle::dist_testing::Worker() != name) GTEST_SKIP() << "runs in the processes of a DistTest"

struct Child {
  pid_t pid = -1;
  std::string log;  // stdout + stderr
  int status = 0;
  double exit_s = 0;  // seconds from start to exit
};

inline int FreePort() {
  // A port the kernel just handed out (bound and released; a race with other binders is unlikely).
  dist::TcpStoreServer probe(0);
  return probe.port();
}

// Starts `n` processes of this binary running DistWorker.<worker>, each with `devices` devices.
inline std::vector<Child> Start(int n, int devices, const std::string& worker, const std::string& dir,
                         const std::map<std::string, std::string>& extra = {}) {
  const int port = FreePort();
  static int launches = 0;
  ++launches;
  std::vector<Child> children(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Child& c = children[static_cast<size_t>(r)];
    c.log = fmt::format("{}/launch{}-rank{}.log", dir, launches, r);  // fresh: never a previous launch's
    c.pid = ::fork();
    if (c.pid == 0) {
      std::map<std::string, std::string> env = {
          {"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(n)},     {"LOCAL_RANK", std::to_string(r)},
          {"LOCAL_WORLD_SIZE", std::to_string(n)}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)},
          {"AXLE_CPU_DEVICES", std::to_string(devices)}, {"AXLE_DIST_TEST_WORKER", worker},
          {"AXLE_COLLECTIVE_TIMEOUT", "60"}, {"AXLE_CACHE", "0"}};
      for (const auto& [k, v] : extra) env[k] = v;
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      const std::string filter = "--gtest_filter=DistWorker." + worker;
      std::freopen(c.log.c_str(), "w", stdout);
      ::dup2(::fileno(stdout), 2);
      ::execl("/proc/self/exe", "dist_tests", filter.c_str(), "--gtest_brief=1", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  return children;
}

inline std::string ReadLog(const Child& c) {
  std::ifstream in(c.log);  // absent until the child opens it
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for every child (killing them all after `limit`), recording how each ended.
inline void WaitAll(std::vector<Child>& children, std::chrono::seconds limit, Clock::time_point start) {
  size_t left = children.size();
  while (left > 0) {
    for (Child& c : children) {
      if (c.pid < 0) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.status = status;
        c.exit_s = std::chrono::duration<double>(Clock::now() - start).count();
        c.pid = -1;
        --left;
      }
    }
    if (Clock::now() - start > limit) {
      for (Child& c : children)
        if (c.pid > 0) {
          ::kill(c.pid, SIGKILL);
          ::waitpid(c.pid, &c.status, 0);
          c.pid = -1;
          c.exit_s = 1e9;
          --left;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

class DistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Worker().empty()) GTEST_SKIP() << "a worker process runs only its DistWorker test";
    dir_ = fs::temp_directory_path() / fmt::format("axle-dist-test-{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Runs `n` x `devices` processes of `worker` to the end; expects every one to exit 0.
  void RunAll(int n, int devices, const std::string& worker, const std::map<std::string, std::string>& extra = {}) {
    const auto start = Clock::now();
    std::vector<Child> children = Start(n, devices, worker, dir_.string(), extra);
    WaitAll(children, std::chrono::seconds(240), start);
    for (size_t r = 0; r < children.size(); ++r)
      EXPECT_TRUE(WIFEXITED(children[r].status) && WEXITSTATUS(children[r].status) == 0)
          << worker << ": rank " << r << " of " << n << " ended with status " << children[r].status << ":\n"
          << ReadLog(children[r]);
    for (size_t r = 0; r < children.size(); ++r)
      EXPECT_THAT(ReadLog(children[r]), ::testing::HasSubstr("DistWorker done")) << "rank " << r << " skipped its work";
  }

  fs::path dir_;
};

}  // namespace axle::dist_testing
