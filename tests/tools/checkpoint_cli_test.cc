// `axle train --checkpoint-dir` as a process: SIGTERM saves, commits and exits 143; SIGKILL at
// random moments (20) during saves never leaves the newest committed checkpoint unreadable, and
// --resume continues from it (Note [Checkpoint commit protocol]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "axle/checkpoint.h"
#include "run_axle.h"

namespace axle {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("axle_ckpt_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  // Starts `axle train <args>` with its output in `log`; returns the pid.
  pid_t Start(const std::string& args, const std::string& log) {
    const std::string cmd = std::string("exec ") + AXLE_BINARY + " " + args + " > " + log + " 2>&1";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }
  // Lines in `path` (0 when it does not exist yet).
  static int64_t Lines(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  }
  // Waits (up to `seconds`) until `path` has at least `n` lines.
  static bool WaitForLines(const std::string& path, int64_t n, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Lines(path) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  fs::path dir_;
};

// A job that never ends on its own: every run of these tests is stopped (by a signal, or by
// --stop-at). With --steps 400, twenty kill-and-resume rounds on a fast machine reached step 400,
// and the last rounds' runs ended before logging the 3 steps the test waits for.
const char* kJob = "train --steps 1000000 --batch 4 --seq 32 --backend cpu --samples 0 --no-progress --dropout 0.1";

TEST_F(CheckpointCliTest, SigtermSavesCommitsAndExits) {
  const std::string ckpt = Path("ckpt"), rows = Path("rows.jsonl");
  const pid_t pid = Start(fmt::format("{} --checkpoint-dir {} --checkpoint-every 1000 --log-json {}", kJob, ckpt, rows),
                          Path("out.txt"));
  ASSERT_TRUE(WaitForLines(rows, 3, 120)) << "no steps logged";
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  std::ifstream out(Path("out.txt"));
  const std::string text{std::istreambuf_iterator<char>(out), {}};
  EXPECT_THAT(text, HasSubstr("stopped by SIGTERM"));
  const std::optional<int64_t> latest = checkpoint::Manager(ckpt).latest();
  ASSERT_TRUE(latest.has_value()) << text;
  EXPECT_GE(*latest, 3);
  const testing::RunResult r = testing::RunAxle(
      fmt::format("{} --checkpoint-dir {} --resume --stop-at {} --log-json {}", kJob, ckpt, *latest + 2, Path("b.jsonl")));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(Path("b.jsonl"));
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(nlohmann::json::parse(first)["step"], *latest);
}

TEST_F(CheckpointCliTest, SigkillDuringSavesNeverTearsTheLatestCheckpoint) {
  const std::string ckpt = Path("ckpt");
  std::mt19937 rng(12345);
  int64_t previous = -1;
  int torn = 0;  // kills that landed inside a save (an uncommitted .step_N.tmp left behind)
  for (int kill = 0; kill < 20; ++kill) {
    const std::string rows = Path(fmt::format("rows{}.jsonl", kill));
    const std::string resume = kill == 0 ? "" : "--resume";
    const pid_t pid =
        Start(fmt::format("{} --checkpoint-dir {} --checkpoint-every 1 --keep 2 {} --log-json {}", kJob, ckpt, resume, rows),
              Path("out.txt"));
    ASSERT_TRUE(WaitForLines(rows, 3, 120)) << "no steps logged";  // step 2 committed (see the loop)
    // Every step saves: a random moment from here on falls inside or between saves.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    for (const auto& e : fs::directory_iterator(ckpt)) torn += e.path().filename().string().rfind(".step_", 0) == 0;
    checkpoint::Manager m(ckpt);  // removes what the kill left uncommitted
    const std::optional<int64_t> latest = m.latest();
    ASSERT_TRUE(latest.has_value());
    EXPECT_GE(*latest, previous) << "kill " << kill;
    previous = *latest;
    for (const auto& e : fs::directory_iterator(ckpt))
      EXPECT_NE(e.path().filename().string().rfind(".step_", 0), 0u) << e.path();
  }
  std::cout << "kills inside a save: " << torn << " of 20\n";
  // The newest committed step restores and the run continues from it.
  const testing::RunResult r = testing::RunAxle(fmt::format("{} --checkpoint-dir {} --resume --stop-at {} --log-json {}",
                                                            kJob, ckpt, previous + 1, Path("last.jsonl")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(fmt::format("(step {})", previous)));
}

}  // namespace
}  // namespace axle
