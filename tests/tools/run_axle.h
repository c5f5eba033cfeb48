// Runs the built `axle` binary (AXLE_BINARY) for end-to-end tests of the CLI.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace axle::testing {

struct RunResult {
  int status = -1;     // exit code; -1 when killed by a signal
  std::string output;  // stdout and stderr together
};

// `env`: "NAME=value " assignments put before the command (they apply to this run only).
inline RunResult RunAxle(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + std::string(AXLE_BINARY) + " " + args + " 2>&1";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A test with a directory of its own (`prefix`_<pid>_<test name> under the temp directory),
// removed after it.
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + "_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  std::string prefix_;
  std::filesystem::path dir_;
};

}  // namespace axle::testing
