// Every backend against the oracle, op by op (`axle test-ops`; ggml's test-backend-ops).
//
// Each sample of the op-sample table (op_samples.h: every op, edge shapes, every dtype the op
// accepts, NaN / inf / -0) runs on a backend and is compared with its expected results, whose
// values never came from a backend. A backend passes a sample when every result has the expected
// type and its elements are within the sample's ulps, widened only where the backend documents an
// approximation (the compiled backend's fast-math functions, docs/compiler.md).
#pragma once

#include <string>
#include <vector>

#include "testing/op_samples.h"

namespace axle::testing {

struct SampleOutcome {
  const ir::samples::OpSample* sample = nullptr;
  int64_t ulps = 0;   // the tolerance it was checked with
  std::string error;  // empty: passed
};

struct OpCheckReport {
  std::string backend;
  bool fast_math = false;  // the compiled backend's setting when it ran
  std::vector<SampleOutcome> outcomes;
  int failures() const;
};

// The extra ulps a backend may be off by on `sample` beyond the sample's own: for the compiled
// backend's fast-math f32 functions, codegen::FastMathUlpBound rounded up (exp, log, sin, cos 1,
// log1p 2, logistic 3, tanh 5, erf 8); 0 elsewhere.
int64_t ExtraUlps(const std::string& backend, bool fast_math, const ir::samples::OpSample& sample);

// Runs every sample on the backend registered as `backend` ("interpreter", "cpu", "compiled").
// Collective samples run on virtual devices (flags::cpu_devices is raised to the largest replica
// count). The compiled backend compiles the samples in batches (one generated translation unit
// for many samples, as one native compile per sample would take minutes); a batch that fails to
// compile or run is run again sample by sample, so a failure names its sample. Never throws for
// a failing sample: its error is in the report.
OpCheckReport CheckOpSamples(const std::string& backend);

// The op x backend table: one row per op with each backend's passed / run counts, then every
// failure with its sample, backend and difference, then a summary line ("N passed, M failed").
std::string FormatOpTable(const std::vector<OpCheckReport>& reports);

}  // namespace axle::testing
