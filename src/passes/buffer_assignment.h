// Buffer assignment: where each value of a scheduled program lives, decided before it runs.
//
// Note [Buffer assignment]
// A backend that has ordered its steps (the CPU executor's schedule: pairs, chains and groups
// included) describes them as a BufferProblem: the values with their bytes and kind, and for each
// step the values it reads and writes, which of its results may take a dying operand's storage
// (in place), and how many steps after it run at the same time (a region: a pair and its fillers,
// a chain, a group). AssignBuffers then decides, once:
//
//   * liveness: a value lives from the step that first writes it to the last step that reads it;
//     a value written or last read inside a region lives across the whole region, since its steps
//     overlap in time (released, as the executor releases, after the region);
//   * in place: a result takes an operand's storage when the operand dies at that step, is not
//     a constant, nothing else still uses its storage and the step allows it; the two values are
//     one buffer from then on. A result taking an argument's storage is decided when the program
//     runs (only a donated argument, one the caller gave up, may be written): the plan marks it
//     "if donated" and still gives the result storage of its own for when it is not;
//   * storage: a buffer holding a function result is allocated on its own (the caller keeps it);
//     one holding an argument or a constant is that; every other buffer is a range of one arena,
//     at a static offset chosen by placing the largest buffers first, each at the lowest offset
//     free over its whole lifetime (XLA's "global decreasing size, best fit" heap simulator,
//     first fit). The arena is allocated once and kept between runs.
//
// The plan also counts the peak of live value bytes exactly as the executor does while it runs
// (each value a kernel writes, from its write to its release; an in-place result and its operand
// both count during their step; arguments and constants not at all), so a test can hold the
// executor to it. `axle compile --emit=buffers` prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace axle::passes {

// Every arena buffer starts on a cache line (Note [Aligning by hand] in ir/literal.h) and takes
// its bytes rounded up to one.
inline constexpr int64_t kArenaAlign = 64;
inline int64_t ArenaAligned(int64_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

struct BufferProblem {
  struct Value {
    enum Kind { kTemp, kArgument, kConstant, kResult } kind = kTemp;
    int64_t bytes = 0;
    int64_t param = -1;  // kArgument: the parameter's index
    std::string name;    // for the plan's text ("%x", or "s12")
  };
  struct Step {
    std::vector<int> operands;  // values read (repeats allowed)
    std::vector<int> results;   // values written; a value may have several writers (views)
    // results[j] is operands[j] under another name (optimization_barrier): the same storage, not
    // counted again in live bytes.
    bool forward = false;
    // The step binds its result to an argument or a constant: storage the plan does not
    // allocate, not counted in live bytes.
    bool binds = false;
    // For each result (empty: none), the operand positions whose storage it may take in place
    // when that operand dies here, in order of preference.
    std::vector<std::vector<int>> in_place;
    // On a region's first step: how many steps (this one included) run at the same time.
    int region = 1;
  };
  std::vector<Value> values;
  std::vector<Step> steps;
  std::string title;  // the plan's first line: "@main for cpu-avx2-2t"
};

struct BufferPlan {
  enum class Storage { kArgument, kConstant, kArena, kOwn };
  struct Value {
    Storage storage = Storage::kArena;
    int buffer = -1;      // values of one buffer share storage (in place, forwarded)
    int64_t offset = -1;  // kArena: bytes from the arena's start (64-byte aligned)
    int begin = -1;       // first and last step of the value's life (region-widened); -1: never written
    int end = -1;
  };
  // A result's storage taken from an operand (Note [Buffer assignment]).
  struct Take {
    int operand = -1;        // position in the step's operands; -1: the result's own storage
    bool if_donated = false;  // the operand is an argument: only when the caller donated it
  };
  std::vector<Value> values;
  std::vector<std::vector<Take>> takes;  // [step][result]
  int64_t arena_bytes = 0;
  int64_t own_bytes = 0;        // buffers allocated on their own (function results)
  int64_t peak_live_bytes = 0;  // as the executor counts them (see the Note)
  int64_t temp_peak_bytes = 0;  // the most arena bytes live at once: the arena's lower bound
  int num_buffers = 0;
  int num_in_place = 0;  // takes decided here (not counting the "if donated" ones)
  int num_if_donated = 0;

  // One line of totals, then one line per buffer: its values, bytes, storage and life.
  std::string ToString(const BufferProblem& problem) const;
};

// Throws axle::Error on a malformed problem (a value read before any step writes it, an index
// out of range, a region past the end, an in-place candidate of another size).
BufferPlan AssignBuffers(const BufferProblem& problem);

// Checks `plan` against `problem`: no two buffers whose lives overlap share a byte of the arena,
// every take is legal. Returns "" or what is wrong (the buffer assignment tests).
std::string CheckBufferPlan(const BufferProblem& problem, const BufferPlan& plan);

}  // namespace axle::passes
