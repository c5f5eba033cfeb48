#include "spmd/mip.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "core/error.h"

namespace axle::spmd {

int Mip::AddColumn(double c, double lo, double hi, bool is_integer) {
  cost.push_back(c);
  lb.push_back(lo);
  ub.push_back(hi);
  integer.push_back(is_integer);
  entries.emplace_back();
  return columns() - 1;
}

int Mip::AddRow(double lo, double hi) {
  row_lb.push_back(lo);
  row_ub.push_back(hi);
  return rows() - 1;
}

void Mip::Add(int row, int column, double coefficient) {
  auto& col = entries[static_cast<size_t>(column)];
  for (auto& [r, c] : col)
    if (r == row) {
      c += coefficient;
      return;
    }
  col.emplace_back(row, coefficient);
}

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CBC's C interface, loaded at run time (Debian's coinor-libcbc3: libCbcSolver.so.3): a build
// without it works (auto-sharding's greedy decides), and its reference BLAS never meets OpenBLAS
// in one symbol namespace.
struct Cbc {
  using Model = void;
  Model* (*newModel)();
  void (*loadProblem)(Model*, int, int, const int*, const int*, const double*, const double*, const double*,
                      const double*, const double*, const double*);
  void (*setInteger)(Model*, int);
  void (*setMaximumSeconds)(Model*, double);
  void (*setLogLevel)(Model*, int);
  void (*setMIPStartI)(Model*, int, const int*, const double*);
  void (*setParameter)(Model*, const char*, const char*);
  int (*solve)(Model*);
  const double* (*getColSolution)(Model*);
  int (*isProvenOptimal)(Model*);
  int (*numberSavedSolutions)(Model*);
  void (*deleteModel)(Model*);

  // The loaded library, or nullptr with `why`.
  static const Cbc* Get(std::string* why) {
    static std::string error;
    static const Cbc* cbc = []() -> const Cbc* {
      void* h = dlopen("libCbcSolver.so.3", RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) h = dlopen("libCbcSolver.so", RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        error = "CBC is not installed (apt-get install coinor-libcbc3)";
        return nullptr;
      }
      auto* c = new Cbc;
      bool ok = true;
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        ok = ok && fn != nullptr;
      };
      sym(c->newModel, "Cbc_newModel");
      sym(c->loadProblem, "Cbc_loadProblem");
      sym(c->setInteger, "Cbc_setInteger");
      sym(c->setMaximumSeconds, "Cbc_setMaximumSeconds");
      sym(c->setLogLevel, "Cbc_setLogLevel");
      sym(c->setMIPStartI, "Cbc_setMIPStartI");
      sym(c->setParameter, "Cbc_setParameter");
      sym(c->solve, "Cbc_solve");
      sym(c->getColSolution, "Cbc_getColSolution");
      sym(c->isProvenOptimal, "Cbc_isProvenOptimal");
      sym(c->numberSavedSolutions, "Cbc_numberSavedSolutions");
      sym(c->deleteModel, "Cbc_deleteModel");
      if (!ok) {
        error = "libCbcSolver lacks a function of CBC's C interface this code calls";
        return nullptr;
      }
      return c;
    }();
    if (cbc == nullptr && why) *why = error;
    return cbc;
  }
};

}  // namespace

MipOutcome SolveMip(const Mip& p, const std::vector<std::pair<int, double>>& start, double time_limit_s) {
  MipOutcome out;
  std::string why;
  const Cbc* cbc = Cbc::Get(&why);
  if (cbc == nullptr) {
    out.status = why;
    return out;
  }
  std::vector<int> col_start{0}, index;
  std::vector<double> value;
  for (const auto& col : p.entries) {
    for (const auto& [r, c] : col)
      if (c != 0) {
        index.push_back(r);
        value.push_back(c);
      }
    col_start.push_back(static_cast<int>(index.size()));
  }
  Cbc::Model* m = cbc->newModel();
  cbc->loadProblem(m, p.columns(), p.rows(), col_start.data(), index.data(), value.data(), p.lb.data(), p.ub.data(),
                   p.cost.data(), p.row_lb.data(), p.row_ub.data());
  for (int c = 0; c < p.columns(); ++c)
    if (p.integer[static_cast<size_t>(c)]) cbc->setInteger(m, c);
  cbc->setLogLevel(m, 0);
  // Cbc_solve runs CBC's command-line driver, whose own limit is what it checks: in wall-clock
  // seconds (its default, CPU seconds, run on while other threads take the cores).
  const std::string seconds = fmt::format("{}", time_limit_s);
  cbc->setMaximumSeconds(m, time_limit_s);
  cbc->setParameter(m, "timeMode", "elapsed");
  cbc->setParameter(m, "seconds", seconds.c_str());
  std::vector<int> start_cols;
  std::vector<double> start_vals;
  for (const auto& [c, v] : start) {
    start_cols.push_back(c);
    start_vals.push_back(v);
  }
  if (!start_cols.empty())
    cbc->setMIPStartI(m, static_cast<int>(start_cols.size()), start_cols.data(), start_vals.data());

  // The child solves and writes [status, x...] as doubles (status -1: no solution, 0: found,
  // 1: proven optimal); the parent reads them or kills it at the deadline.
  const Clock::time_point t0 = Clock::now();
  int fds[2];
  if (pipe(fds) != 0) Fail("the MIP solver: pipe() failed: {}", std::strerror(errno));
  const pid_t child = fork();
  if (child < 0) Fail("the MIP solver: fork() failed: {}", std::strerror(errno));
  if (child == 0) {
    close(fds[0]);
    cbc->solve(m);
    std::vector<double> answer(static_cast<size_t>(p.columns()) + 1, 0);
    answer[0] = -1;
    const double* sol = cbc->getColSolution(m);
    if (sol != nullptr && cbc->numberSavedSolutions(m) > 0) {
      answer[0] = cbc->isProvenOptimal(m) ? 1 : 0;
      std::copy(sol, sol + p.columns(), answer.begin() + 1);
    }
    const char* b = reinterpret_cast<const char*>(answer.data());
    size_t left = answer.size() * sizeof(double);
    while (left > 0) {
      const ssize_t n = write(fds[1], b, left);
      if (n <= 0) break;
      b += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::vector<double> answer(static_cast<size_t>(p.columns()) + 1, -1);
  size_t got = 0;
  const size_t want = answer.size() * sizeof(double);
  bool timed_out = false;
  while (got < want) {
    const double left_s = time_limit_s + 2 - Since(t0);  // CBC's own limit, then a grace
    if (left_s <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(std::ceil(left_s * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(answer.data()) + got, want - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  if (got < want) kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  cbc->deleteModel(m);
  out.seconds = Since(t0);
  if (got == want && answer[0] >= 0) {
    out.x.emplace(answer.begin() + 1, answer.end());
    out.optimal = answer[0] == 1;
    out.status = out.optimal ? "CBC, optimal" : "CBC, stopped at the time limit";
  } else {
    out.status = timed_out ? "CBC stopped at the time limit without an answer" : "CBC found no solution";
  }
  return out;
}

}  // namespace axle::spmd
