// The "compiled" backend (docs/compiler.md).
//
// Compile: clone the module, run the default pass pipeline (simplify, dot-transpose-fold, fold,
// cse, dce until a fixed point), partition the entry function into kernels (codegen/fusion.h), emit one C++
// translation unit for the fused kernels (codegen/emit_cpp.h), compile and dlopen it, going
// through the disk cache (codegen/jit.h). Execute: the cpu backend's planned executor
// (cpu_executor.h) runs the plan: a fused kernel calls its generated loop (split over the
// thread pool at kParallelElements elements and more; a reduction kernel's outputs in chunks of
// about kParallelElements operand elements), any other node runs the cpu executor's
// fast kernel for that node or the interpreter's, with the same liveness-based buffer reuse,
// in-place updates (a fused output takes the storage of a dying input read at the loop index)
// and donation of arguments.
#include "runtime/compiled_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "codegen/emit_cpp.h"
#include "codegen/fusion.h"
#include "codegen/jit.h"
#include "core/flags.h"
#include "ir/interpreter.h"
#include "passes/pass.h"
#include "runtime/cpu_executor.h"
#include "runtime/cpu_kernels.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

std::unique_ptr<Executable> CompileModule(const ir::Module& module, DiskCache* cache) {
  std::unique_ptr<ir::Module> m = module.Clone();
  if (m->entry() == nullptr) Fail("compiled backend: module @{} has no entry function", m->name());
  passes::RunDefaultPipeline(*m);
  if (flags::fast_math()) {  // rewrites that reassociate sums
    passes::CreatePass("split-reductions")->Run(*m);
    if (passes::CreatePass("scatter-accumulate")->Run(*m)) passes::CreatePass("dce")->Run(*m);
  }
  const ir::Function& f = *m->entry();
  std::vector<codegen::Kernel> kernels = codegen::FuseFunction(f);
  codegen::EmittedModule em = codegen::EmitCpp(kernels, {.exact_math = !flags::fast_math()});
  std::shared_ptr<codegen::JitLibrary> lib;
  CompileInfo info;
  if (const std::string dir = flags::dump_dir(); !dir.empty()) {
    // AXLE_DUMP_DIR: the generated translation unit and the kernel list, next to the passes' dumps.
    std::filesystem::create_directories(dir);
    const std::string base = fmt::format("{}/{}-{}", dir, m->name(), codegen::JitCacheKey(em.source).substr(3, 12));
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
    g.fn = reinterpret_cast<GeneratedKernel::Fn>(lib->Symbol(em.symbols[k]));
    g.elements = kern.num_elements;
    g.inputs = kern.inputs;
    g.outputs = kern.outputs;
    g.input_at_index = codegen::InputsReadAtIndex(kern);
    g.input_in_order = codegen::InputsReadInOrder(kern);
    g.first = kern.nodes[0];
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
    if (profile::Labeling())
      g.label = fmt::format("{} {}", codegen::DescribeKernel(kern), DTypeName(kern.outputs[0]->dtype()));
    items.push_back({nullptr, static_cast<int>(generated.size())});
    generated.push_back(std::move(g));
  }
  std::unique_ptr<Executable> exe =
      NewPlannedExecutable(std::move(m), std::move(items), std::move(generated), std::move(lib), "compiled");
  exe->set_compile_info(info);
  return exe;
}

class CompiledBackendImpl final : public Backend {
 public:
  explicit CompiledBackendImpl(DiskCache* cache, bool use_default)
      : cache_(cache), use_default_(use_default) {}
  std::string_view name() const override { return "compiled"; }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    DiskCache* c = use_default_ ? &DiskCache::Default() : cache_;
    return CompileModule(module, c);
  }

 private:
  DiskCache* cache_;
  bool use_default_;
};

}  // namespace

Backend& CompiledBackend() {
  static CompiledBackendImpl* b = new CompiledBackendImpl(nullptr, true);
  return *b;
}

std::unique_ptr<Backend> NewCompiledBackend(DiskCache* cache) {
  return std::make_unique<CompiledBackendImpl>(cache, false);
}

}  // namespace axle::runtime
