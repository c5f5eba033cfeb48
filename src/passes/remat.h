// The remat pass's view of memory (Note [Rematerialization under a budget], remat.cc): a memory
// model tells it, for a fused module, when each node runs and which bytes are in use meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "passes/pass.h"

namespace axle::passes {

// Note [Memory models]
// The budget holds what a backend allocates for a step, which depends on how it runs it: the CPU
// backend's schedule reorders kernels, runs pairs, chains and groups of them at once (their
// values live across the whole region), writes results over dying operands and places every
// buffer in one arena (Note [Buffer assignment]). A pass that counted liveness in node order
// missed all of that: on GPT-2 small at 8 x 256 it met a 60 MB budget in its count while the plan
// made afterwards allocated 90 MB. So a backend registers its model, which plans the module as
// the backend will run it and reports, in the backend's own time (steps), the bytes in use and
// the life of each value it places; the pass reads only that. Targets without a model get
// EstimateMemory: node order, every non-argument value from its node to its last user.
struct MemoryProfile {
  std::vector<int64_t> live;                           // bytes in use during each step
  std::unordered_map<const ir::Node*, int64_t> time;  // the step each entry node runs in
  // The values the budget counts: the first and last step of their storage's use.
  std::unordered_map<const ir::Value*, std::pair<int64_t, int64_t>> life;
  int64_t peak = 0;      // max(live)
  int64_t peak_at = 0;   // its first step
  int64_t allocated = 0; // what the budget holds (the CPU backend: its arena); >= peak

  // Sets live, peak and peak_at from delta[t]: the bytes that come into use at step t minus those
  // that went out of use after step t - 1 (one entry a step, and one past the last).
  void SumLive(const std::vector<int64_t>& delta);
};

// Plans `module` (a fused module, the entry scheduled or not) as a backend runs it for
// context.target (in context.fast_math or not).
using MemoryModel = std::function<MemoryProfile(const ir::Module& module, const PassContext& context)>;

// Registers the model for targets of `kind` ("cpu"); a later registration replaces it.
void RegisterMemoryModel(std::string_view kind, MemoryModel model);

// The model registered for `kind`, else EstimateMemory.
MemoryModel MemoryModelFor(std::string_view kind);

// Node order, each value from its node to its last user (arguments, constants and the function's
// results, which live outside the arena, not counted); allocated = peak.
MemoryProfile EstimateMemory(const ir::Module& module, const PassContext& context = {});

}  // namespace axle::passes
