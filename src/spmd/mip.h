// A mixed-integer program in column form and CBC to solve it (coinor-libcbc3, loaded at run time),
// for auto-sharding (auto_shard.h) -- the solver kept apart from the model it solves.
//
//   Mip p;
//   int x = p.AddColumn(/*cost=*/3, 0, 1, /*integer=*/true), y = p.AddColumn(2, 0, 1, true);
//   p.Add(p.AddRow(1, 1), x, 1);  p.Add(0, y, 1);          // x + y = 1
//   MipOutcome o = SolveMip(p, {{x, 1}}, /*time_limit_s=*/10);
//   o.solution->x[y]                                       // 1: the cheaper one
//
// CBC runs in a child process (fork): its own time limit is checked between branch-and-bound
// nodes, and one node of a degenerate relaxation ran for many minutes past it; the parent reads
// the child's answer through a pipe, or kills it at the deadline, so the limit is a guarantee.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace axle::spmd {

struct Mip {
  std::vector<double> cost, lb, ub;                            // per column
  std::vector<bool> integer;                                   // per column
  std::vector<std::vector<std::pair<int, double>>> entries;   // per column: (row, coefficient)
  std::vector<double> row_lb, row_ub;                          // per row (+-infinity: no bound)

  int AddColumn(double c, double lo, double hi, bool is_integer);
  int AddRow(double lo, double hi);
  // Adds `coefficient` to the matrix entry (row, column).
  void Add(int row, int column, double coefficient);
  int columns() const { return static_cast<int>(cost.size()); }
  int rows() const { return static_cast<int>(row_lb.size()); }
};

struct MipOutcome {
  std::optional<std::vector<double>> x;  // the best solution found, if any
  bool optimal = false;                  // proven optimal
  // "CBC, optimal", "CBC, stopped at the time limit", or why there is no solution: CBC missing,
  // nothing found, killed at the deadline.
  std::string status;
  double seconds = 0;
};

// Minimizes cost . x subject to the rows and bounds, from `start` (column, value) pairs of a
// feasible solution, within `time_limit_s` (plus two seconds' grace) of wall-clock time.
MipOutcome SolveMip(const Mip& p, const std::vector<std::pair<int, double>>& start, double time_limit_s);

}  // namespace axle::spmd
