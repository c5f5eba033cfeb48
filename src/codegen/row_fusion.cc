// Row fusion (fusion.h).
//
// Note [Row kernels]: a row reduction over [A, R] (a layer norm's mean, a softmax's max) is
// followed by kernels that use its result per row: the per-row arithmetic of a mean or an
// rsqrt(var + eps) (kernels over A elements), the next row reduction over the same rows (the
// variance, the softmax's sum of exponentials), and the elementwise kernel over the A * R
// elements that reads the per-row values through a broadcast along the rows (the normalize). Each
// of those kernels was a pass over memory and a dispatch to the thread pool; a layer norm was 5
// kernels and 3 passes over its rows. Merged, they are one row kernel whose loop runs over the
// rows and, per row, over its elements once for each reduction and once for what follows the
// last (emit_rows.cc), the row staying in the core's L1.
//
// Starting at a row reduction kernel, the later kernels are visited in order; one that reads a
// value the group computes joins the group when every node in it is per row (A elements), over
// the rows (A * R elements, read at the same flat index) or a row reduction of the same [A, R]
// view, and it reads the group's values only at its own index or, for a per-row value read by a
// row node, through a broadcast that maps element i of the rows to row i / R. The first reader
// that cannot join ends the group: the merged kernel runs where the group's last kernel ran, so no
// kernel that runs in between may read what the group computes. The merged kernel writes the
// values that kernels outside it or the function's results read.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/fusion.h"

namespace axle::codegen {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

// Fewer rows than this stay separate kernels: rows are a row kernel's only parallelism.
constexpr int64_t kMinRows = 16;

}  // namespace

// Every dim of the operand larger than 1 maps onto an output dim of the same extent whose stride
// is R times the operand's. Then the operand index is the mixed-radix decomposition of i / R,
// which is i / R itself.
bool IsRowBroadcast(const Node& n, int64_t A, int64_t R) {
  if (n.op() != OpKind::kBroadcastInDim) return false;
  if (n.operand(0)->shape().NumElements() != A || n.result()->shape().NumElements() != A * R) return false;
  const std::vector<int64_t>& out = n.result()->shape().dims();
  const std::vector<int64_t>& in = n.operand(0)->shape().dims();
  const std::vector<int64_t>& dims = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
  const std::vector<int64_t> os = n.result()->shape().Strides(), is = n.operand(0)->shape().Strides();
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == 1) continue;
    const size_t od = static_cast<size_t>(dims[k]);
    if (out[od] != in[k] || os[od] != is[k] * R) return false;
  }
  return true;
}

namespace {

// Whether kernel c can join a row group over [A, R] whose nodes are `members`.
bool CanJoin(const Kernel& c, int64_t A, int64_t R, const std::unordered_set<const Node*>& members) {
  if (!c.fused || c.column) return false;
  const bool reduction = c.reduce != nullptr || IsRowKernel(c);
  if (reduction && (c.num_elements != A || c.reduced != R)) return false;
  if (!reduction && c.num_elements != A && c.num_elements != A * R) return false;
  std::unordered_set<const Node*> reduces(c.reduces.begin(), c.reduces.end());
  if (c.reduce != nullptr) reduces.insert(c.reduce);
  for (const Node* n : c.nodes) {
    if (reduces.count(n)) continue;  // reads its operand over the rows, at the operand's index
    const int64_t count = n->result()->shape().NumElements();
    if (count != A && count != A * R) return false;
    for (const Value* v : n->operands()) {
      if (!members.count(v->node())) continue;
      const int64_t vc = v->shape().NumElements();
      if (n->op() == OpKind::kBroadcastInDim) {
        if (!(count == A * R && vc == A && IsRowBroadcast(*n, A, R))) return false;
      } else if (IsIndexMap(*n) || vc != count) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool IsValidRowKernel(const Kernel& k) {
  if (!IsRowKernel(k)) return false;
  const std::unordered_set<const Node*> members(k.nodes.begin(), k.nodes.end());
  return CanJoin(k, k.num_elements, k.reduced, members);
}

void FuseRows(const ir::Function& f, std::vector<Kernel>& kernels) {
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = 0; i < f.nodes().size(); ++i) pos[f.nodes()[i].get()] = i;
  const std::set<const Value*> is_result(f.results().begin(), f.results().end());
  std::vector<bool> gone(kernels.size(), false);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const Kernel& seed = kernels[k];
    if (gone[k] || !seed.fused || seed.reduce == nullptr || seed.column) continue;
    const int64_t A = seed.num_elements, R = seed.reduced;
    if (A < kMinRows || R < 2) continue;
    std::vector<size_t> group = {k};
    std::unordered_set<const Node*> members(seed.nodes.begin(), seed.nodes.end());
    for (size_t j = k + 1; j < kernels.size(); ++j) {
      if (gone[j]) continue;
      const Kernel& c = kernels[j];
      const bool reads = std::any_of(c.inputs.begin(), c.inputs.end(),
                                     [&](const Value* v) { return members.count(v->node()) > 0; });
      if (!reads) continue;
      if (!CanJoin(c, A, R, members)) break;
      group.push_back(j);
      members.insert(c.nodes.begin(), c.nodes.end());
    }
    if (group.size() == 1) continue;

    Kernel m;
    m.fused = true;
    m.num_elements = A;
    m.reduced = R;
    m.nodes.assign(members.begin(), members.end());
    std::sort(m.nodes.begin(), m.nodes.end(), [&](const Node* a, const Node* b) { return pos[a] < pos[b]; });
    std::unordered_set<const Node*> reduces;
    for (size_t g : group) {
      const Kernel& c = kernels[g];
      if (c.reduce != nullptr) reduces.insert(c.reduce);
      reduces.insert(c.reduces.begin(), c.reduces.end());
    }
    for (const Node* n : m.nodes)
      if (reduces.count(n)) m.reduces.push_back(n);
    std::set<const Value*> seen;
    for (const Node* n : m.nodes)
      for (const Value* v : n->operands())
        if (!members.count(v->node()) && seen.insert(v).second) m.inputs.push_back(v);
    // Outputs: what the group's kernels wrote that a kernel outside the group, or the function's
    // results, still read.
    const std::set<size_t> in_group(group.begin(), group.end());
    std::unordered_set<const Value*> read_outside;
    for (size_t x = 0; x < kernels.size(); ++x)
      if (!gone[x] && !in_group.count(x)) read_outside.insert(kernels[x].inputs.begin(), kernels[x].inputs.end());
    std::set<const Value*> written;
    for (size_t g : group)
      for (const Value* v : kernels[g].outputs)
        if ((is_result.count(v) || read_outside.count(v)) && written.insert(v).second) m.outputs.push_back(v);
    for (size_t g : group) gone[g] = true;
    gone[group.back()] = false;
    kernels[group.back()] = std::move(m);
  }
  std::vector<Kernel> kept;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (!gone[k]) kept.push_back(std::move(kernels[k]));
  kernels = std::move(kept);
}

}  // namespace axle::codegen
