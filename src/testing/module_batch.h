// Batching of independent programs into one module, so that a backend with a large fixed cost
// per compile (the "compiled" backend runs the host C++ compiler once per module) checks many
// programs per compile. Used by the compiler's differential fuzz test
// (tests/codegen/compiler_fuzz_test.cc, docs/compiler.md "Differential fuzzing").
//
//   std::vector<const ir::Module*> programs = ...;          // each BatchableModule()
//   testing::ModuleBatch batch = testing::BatchModules(programs);
//   auto args = batch.ConcatArguments(per_program_args);    // one list for the batch's entry
//   auto out = backend.Compile(*batch.module)->Execute(Buffers(args));
//   auto per_program = batch.SplitResults(out);              // per_program[k]: program k's results
//
// The batch's entry function "main" holds a copy of every program's entry function, one after
// the other: program k's parameter i becomes parameter parts[k].first_parameter + i, and its
// results are the batch's results [parts[k].first_result, + num_results). Nothing connects the
// copies, so each computes exactly what it computes alone (no op of the IR has side effects or
// state besides collectives, which a batch refuses). Other functions of the programs are dropped:
// the IR has no call op, so only the entry function runs.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/error.h"
#include "ir/literal.h"
#include "ir/module.h"

namespace axle::testing {

// True when `m` can join a batch: one replica and no collective op in its entry function.
bool BatchableModule(const ir::Module& m);

struct ModuleBatch {
  struct Part {
    size_t first_parameter = 0;
    size_t num_parameters = 0;
    size_t first_result = 0;
    size_t num_results = 0;
  };
  std::unique_ptr<ir::Module> module;  // verifies (ir::Verify) when every program does
  std::vector<Part> parts;             // one per program, in input order

  // The batch's arguments: every program's arguments in program order. args.size() must equal
  // parts.size() and args[k] must have parts[k].num_parameters literals.
  std::vector<ir::Literal> ConcatArguments(const std::vector<std::vector<ir::Literal>>& args) const;

  // The batch's results split per program (results.size() must be the batch's result count).
  template <typename T>
  std::vector<std::vector<T>> SplitResults(const std::vector<T>& results) const {
    AXLE_CHECK(results.size() == NumResults(), "SplitResults: {} results, the batch has {}",
               results.size(), NumResults());
    std::vector<std::vector<T>> out;
    for (const Part& p : parts)
      out.emplace_back(results.begin() + p.first_result,
                       results.begin() + p.first_result + p.num_results);
    return out;
  }

  size_t NumParameters() const { return parts.empty() ? 0 : parts.back().first_parameter + parts.back().num_parameters; }
  size_t NumResults() const { return parts.empty() ? 0 : parts.back().first_result + parts.back().num_results; }
};

// Merges the entry functions of `programs` into one module (see above). Throws axle::Error when
// a program is not BatchableModule. Value names, shardings and locations are kept.
ModuleBatch BatchModules(const std::vector<const ir::Module*>& programs);

}  // namespace axle::testing
