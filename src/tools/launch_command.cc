// axle launch --nproc N [--master-port P] [--grace S] -- COMMAND [ARGS...]
// Starts N local processes of COMMAND as one run, with torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and AXLE_LAUNCH_ID (this launch's id:
// the launcher's name in `processes:` lines), for users without a launcher (docs/spmd.md,
// "Several processes").
//
// Note [The launcher's failure rule]: when a process fails (a non-zero exit or a signal), the
// others get --grace seconds to notice on their own (a peer that dies breaks their connections,
// and they exit naming it), then SIGTERM, then 5 s later SIGKILL. The launcher exits with the
// first failure's code (128 + N for signal N) and leaves no process behind: each child also
// gets SIGKILL if the launcher itself dies (PR_SET_PDEATHSIG). Each rank runs in a process group
// of its own, and signals go to the group: what a rank started goes with it.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "core/error.h"
#include "tools/commands.h"

extern char** environ;

namespace axle::tools {
namespace {

struct LaunchOptions {
  int nproc = 2;
  int master_port = 0;  // 0: a free one
  double grace_s = 5;
  std::vector<std::string> command;
};

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("axle launch: socket(): {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    Fail("axle launch: no free local port: {}", std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::atomic<int> g_forward_signal{0};
extern "C" void OnLaunchSignal(int sig) { g_forward_signal.store(sig); }

std::string Describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int Launch(const LaunchOptions& o) {
  if (o.command.empty()) Fail("axle launch: no command; e.g. axle launch --nproc 2 -- axle train --devices 1");
  const int port = o.master_port > 0 ? o.master_port : FreePort();
  std::random_device rd;
  const std::string id = fmt::format("{}-{:x}", ::getpid(), rd());
  struct sigaction sa = {};
  sa.sa_handler = OnLaunchSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::map<pid_t, int> rank_of;
  const pid_t launcher = ::getpid();
  for (int r = 0; r < o.nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) Fail("axle launch: fork(): {}", std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // a group of its own: signals reach the processes the rank starts too
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      const std::map<std::string, std::string> vars = {
          {"RANK", std::to_string(r)},         {"WORLD_SIZE", std::to_string(o.nproc)},
          {"LOCAL_RANK", std::to_string(r)},   {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
          {"MASTER_ADDR", "127.0.0.1"},        {"MASTER_PORT", std::to_string(port)},
          {"AXLE_LAUNCH_ID", id}};
      for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "axle launch: rank %d: cannot run '%s': %s\n", r, argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: whichever runs first
    rank_of[pid] = r;
  }

  int first_failure = 0;
  auto deadline_term = std::chrono::steady_clock::time_point::max();
  auto deadline_kill = deadline_term;
  auto signal_all = [&](int sig) {
    for (const auto& [pid, r] : rank_of) ::kill(-pid, sig);  // the rank's process group
  };
  while (!rank_of.empty()) {
    if (const int sig = g_forward_signal.exchange(0)) {
      signal_all(sig);  // Ctrl-C / a preemption notice: every rank gets it
      if (first_failure == 0) first_failure = 128 + sig;
      deadline_kill = std::min(deadline_kill, std::chrono::steady_clock::now() + std::chrono::seconds(30));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline_term) {
      std::cerr << fmt::format("axle launch: {} process(es) still running {:.0f} s after the first failure; "
                               "sending SIGTERM\n",
                               rank_of.size(), o.grace_s);
      signal_all(SIGTERM);
      deadline_term = std::chrono::steady_clock::time_point::max();
      deadline_kill = now + std::chrono::seconds(5);
    }
    if (now >= deadline_kill) {
      signal_all(SIGKILL);
      deadline_kill = std::chrono::steady_clock::time_point::max();
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = rank_of.find(pid);
    if (it == rank_of.end()) continue;
    const int r = it->second;
    rank_of.erase(it);
    ::kill(-pid, SIGKILL);  // what the rank left behind in its group
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && first_failure == 0) {
      first_failure = ExitCode(status);
      std::cerr << fmt::format("axle launch: rank {} (pid {}) {}: the run failed; the other ranks get {:.0f} s to "
                               "stop on their own\n",
                               r, pid, Describe(status), o.grace_s);
      deadline_term = now + std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
    } else if (failed) {
      std::cerr << fmt::format("axle launch: rank {} (pid {}) {}\n", r, pid, Describe(status));
    }
  }
  return first_failure;
}

}  // namespace

void AddLaunchCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Start N local processes of a command as one run (torchrun's variables; docs/spmd.md)");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--nproc", o->nproc, "Processes to start")->check(InRange(1, 4096));
  sub->add_option("--master-port", o->master_port, "Port of rank 0's rendezvous store (default: a free one)")
      ->check(InRange(0, 65535));
  sub->add_option("--grace", o->grace_s,
                  "Seconds the other processes get to stop on their own after one fails, before SIGTERM")
      ->check(kNonNegative);
  sub->add_option("command", o->command, "The command and its arguments, after --")->required();
  commands.emplace_back(sub, [o] {
    const int code = Launch(*o);
    std::cout << std::flush;
    if (code != 0) std::exit(code);
  });
}

}  // namespace axle::tools
