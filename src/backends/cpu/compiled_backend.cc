// The "compiled" backend (docs/compiler.md).
//
// Compile: clone the module, run the compiler's pipeline for the backend's target
// (passes::BuildPipeline: the default passes to a fixed point, then the fast-math rewrites),
// partition the entry function into kernels (codegen/fusion.h), emit one C++
// translation unit for the fused kernels (backends/cpu/emit_cpp.h), compile and dlopen it, going
// through the disk cache (backends/cpu/jit.h). Execute: the cpu backend's planned executor
// (executor.h) runs the plan: a fused kernel calls its generated loop (split over the
// thread pool at kParallelElements elements and more; a reduction kernel's outputs in chunks of
// about kParallelElements operand elements), any other node runs the cpu executor's
// fast kernel for that node or the interpreter's, with the same liveness-based buffer reuse,
// in-place updates (a fused output takes the storage of a dying input read at the loop index)
// and donation of arguments.
#include "backends/cpu/compiled_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "backends/cpu/blas.h"
#include "backends/cpu/emit_cpp.h"
#include "backends/cpu/executor.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "codegen/fusion.h"
#include "codegen/passes.h"
#include "passes/remat.h"
#include "core/flags.h"
#include "ir/hash.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

// The module after the pipeline, its kernels and their generated C++: everything before the
// native compile.
struct Lowered {
  std::unique_ptr<ir::Module> module;
  std::vector<codegen::Kernel> kernels;
  codegen::EmittedModule emitted;
};

// Note [A warm start skips the pipeline]
// A new process compiling a module it compiled before used to run the whole pipeline again and
// found only the native code in the disk cache. Now the module the pipeline produced is cached
// too, as text (the IR round-trips through its printer and parser), keyed by the traced module's
// structural hash, the target and the fast-math setting (and, through DiskCache::MakeKey, the
// build, so a changed pass never reads an old result). The hash ignores value names and the order
// of independent nodes, as the frontend's executable cache does: modules it calls equal compute
// the same values, so they may share one optimized module. The cached module is the scheduled
// one (the pipeline ends with `schedule`, Note [Reading a schedule]: fusion, order, regions,
// views and buffers), so a warm start neither fuses nor plans. An entry that does not parse or verify is a warning and a miss, never a crash or a
// wrong module.
std::unique_ptr<ir::Module> Optimize(const ir::Module& module, const passes::Target& target, bool fast_math,
                                     DiskCache* cache, CompileInfo* info) {
  // A scheduled module is the pipeline's output already (Note [Reading a schedule]): it runs as
  // written, its schedule checked by the executor, and no pass runs.
  if (!module.scheduled_for().empty()) return module.Clone();
  for (const auto& f : module.functions())
    for (const auto& n : f->nodes())
      if (!n->schedule().empty())
        Fail("{}:{}: {} has sched{{...}} entries, but module @{} has no schedule=\"TARGET\" attribute saying whose "
             "they are: add the target it was scheduled for (as axle opt --passes=schedule writes it), or remove them",
             n->loc().file.empty() ? "<module>" : n->loc().file, n->loc().line, n->name(), module.name());
  const int64_t budget = flags::memory_budget();
  const std::string key = cache == nullptr ? "" : OptimizedModuleKey(module, target, fast_math);
  if (cache != nullptr) {
    if (std::optional<std::string> text = cache->Get(key)) {
      try {
        std::unique_ptr<ir::Module> m = ir::ParseModule(*text, "<disk cache: optimized module>");
        ir::Verify(*m);
        if (m->entry() == nullptr) Fail("no entry function");
        if (info != nullptr) info->pipeline_cached = true;
        return m;
      } catch (const Error& e) {
        std::fprintf(stderr, "axle: warning: disk cache: the optimized module of @%s does not load (%s); running the pipeline\n",
                     std::string(module.name()).c_str(), e.what());
      }
    }
  }
  std::unique_ptr<ir::Module> m = module.Clone();
  codegen::RegisterPasses();
  RegisterCpuPasses();
  passes::BuildPipeline(target, PipelineOptionsFor(fast_math, budget)).Run(*m);
  if (cache != nullptr) cache->Put(key, ir::PrintModule(*m));
  return m;
}

Lowered Lower(const ir::Module& module, const passes::Target& target, bool fast_math, DiskCache* cache = nullptr,
              CompileInfo* info = nullptr) {
  if (module.entry() == nullptr) Fail("compiled backend: module @{} has no entry function", module.name());
  Lowered out;
  out.module = Optimize(module, target, fast_math, cache, info);
  out.kernels = codegen::KernelsOf(*out.module->entry());
  out.emitted = codegen::EmitCpp(out.kernels, {.exact_math = !fast_math});
  return out;
}

// Stands in for a generated kernel's code in an executable that is only described (the plan
// treats a kernel without code as one it cannot run, so it must have some).
void NotCompiled(const void* const*, void* const*, int64_t, int64_t) {
  Fail("compiled backend: this executable was planned to describe its schedule; its kernels were never compiled");
}

// The executable running `lowered`'s kernels from `lib` (null: every generated kernel runs
// NotCompiled, for a schedule that is printed and never run).
std::unique_ptr<Executable> Assemble(Lowered lowered, std::shared_ptr<codegen::JitLibrary> lib,
                                     const passes::Target& target) {
  const ir::Function& f = *lowered.module->entry();
  const std::vector<codegen::Kernel>& kernels = lowered.kernels;
  const codegen::EmittedModule& em = lowered.emitted;
  // Parameters and constants bind first; then the kernels in their order.
  std::vector<PlanItem> items;
  for (const auto& n : f.nodes())
    if (n->op() == OpKind::kParameter || n->op() == OpKind::kConstant) items.push_back({n.get(), -1});
  std::vector<GeneratedKernel> generated;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const codegen::Kernel& kern = kernels[k];
    if (!kern.fused) {
      items.push_back({kern.nodes[0], -1});
      continue;
    }
    GeneratedKernel g;
    g.fn = lib != nullptr ? reinterpret_cast<GeneratedKernel::Fn>(lib->Symbol(em.symbols[k])) : &NotCompiled;
    g.elements = kern.num_elements;
    for (size_t j = 0; j < kern.inputs.size(); ++j) g.inputs.push_back(codegen::OuterInput(kern, j));
    for (size_t j = 0; j < kern.outputs.size(); ++j) g.outputs.push_back(codegen::OuterOutput(kern, j));
    g.body_inputs = kern.inputs;
    g.body_outputs = kern.outputs;
    g.input_at_index = codegen::InputsReadAtIndex(kern);
    g.input_in_order = codegen::InputsReadInOrder(kern);
    g.first = kern.fusion != nullptr ? kern.fusion : kern.nodes[0];
    g.is_copy = kern.inputs.size() == 1 && kern.outputs.size() == 1 &&
                std::all_of(kern.nodes.begin(), kern.nodes.end(),
                            [](const Node* n) { return n->op() == OpKind::kReshape; });
    // A reduction kernel's element (one output) is a loop over `reduced` operand elements; a row
    // kernel's (one row) is one or more such loops.
    if (kern.reduce != nullptr || codegen::IsRowKernel(kern))
      g.min_chunk = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(kern.reduced, 1));
    g.row_blocks = em.row_blocks[k];
    if (g.row_blocks > 1)  // the pool splits the blocks: all of them, or none when the sum is small
      g.min_chunk = kern.reduced * kern.num_elements >= kParallelElements ? 1 : g.row_blocks + 1;
    else if (kern.reduce != nullptr && kern.column)
      g.chunks_per_thread = 1;
    g.reduction = kern.reduce != nullptr || codegen::IsRowKernel(kern);
    g.name = codegen::DescribeKernel(kern);
    if (profile::Labeling()) g.label = fmt::format("{} {}", g.name, DTypeName(kern.outputs[0]->dtype()));
    items.push_back({nullptr, static_cast<int>(generated.size())});
    generated.push_back(std::move(g));
  }
  return NewPlannedExecutable(std::move(lowered.module), std::move(items), std::move(generated), std::move(lib),
                              "compiled", target);
}

std::unique_ptr<Executable> CompileModule(const ir::Module& module, DiskCache* cache, const passes::Target& target) {
  CompileInfo info;
  Lowered lowered = Lower(module, target, flags::fast_math(), cache, &info);
  const std::vector<codegen::Kernel>& kernels = lowered.kernels;
  const codegen::EmittedModule& em = lowered.emitted;
  std::shared_ptr<codegen::JitLibrary> lib;
  // AXLE_DUMP_DIR: the generated translation unit, the kernel list and the schedule, next to the
  // passes' dumps.
  std::string dump_base;
  if (const std::string dir = flags::dump_dir(); !dir.empty()) {
    std::filesystem::create_directories(dir);
    dump_base = fmt::format("{}/{}-{}", dir, lowered.module->name(), codegen::JitCacheKey(em.source).substr(3, 12));
    const std::string& base = dump_base;
    std::ofstream(base + ".cc", std::ios::binary) << em.source;
    std::ofstream(base + ".kernels.txt", std::ios::binary) << codegen::DescribeKernels(kernels) << "\n";
  }
  const bool any_fused = std::any_of(kernels.begin(), kernels.end(), [](const auto& k) { return k.fused; });
  if (any_fused) {
    codegen::BlobCache bc;
    if (cache != nullptr) {
      bc.get = [cache](const std::string& key) { return cache->Get(DiskCache::MakeKey(key)); };
      bc.put = [cache](const std::string& key, const std::string& blob) { cache->Put(DiskCache::MakeKey(key), blob); };
    }
    const auto t0 = std::chrono::steady_clock::now();
    lib = codegen::CompileAndLoad(em.source, cache ? &bc : nullptr, &info.disk_hit);
    if (!info.disk_hit)
      info.native_compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else if (cache != nullptr) {
    // No native code: an empty entry records that this module's compile result is known, so a
    // warm process reports every executable as a disk hit and compiles nothing.
    const std::string key = DiskCache::MakeKey(codegen::JitCacheKey(em.source) + "-none");
    info.disk_hit = cache->Get(key).has_value();
    if (!info.disk_hit) cache->Put(key, "");
  }
  std::unique_ptr<Executable> exe = Assemble(std::move(lowered), std::move(lib), target);
  exe->set_compile_info(info);
  if (!dump_base.empty()) {
    std::ofstream(dump_base + ".schedule.txt", std::ios::binary) << exe->DescribeSchedule();
    std::ofstream(dump_base + ".buffers.txt", std::ios::binary) << exe->DescribeBuffers();
  }
  return exe;
}

class CompiledBackendImpl final : public Backend {
 public:
  CompiledBackendImpl(DiskCache* cache, bool use_default, const passes::Target& target)
      : cache_(cache), use_default_(use_default), target_(target) {}
  std::string_view name() const override { return "compiled"; }
  std::string Describe() const override { return cpu::DescribeBlas(); }
  const passes::Target& target() const override { return target_; }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    DiskCache* c = use_default_ ? &DiskCache::Default() : cache_;
    return CompileModule(module, c, target_);
  }

 private:
  DiskCache* cache_;
  bool use_default_;
  passes::Target target_;
};

}  // namespace

bool NativeBf16Products() { return cpu::Blas().dnnl_gemm_bf16 != nullptr; }

std::string OptimizedModuleKey(const ir::Module& module, const passes::Target& target, bool fast_math) {
  const int64_t budget = flags::memory_budget();
  return DiskCache::MakeKey(fmt::format("ir-{}-{}-{}{}{}", ir::HashModule(module).ToHex(), target.ToString(),
                                        fast_math ? "fast" : "exact",
                                        budget > 0 ? fmt::format("-budget{}", budget) : "",
                                        NativeBf16Products() ? "-bf16" : ""));
}

passes::PipelineOptions PipelineOptionsFor(bool fast_math, int64_t memory_budget) {
  return {.fast_math = fast_math,
          .fuse = true,
          .schedule = true,
          .memory_budget = memory_budget,
          .widen_half_products = true,
          .native_bf16_products = NativeBf16Products()};
}


Backend& CompiledBackend() {
  static CompiledBackendImpl* b = new CompiledBackendImpl(nullptr, true, passes::Target::Host());
  return *b;
}

std::unique_ptr<Backend> NewCompiledBackend(DiskCache* cache, const passes::Target& target) {
  return std::make_unique<CompiledBackendImpl>(cache, false, target);
}

CompiledStages DescribeCompiledStages(const ir::Module& module, const passes::Target& target, bool fast_math) {
  CompiledStages out;
  out.pipeline = module.scheduled_for().empty()
                     ? passes::BuildPipeline(target, PipelineOptionsFor(fast_math, flags::memory_budget())).ToString()
                     : fmt::format("none: @{} is scheduled for {} already and compiles as written\n", module.name(),
                                   module.scheduled_for());
  Lowered lowered = Lower(module, target, fast_math);
  const size_t nodes = lowered.module->entry()->nodes().size();
  out.ir = ir::PrintModule(*lowered.module);
  out.kernels = codegen::DescribeKernels(lowered.kernels);
  out.cpp = lowered.emitted.source;
  const std::unique_ptr<Executable> exe = Assemble(std::move(lowered), nullptr, target);
  out.schedule = exe->DescribeSchedule();
  out.buffers = exe->DescribeBuffers();
  if (const int64_t budget = flags::memory_budget(); budget > 0 && module.scheduled_for().empty()) {
    // The plan without the budget, for the line that says what the remat pass did.
    flags::set_memory_budget(0);
    std::unique_ptr<Executable> plain;
    size_t plain_nodes = 0;
    try {
      Lowered l = Lower(module, target, fast_math);
      plain_nodes = l.module->entry()->nodes().size();
      plain = Assemble(std::move(l), nullptr, target);
    } catch (...) {
      flags::set_memory_budget(budget);
      throw;
    }
    flags::set_memory_budget(budget);
    const passes::BufferPlan &with = *BuffersOf(*exe).plan, &without = *BuffersOf(*plain).plan;
    auto mb = [](int64_t b) { return static_cast<double>(b) / 1e6; };
    out.buffers = fmt::format(
        "remat under a memory budget of {:.1f} MB: arena {:.1f} MB ({:.1f} MB in use at once) without it, {:.1f} MB "
        "({:.1f} MB) with it; {} kernels recomputed\n",
        mb(budget), mb(without.arena_bytes), mb(without.temp_peak_bytes), mb(with.arena_bytes), mb(with.temp_peak_bytes),
        static_cast<int64_t>(nodes) - static_cast<int64_t>(plain_nodes)) + out.buffers;
  }
  return out;
}

void ScheduleFusedModule(ir::Module& module, const passes::Target& target, bool fast_math) {
  if (module.entry() == nullptr) Fail("schedule: module @{} has no entry function", module.name());
  Lowered lowered;
  lowered.module = module.Clone();
  lowered.kernels = codegen::KernelsOf(*lowered.module->entry());
  lowered.emitted = codegen::EmitCpp(lowered.kernels, {.exact_math = !fast_math});
  const std::unique_ptr<Executable> exe = Assemble(std::move(lowered), nullptr, target);
  internal::WriteSchedule(*exe, module);
}

passes::MemoryProfile ProfileFusedModule(const ir::Module& module, const passes::Target& target, bool fast_math) {
  if (module.entry() == nullptr) Fail("remat: module @{} has no entry function", module.name());
  // Planned as the schedule pass plans it: a module carrying a schedule from an earlier pass is
  // planned afresh, not read.
  Lowered lowered;
  lowered.module = module.Clone();
  lowered.module->set_scheduled_for("");
  for (const auto& f : lowered.module->functions())
    for (const auto& n : f->nodes()) n->set_schedule({});
  lowered.kernels = codegen::KernelsOf(*lowered.module->entry());
  lowered.emitted = codegen::EmitCpp(lowered.kernels, {.exact_math = !fast_math});
  const std::unique_ptr<Executable> exe = Assemble(std::move(lowered), nullptr, target);
  return internal::ProfileMemory(*exe, *module.entry());
}

}  // namespace axle::runtime
