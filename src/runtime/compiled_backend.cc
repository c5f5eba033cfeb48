// The "compiled" backend (docs/compiler.md).
//
// Compile: clone the module, run the default pass pipeline (simplify, fold, cse, dce until a
// fixed point), partition the entry function into kernels (codegen/fusion.h), emit one C++
// translation unit for the fused kernels (codegen/emit_cpp.h), compile and dlopen it, going
// through the disk cache (codegen/jit.h). Execute: bind parameters and constants, then run the
// kernels in order: a fused kernel calls its generated loop (split over the thread pool at
// kParallelElements elements and more); any other node runs the cpu executor's fast kernel for
// that node (cpu_kernels.h) or, when there is none, the interpreter's kernel (ir::EvaluateNode),
// exactly as the cpu backend does. Every value is freed after the last kernel that reads it
// (results and arguments are never written). No in-place reuse or donation yet.
#include "runtime/compiled_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "codegen/emit_cpp.h"
#include "core/flags.h"
#include "codegen/fusion.h"
#include "codegen/jit.h"
#include "ir/interpreter.h"
#include "passes/pass.h"
#include "runtime/cpu_kernels.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

using KernelFn = void (*)(const void* const*, void* const*, int64_t, int64_t);

struct Step {
  enum Kind { kFused, kNode, kForward } kind = kNode;
  const Node* node = nullptr;  // kNode / kForward
  KernelFn fn = nullptr;       // kFused
  int64_t elements = 0;
  cpu::KernelChoice choice;
  std::vector<int> inputs, outputs, release;
  std::string label;  // AXLE_PROFILE only
};

class CompiledExecutable final : public Executable {
 public:
  CompiledExecutable(const ir::Module& module, DiskCache* cache) : module_(module.Clone()) {
    if (module_->entry() == nullptr)
      Fail("compiled backend: module @{} has no entry function", module_->name());
    passes::RunDefaultPipeline(*module_);
    f_ = module_->entry();
    Plan(cache);
  }

  std::vector<BufferPtr> Execute(std::vector<BufferPtr> args) override;
  ExecuteStats last_stats() const override { return stats_; }

 private:
  void Plan(DiskCache* cache);

  std::unique_ptr<ir::Module> module_;
  const ir::Function* f_ = nullptr;
  std::shared_ptr<codegen::JitLibrary> lib_;
  std::vector<Step> steps_;
  std::vector<ir::TensorType> slot_types_;
  std::vector<std::pair<int, int64_t>> params_;  // slot, argument index
  std::vector<std::pair<int, std::shared_ptr<Literal>>> constants_;
  std::vector<ir::TensorType> param_types_;
  std::vector<int> result_slots_;
  ExecuteStats stats_;
};

void CompiledExecutable::Plan(DiskCache* cache) {
  std::unordered_map<const Value*, int> slot;
  auto slot_of = [&](const Value* v) {
    auto it = slot.find(v);
    if (it != slot.end()) return it->second;
    const int s = static_cast<int>(slot_types_.size());
    slot_types_.push_back(v->type());
    slot[v] = s;
    return s;
  };
  const std::vector<Node*> params = f_->Parameters();
  param_types_.resize(params.size());
  for (const Node* p : params) {
    const int64_t i = p->attrs_as<ir::ParameterAttrs>().index;
    if (i < 0 || i >= static_cast<int64_t>(params.size()))
      Fail("@{}: parameter index {} out of range", f_->name(), i);
    param_types_[static_cast<size_t>(i)] = p->result()->type();
    params_.emplace_back(slot_of(p->result()), i);
  }
  for (const auto& n : f_->nodes()) {
    if (n->info().traits & ir::kCollective)
      Fail("@{}: {}: the compiled backend runs one replica and has no collectives", f_->name(), n->name());
    if (n->op() == OpKind::kConstant)
      constants_.emplace_back(slot_of(n->result()),
                              std::make_shared<Literal>(n->attrs_as<ir::ConstantAttrs>().value));
  }
  std::vector<codegen::Kernel> kernels = codegen::FuseFunction(*f_);
  codegen::EmittedModule em = codegen::EmitCpp(kernels, {.exact_math = !flags::fast_math()});
  const bool any_fused = std::any_of(kernels.begin(), kernels.end(), [](const auto& k) { return k.fused; });
  if (any_fused) {
    codegen::BlobCache bc;
    if (cache != nullptr) {
      bc.get = [cache](const std::string& key) { return cache->Get(DiskCache::MakeKey(key)); };
      bc.put = [cache](const std::string& key, const std::string& blob) { cache->Put(DiskCache::MakeKey(key), blob); };
    }
    lib_ = codegen::CompileAndLoad(em.source, cache ? &bc : nullptr);
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    const codegen::Kernel& kern = kernels[k];
    Step st;
    for (const Value* v : kern.inputs) st.inputs.push_back(slot_of(v));
    for (const Value* v : kern.outputs) st.outputs.push_back(slot_of(v));
    if (kern.fused) {
      st.kind = Step::kFused;
      st.fn = reinterpret_cast<KernelFn>(lib_->Symbol(em.symbols[k]));
      st.elements = kern.num_elements;
    } else {
      st.node = kern.nodes[0];
      // A non-fused kernel's operands in node order (its inputs are deduplicated).
      st.inputs.clear();
      for (const Value* v : st.node->operands()) st.inputs.push_back(slot_of(v));
      st.outputs.clear();
      for (const Value* v : st.node->results()) st.outputs.push_back(slot_of(v));
      if (st.node->op() == OpKind::kOptimizationBarrier) {
        st.kind = Step::kForward;
      } else {
        st.kind = Step::kNode;
        if (st.node->num_results() == 1) st.choice = cpu::SelectKernel(*st.node);
        if (!st.choice.fn && !ir::HasInterpreterKernel(st.node->op()))
          Fail("@{}: no cpu or interpreter kernel for op {}", f_->name(), st.node->name());
      }
    }
    if (profile::Enabled()) {
      if (kern.fused) {
        std::vector<std::string> names;
        for (const Node* n : kern.nodes) names.emplace_back(n->name());
        st.label = fmt::format("fused{{{}}}[{}] {}", fmt::join(names, ","), kern.num_elements,
                               DTypeName(kern.outputs[0]->dtype()));
      } else {
        st.label = profile::NodeLabel(*st.node);
      }
    }
    steps_.push_back(std::move(st));
  }
  for (const Value* v : f_->results()) result_slots_.push_back(slot_of(v));
  // Liveness: free each slot after the last step that reads it (never results).
  std::vector<int> last(slot_types_.size(), -1);
  for (size_t k = 0; k < steps_.size(); ++k)
    for (int s : steps_[k].inputs) last[static_cast<size_t>(s)] = static_cast<int>(k);
  for (int s : result_slots_) last[static_cast<size_t>(s)] = -2;
  for (size_t s = 0; s < last.size(); ++s)
    if (last[s] >= 0) steps_[static_cast<size_t>(last[s])].release.push_back(static_cast<int>(s));
}

std::vector<BufferPtr> CompiledExecutable::Execute(std::vector<BufferPtr> args) {
  if (args.size() != param_types_.size())
    Fail("@{}: expected {} arguments, got {}", f_->name(), param_types_.size(), args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    if (!args[k]) Fail("@{}: argument {} is null", f_->name(), k);
    if (args[k]->type() != param_types_[k])
      Fail("@{}: argument {} has type {}, but parameter {} expects {}", f_->name(), k,
           args[k]->type().ToString(), k, param_types_[k].ToString());
  }
  stats_ = {};
  std::vector<BufferPtr> slots(slot_types_.size());
  for (const auto& [s, i] : params_) slots[static_cast<size_t>(s)] = args[static_cast<size_t>(i)];
  for (const auto& [s, lit] : constants_) slots[static_cast<size_t>(s)] = lit;
  int64_t live = 0;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<const Literal*> ops;
  const bool profiling = profile::Enabled();
  for (const Step& st : steps_) {
    const auto t0 = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    switch (st.kind) {
      case Step::kForward:
        for (size_t j = 0; j < st.outputs.size(); ++j)
          slots[static_cast<size_t>(st.outputs[j])] = slots[static_cast<size_t>(st.inputs[j])];
        break;
      case Step::kFused: {
        ++stats_.kernels_run;
        in.clear();
        out.clear();
        for (int s : st.inputs) in.push_back(slots[static_cast<size_t>(s)]->bytes().data());
        for (int s : st.outputs) {
          auto b = std::make_shared<Literal>(slot_types_[static_cast<size_t>(s)]);
          live += b->type().ByteSize();
          out.push_back(b->mutable_bytes().data());
          slots[static_cast<size_t>(s)] = std::move(b);
        }
        KernelFn fn = st.fn;
        const void* const* pin = in.data();
        void* const* pout = out.data();
        if (st.elements >= kParallelElements) {
          ThreadPool::Global().ParallelFor(st.elements, kParallelElements,
                                           [&](int64_t b, int64_t e) { fn(pin, pout, b, e); });
        } else {
          fn(pin, pout, 0, st.elements);
        }
        break;
      }
      case Step::kNode: {
        ++stats_.kernels_run;
        const Node& n = *st.node;
        ops.clear();
        for (int s : st.inputs) ops.push_back(slots[static_cast<size_t>(s)].get());
        try {
          bool done = false;
          if (st.choice.fn) {
            auto b = std::make_shared<Literal>(n.result()->type());
            if (st.choice.fn(n, ops, *b)) {
              live += b->type().ByteSize();
              slots[static_cast<size_t>(st.outputs[0])] = std::move(b);
              done = true;
            }
          }
          if (!done) {
            ++stats_.fallback_kernels;
            std::vector<Literal> res = ir::EvaluateNode(n, ops);
            for (size_t j = 0; j < res.size(); ++j) {
              live += res[j].type().ByteSize();
              slots[static_cast<size_t>(st.outputs[j])] = std::make_shared<Literal>(std::move(res[j]));
            }
          }
        } catch (const Error& e) {
          throw Error(n.loc(), fmt::format("@{}: {}: {}", f_->name(), n.name(), e.message()));
        }
        break;
      }
    }
    if (profiling && st.kind != Step::kForward) {
      int64_t bytes = 0;
      for (int s : st.inputs) bytes += slots[static_cast<size_t>(s)]->type().ByteSize();
      for (int s : st.outputs) bytes += slots[static_cast<size_t>(s)]->type().ByteSize();
      profile::Record(st.label, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), bytes);
    }
    stats_.peak_bytes = std::max(stats_.peak_bytes, live);
    for (int s : st.release) {
      BufferPtr& b = slots[static_cast<size_t>(s)];
      if (b && b.use_count() == 1) live -= b->type().ByteSize();
      b.reset();
    }
  }
  std::vector<BufferPtr> result;
  for (int s : result_slots_) {
    BufferPtr b = slots[static_cast<size_t>(s)];
    // Constants are shared with the plan: the caller gets its own copy.
    for (const auto& [cs, lit] : constants_)
      if (cs == s) b = std::make_shared<Literal>(*lit);
    result.push_back(std::move(b));
  }
  return result;
}

class CompiledBackendImpl final : public Backend {
 public:
  explicit CompiledBackendImpl(DiskCache* cache, bool use_default)
      : cache_(cache), use_default_(use_default) {}
  std::string_view name() const override { return "compiled"; }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    DiskCache* c = use_default_ ? &DiskCache::Default() : cache_;
    return std::make_unique<CompiledExecutable>(module, c);
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
