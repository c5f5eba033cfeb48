#include "testing/op_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <memory>

#include "backends/cpu/emit_cpp.h"
#include "backends/registry.h"
#include "core/flags.h"
#include "runtime/devices.h"
#include "testing/module_batch.h"

namespace axle::testing {
namespace {

using ir::Literal;
using ir::OpKind;
using ir::samples::OpSample;
using runtime::BufferPtr;

// Samples a batch of the compiled backend holds: one translation unit of a few hundred loops
// compiles in seconds, where one compile a sample would take minutes for the table.
constexpr size_t kBatch = 96;

std::vector<BufferPtr> Buffers(const std::vector<Literal>& literals) {
  std::vector<BufferPtr> out;
  for (const Literal& l : literals) out.push_back(std::make_shared<Literal>(l));
  return out;
}

// Compares a sample's results on one replica; empty when they match.
std::string Compare(const OpSample& s, size_t replica, const std::vector<BufferPtr>& got, int64_t ulps) {
  const std::vector<Literal>& want = s.expected.at(replica);
  if (got.size() != want.size())
    return fmt::format("replica {}: {} results, expected {}", replica, got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    const std::string diff = ir::samples::CompareLiterals(*got[r], want[r], ulps);
    if (!diff.empty()) return s.num_replicas() > 1 ? fmt::format("replica {}, result {}: {}", replica, r, diff)
                                                   : fmt::format("result {}: {}", r, diff);
  }
  return {};
}

// Runs one sample alone (its own module, compiled for its replicas).
std::string RunOne(runtime::Backend& backend, const OpSample& s, int64_t ulps) {
  try {
    std::unique_ptr<ir::Module> m = ir::samples::BuildSampleModule(s);
    if (s.num_replicas() == 1) return Compare(s, 0, backend.Compile(*m)->Execute(Buffers(s.operands[0])), ulps);
    auto exe = runtime::ReplicatedExecutable::Compile(backend, *m);
    std::vector<std::vector<BufferPtr>> args;
    for (const auto& ops : s.operands) args.push_back(Buffers(ops));
    const std::vector<std::vector<BufferPtr>> got = exe->Execute(std::move(args));
    for (size_t r = 0; r < got.size(); ++r)
      if (std::string e = Compare(s, r, got[r], ulps); !e.empty()) return e;
    return {};
  } catch (const std::exception& e) {
    return fmt::format("threw: {}", e.what());
  }
}

// Runs `batch` (single-replica samples) as one module (testing/module_batch.h). Returns false
// when the module failed to compile or run (the caller then runs the samples one by one).
bool RunBatch(runtime::Backend& backend, const std::vector<SampleOutcome*>& batch) {
  try {
    std::vector<std::unique_ptr<ir::Module>> modules;
    std::vector<const ir::Module*> programs;
    std::vector<std::vector<Literal>> args;
    for (SampleOutcome* o : batch) {
      modules.push_back(ir::samples::BuildSampleModule(*o->sample));
      programs.push_back(modules.back().get());
      args.push_back(o->sample->operands[0]);
    }
    const ModuleBatch b = BatchModules(programs);
    const std::vector<BufferPtr> got = backend.Compile(*b.module)->Execute(Buffers(b.ConcatArguments(args)));
    const std::vector<std::vector<BufferPtr>> per_sample = b.SplitResults(got);
    for (size_t k = 0; k < batch.size(); ++k)
      batch[k]->error = Compare(*batch[k]->sample, 0, per_sample[k], batch[k]->ulps);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int OpCheckReport::failures() const {
  return static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(), [](const SampleOutcome& o) { return !o.error.empty(); }));
}

int64_t ExtraUlps(const std::string& backend, bool fast_math, const OpSample& sample) {
  if (backend != "compiled" || !fast_math) return 0;
  const bool f32 = std::any_of(sample.expected.begin(), sample.expected.end(), [](const std::vector<Literal>& r) {
    return std::any_of(r.begin(), r.end(), [](const Literal& l) { return l.dtype() == DType::kF32; });
  });
  if (!f32) return 0;
  return static_cast<int64_t>(std::ceil(codegen::FastMathUlpBound(sample.op)));
}

OpCheckReport CheckOpSamples(const std::string& backend_name) {
  ir::samples::RegisterSampleCustomCalls();
  runtime::Backend& backend = runtime::GetBackend(backend_name);
  OpCheckReport report;
  report.backend = backend_name;
  report.fast_math = flags::fast_math();
  int64_t replicas = 1;
  for (const OpSample& s : ir::samples::AllOpSamples()) {
    report.outcomes.push_back({&s, s.ulps + ExtraUlps(backend_name, report.fast_math, s), {}});
    replicas = std::max(replicas, s.num_replicas());
  }
  if (flags::cpu_devices() < replicas) flags::set_cpu_devices(replicas);
  std::vector<SampleOutcome*> batch;
  auto flush = [&] {
    if (!batch.empty() && !RunBatch(backend, batch))
      for (SampleOutcome* o : batch) o->error = RunOne(backend, *o->sample, o->ulps);
    batch.clear();
  };
  for (SampleOutcome& o : report.outcomes) {
    if (backend_name == "compiled" && o.sample->num_replicas() == 1 && !ir::GetOpInfo(o.sample->op).Has(ir::kCollective)) {
      batch.push_back(&o);
      if (batch.size() == kBatch) flush();
    } else {
      o.error = RunOne(backend, *o.sample, o.ulps);
    }
  }
  flush();
  return report;
}

std::string FormatOpTable(const std::vector<OpCheckReport>& reports) {
  struct Cell {
    int run = 0, passed = 0;
  };
  std::map<std::string, std::vector<Cell>> rows;  // by op name
  for (size_t b = 0; b < reports.size(); ++b)
    for (const SampleOutcome& o : reports[b].outcomes) {
      std::vector<Cell>& row = rows[std::string(ir::OpName(o.sample->op))];
      row.resize(reports.size());
      ++row[b].run;
      row[b].passed += o.error.empty() ? 1 : 0;
    }
  std::string out = fmt::format("{:<22}", "op");
  for (const OpCheckReport& r : reports)
    out += fmt::format(" {:>14}", r.backend == "compiled" && r.fast_math ? "compiled (fast)" : r.backend);
  out += "\n";
  for (const auto& [op, cells] : rows) {
    out += fmt::format("{:<22}", op);
    for (const Cell& c : cells)
      out += fmt::format(" {:>14}", c.passed == c.run ? fmt::format("{}", c.run) : fmt::format("FAIL {}/{}", c.passed, c.run));
    out += "\n";
  }
  int passed = 0, failed = 0;
  for (const OpCheckReport& r : reports)
    for (const SampleOutcome& o : r.outcomes) {
      if (o.error.empty()) {
        ++passed;
        continue;
      }
      ++failed;
      out += fmt::format("FAILED {} on {} (within {} ulp): {}\n", o.sample->name, r.backend, o.ulps, o.error);
    }
  out += fmt::format("{} ops, {} samples, {} backends\n", rows.size(),
                     reports.empty() ? 0 : reports[0].outcomes.size(), reports.size());
  out += fmt::format("{} passed, {} failed\n", passed, failed);
  return out;
}

}  // namespace axle::testing
