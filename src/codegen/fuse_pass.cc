// The fuse pass: FuseFunction's kernels written into the IR (Note [Fusion in the IR]), and
// KernelsOf, which reads them back.
//
// Note [Fusion in the IR]
// Fusion used to run inside the compiled backend and hand the emitter a list of C++ structs that
// no file could show or reproduce: a fusion decision was tested through DescribeKernels strings
// and read through AXLE_DUMP_DIR's kernel list. Now `fuse` is the pipeline's last stage and its
// result is IR, as XLA's fusion is HLO: each fused kernel becomes a `fusion` node of the entry
// function that calls a function of the module holding the kernel's nodes,
//
//   %y, %xc = fusion(%x, %g, %b) {kind="rows", calls="main.fused.3"} : f32[512,768], f32[512,768]
//   func @main.fused.3 { %x = parameter() {index=0} ... %xc = sub(...) ... return %y, %xc }
//
// with the kernel's inputs as parameters (in the order the emitter numbers them) and its outputs
// as results. Everything else stays a node of its own, run by the executor. The kind says how
// the loop is organised (loop, reduce, rows); the rest (the loop domain, the reduced count, row
// or column) follows from the called function's nodes, so a file cannot contradict itself.
// Integer scalar constants are copied into the called function (the emitter writes them as
// literals, so a division by one becomes a shift); every other input is a parameter.
//
// The backend reads the kernels back with KernelsOf, which checks that each called function is
// something the emitter can write as one loop of its kind, and fails naming the fusion and the
// node otherwise: a hand-written or edited file gets an error, never wrong code. So
// `axle opt --passes=fuse f.axir` shows a module's kernels, a test states a fusion decision as a
// FileCheck line, and the compiled backend's warm start (Note [A warm start skips the pipeline])
// skips fusion too, since the cached module is the fused one. The interpreter runs a fusion by
// evaluating its function, so the fused module is checked against the oracle like any pass's.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/fusion.h"
#include "codegen/passes.h"
#include "core/error.h"
#include "passes/pass.h"

namespace axle::codegen {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

// The emitter writes an integer scalar constant as a literal (emit_cpp.cc): the called function
// holds it instead of reading it through a parameter.
bool Inlined(const Value* v) {
  return IsInteger(v->dtype()) && v->shape().NumElements() == 1 && v->node()->op() == OpKind::kConstant;
}

const char* KindOf(const Kernel& k) { return k.reduce != nullptr ? "reduce" : IsRowKernel(k) ? "rows" : "loop"; }

// A name for the function of fusion number `index` of `f` that the module does not use yet.
std::string CalleeName(const ir::Module& m, const ir::Function& f, size_t index) {
  std::string name = fmt::format("{}.fused.{}", f.name(), index);
  for (int i = 2; m.FindFunction(name) != nullptr; ++i) name = fmt::format("{}.fused.{}_{}", f.name(), index, i);
  return name;
}

// Writes the fused kernels of `f` as fusion nodes and their functions. Returns false when no
// kernel is fused (nothing changes).
bool FuseInto(ir::Module& m, ir::Function& f) {
  const std::vector<Kernel> kernels = FuseFunction(f);
  if (std::none_of(kernels.begin(), kernels.end(), [](const Kernel& k) { return k.fused; })) return false;
  std::unordered_map<const Value*, Value*> replaced;  // a kernel's output -> its fusion's result
  auto outer = [&](const Value* v) {
    auto it = replaced.find(v);
    return it != replaced.end() ? it->second : const_cast<Value*>(v);
  };
  std::vector<Node*> order;
  for (const auto& n : f.nodes())
    if (n->op() == OpKind::kParameter || n->op() == OpKind::kConstant) order.push_back(n.get());
  std::set<int64_t> fused_ids;  // the nodes that move into called functions
  size_t count = 0;  // fusions made so far
  for (const Kernel& kern : kernels) {
    if (!kern.fused) {
      order.push_back(const_cast<Node*>(kern.nodes[0]));
      continue;
    }
    if (kern.outputs.empty()) {  // dead code (dce had not run): nothing reads what it computes
      for (const Node* n : kern.nodes) fused_ids.insert(n->id());
      continue;
    }
    const std::string name = CalleeName(m, f, count++);
    ir::Function* callee = m.AddFunction(name);
    callee->set_loc(f.loc());
    std::unordered_map<const Value*, Value*> inner;
    std::vector<Value*> operands;
    for (const Value* v : kern.inputs) {
      Node* p = Inlined(v) ? callee->AddNode(OpKind::kConstant, {}, v->node()->attrs(), {v->type()})
                           : callee->AddNode(OpKind::kParameter, {}, ir::ParameterAttrs{static_cast<int64_t>(operands.size())},
                                             {v->type()});
      p->result()->set_name(v->name());
      p->set_loc(v->node()->loc());
      inner[v] = p->result();
      if (!Inlined(v)) operands.push_back(outer(v));
    }
    for (const Node* n : kern.nodes) {
      std::vector<Value*> ops;
      for (const Value* v : n->operands()) ops.push_back(inner.at(v));
      std::vector<ir::TensorType> types;
      for (const Value* r : n->results()) types.push_back(r->type());
      Node* c = callee->AddNode(n->op(), std::move(ops), n->attrs(), types);
      c->set_loc(n->loc());
      for (size_t i = 0; i < n->num_results(); ++i) {
        c->result(i)->set_name(n->result(i)->name());
        inner[n->result(i)] = c->result(i);
      }
      fused_ids.insert(n->id());
    }
    std::vector<Value*> results;
    std::vector<ir::TensorType> types;
    for (const Value* v : kern.outputs) {
      results.push_back(inner.at(v));
      types.push_back(v->type());
    }
    callee->set_results(std::move(results));
    Node* fusion = f.AddNode(OpKind::kFusion, std::move(operands), ir::FusionAttrs{KindOf(kern), name}, types);
    fusion->set_loc(kern.nodes.back()->loc());
    for (size_t i = 0; i < kern.outputs.size(); ++i) {
      fusion->result(i)->set_name(kern.outputs[i]->name());
      replaced[kern.outputs[i]] = fusion->result(i);
    }
    order.push_back(fusion);
  }
  for (const auto& [from, to] : replaced) f.ReplaceAllUsesWith(const_cast<Value*>(from), to);
  // The fused nodes are used only by each other now; erase users first.
  std::vector<Node*> gone;
  for (const auto& n : f.nodes())
    if (fused_ids.count(n->id())) gone.push_back(n.get());
  for (auto it = gone.rbegin(); it != gone.rend(); ++it) f.EraseNode(*it);
  AXLE_CHECK(order.size() == f.nodes().size(), "fuse: @{}: {} nodes placed of {}", f.name(), order.size(),
             f.nodes().size());
  f.Reorder(order);
  return true;
}

class FusePass final : public passes::Pass {
 public:
  std::string_view name() const override { return "fuse"; }
  std::string_view summary() const override {
    return "Fuse elementwise nodes, reductions and row computations into kernels: fusion nodes calling new functions "
           "(docs/compiler.md, Fusion).";
  }
  bool Run(ir::Module& module) override {
    // The functions to fuse: those no fusion calls and that hold none (fusing is done once).
    std::set<std::string> called;
    std::vector<ir::Function*> todo;
    for (const auto& f : module.functions())
      for (const auto& n : f->nodes())
        if (n->op() == OpKind::kFusion) called.insert(f->name()), called.insert(n->attrs_as<ir::FusionAttrs>().calls);
    for (const auto& f : module.functions())
      if (!called.count(f->name())) todo.push_back(f.get());
    bool changed = false;
    for (ir::Function* f : todo) changed |= FuseInto(module, *f);
    return changed;
  }
};

std::unique_ptr<passes::Pass> MakeFusePass() { return std::make_unique<FusePass>(); }

// --- Reading kernels back --------------------------------------------------------------------

[[noreturn]] void Bad(const Node& fusion, const std::string& why) {
  const auto& a = fusion.attrs_as<ir::FusionAttrs>();
  const std::string out = fusion.result()->name().empty() ? "" : "%" + fusion.result()->name() + " = ";
  throw Error(fusion.loc(), fmt::format("{}fusion {{kind=\"{}\", calls=\"{}\"}}: {}; fused functions are written by "
                                        "the fuse pass (axle opt --passes=fuse FILE.axir shows what it makes)",
                                        out, a.kind, a.calls, why));
}

std::string Describe(const Node& n) {
  return fmt::format("{} {} ({})", n.result()->name().empty() ? "node" : "%" + n.result()->name(), n.name(),
                     n.result()->type().ToString());
}

// A loop kernel: every node over the loop's elements; a value of the kernel read at its own index
// (an outside value may be read through a broadcast, slice or transpose, or as a scalar).
void CheckLoop(const Node& fusion, const Kernel& k, int64_t domain) {
  std::unordered_set<const Node*> members(k.nodes.begin(), k.nodes.end());
  for (const Node* n : k.nodes) {
    if (n == k.reduce) continue;
    if (n->result()->shape().NumElements() != domain)
      Bad(fusion, fmt::format("{} is not over the loop's {} elements", Describe(*n), domain));
    for (const Value* v : n->operands())
      if (members.count(v->node()) && (IsIndexMap(*n) || v->shape().NumElements() != domain))
        Bad(fusion, fmt::format("{} reads a value of the kernel at another index", Describe(*n)));
  }
}

Kernel KernelOfFusion(const Node& fusion) {
  const auto& attrs = fusion.attrs_as<ir::FusionAttrs>();
  const ir::Module* m = fusion.parent()->module();
  const ir::Function* callee = m != nullptr ? m->FindFunction(attrs.calls) : nullptr;
  if (callee == nullptr) Bad(fusion, "the module has no such function");
  Kernel k;
  k.fused = true;
  k.fusion = &fusion;
  for (const Node* p : callee->Parameters()) k.inputs.push_back(p->result());
  for (const auto& n : callee->nodes()) {
    if (n->op() == OpKind::kParameter || (n->op() == OpKind::kConstant && Inlined(n->result()))) continue;
    if (n->op() == OpKind::kConstant)
      Bad(fusion, fmt::format("{} is a constant; a fused function reads constants through its parameters (only "
                              "integer scalars are written inline)",
                              Describe(*n)));
    if (n->op() != OpKind::kReduce && !IsFusible(*n))
      Bad(fusion, fmt::format("{} cannot be evaluated by a fused loop", Describe(*n)));
    k.nodes.push_back(n.get());
  }
  std::set<const Value*> written;
  for (const Value* v : callee->results()) {
    if (v->node()->op() == OpKind::kParameter || v->node()->op() == OpKind::kConstant || !written.insert(v).second)
      Bad(fusion, "its function returns a parameter, a constant or one value twice; a kernel writes each value it "
                  "computes once");
    k.outputs.push_back(v);
  }
  std::vector<const Node*> reduces;
  for (const Node* n : k.nodes)
    if (n->op() == OpKind::kReduce) reduces.push_back(n);
  if (attrs.kind == "loop") {
    if (!reduces.empty()) Bad(fusion, fmt::format("a loop kernel holds {}", Describe(*reduces[0])));
    k.num_elements = k.outputs[0]->shape().NumElements();
    CheckLoop(fusion, k, k.num_elements);
  } else if (attrs.kind == "reduce") {
    if (reduces.size() != 1 || reduces[0] != k.nodes.back() || k.outputs[0] != reduces[0]->result())
      Bad(fusion, "a reduce kernel ends with its one reduce, whose result is its first output");
    k.reduce = reduces[0];
    if (!ReductionView(*k.reduce, &k.reduced, &k.column))
      Bad(fusion, fmt::format("{} is not a row or column sum, max or min of f32 or f64", Describe(*k.reduce)));
    k.num_elements = k.reduce->result()->shape().NumElements();
    CheckLoop(fusion, k, k.reduce->operand(0)->shape().NumElements());
    for (size_t i = 1; i < k.outputs.size(); ++i)
      if (k.outputs[i]->shape().NumElements() != PrologueElements(k))
        Bad(fusion, "a reduce kernel's other outputs are values of its prologue");
  } else {
    if (reduces.empty()) Bad(fusion, "a rows kernel holds no reduce");
    bool column = false;
    if (!ReductionView(*reduces[0], &k.reduced, &column) || column)
      Bad(fusion, fmt::format("{} is not a row reduction", Describe(*reduces[0])));
    k.num_elements = reduces[0]->result()->shape().NumElements();
    k.reduces = reduces;
    for (const Node* r : reduces) {
      int64_t reduced = 0;
      if (!ReductionView(*r, &reduced, &column) || column || reduced != k.reduced ||
          r->result()->shape().NumElements() != k.num_elements)
        Bad(fusion, fmt::format("{} is not a row reduction over the kernel's [{}, {}] rows", Describe(*r),
                                k.num_elements, k.reduced));
    }
    if (!IsValidRowKernel(k))
      Bad(fusion, fmt::format("a node is neither per row ({} elements) nor over the rows ({} elements), or reads a "
                              "per-row value other than through a broadcast along the rows",
                              k.num_elements, k.num_elements * k.reduced));
  }
  return k;
}

}  // namespace

std::vector<Kernel> KernelsOf(const ir::Function& f) {
  std::vector<Kernel> kernels;
  for (const auto& n : f.nodes()) {
    if (n->op() == OpKind::kParameter || n->op() == OpKind::kConstant) continue;
    if (n->op() == OpKind::kFusion) {
      kernels.push_back(KernelOfFusion(*n));
      continue;
    }
    Kernel k;
    k.nodes = {n.get()};
    for (const Value* v : n->operands())
      if (std::find(k.inputs.begin(), k.inputs.end(), v) == k.inputs.end()) k.inputs.push_back(v);
    for (const Value* r : n->results()) k.outputs.push_back(r);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

const ir::Value* OuterInput(const Kernel& k, size_t j) { return k.fusion != nullptr ? k.fusion->operand(j) : k.inputs[j]; }
const ir::Value* OuterOutput(const Kernel& k, size_t j) { return k.fusion != nullptr ? k.fusion->result(j) : k.outputs[j]; }

void RegisterPasses() {
  static std::once_flag once;
  std::call_once(once, [] { passes::RegisterPass(MakeFusePass); });
}

}  // namespace axle::codegen
