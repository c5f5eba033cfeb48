// Products into views: a product reads slices of a buffer and writes into a transpose's or a
// concatenation's result in place of those copies (Note [Products into views]); planned when the
// executable is built (FoldViews), run by the product's kernel (cpu::DotKernel and the chains').
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "backends/cpu/executor_internal.h"
#include "backends/cpu/cpu_flags.h"

namespace axle::runtime::internal {

// Note [Products into views]
// Attention reads q, k and v as slices of the QKV projection's [b, t, 3C] result, and writes each
// head's [t, d] output at [b, h] of a [b, h, t, d] result that a transpose then turns into the
// [b, t, h d] the output projection reads; in the backward, dq, dk and dv are transposed the same
// way and concatenated into the [b, t, 3C] gradient of the QKV projection. On GPT-2 small these
// copies were 16 kernels a step (6 slices, 8 transposes, 2 concatenations; ~0.22 ms of a ~9.8 ms
// step on 2 cores), each writing 256-768 KB that the next kernel reads again. Yet a product reads
// each operand matrix through a row stride and writes C through another (BLAS's lda and ldc): a
// head of q is 64 rows of 32 floats 3C apart in the QKV buffer, and a head's output is 64 rows of
// 32 floats C apart in the [b, t, h d] buffer (3C apart in the concatenation). So the plan lets
// products read and write such views (cpu::View: an offset and strides in a larger buffer) and
// drops the copies:
//   - a generated kernel that only slices, reshapes and transposes one value into another, read
//     only by products that can read the result as a view of the input (in place, no operand
//     copy: cpu::DotTakesViews): the products read the input;
//   - a generated kernel that only reshapes and transposes the result of a product, its only
//     reader: the product writes the kernel's result through the view;
//   - a concatenation whose every operand is such a product's result (directly or through such a
//     kernel), read by nothing else: each product writes its part of the concatenation.
// Each product makes the same BLAS calls with other lda / ldc (same operands, same order over k),
// and the exact loop (small products, inf or NaN results) writes the same values through the
// view, so the bits are those of the copies. The buffer a product reads now lives until that
// product (the QKV result until the backward, instead of its three slices: the same bytes); a
// written value's buffer is allocated by its first writer. A product whose result is a view
// joins no pair, and no chain member reads a value written through a view or reads an earlier
// member through one (those are cut by items or rows of their own layout). A group of reshapes
// is left alone: its output takes its input's storage already, and a product writing through it
// would leave its pair. AXLE_VIEWS=0 keeps the copies. GPT-2 small, alternated 300-step runs,
// medians: 9.09-9.24 ms a step against 9.28-9.46 with the copies (Zen 4, 2 vCPUs).
namespace {

// Strides over `to` dims of the value whose strides over `from` dims (the same elements in the
// same row-major order: a reshape) are `s`; nullopt when no single stride per dim exists (the
// reshape would need a copy). As numpy's attempt_nocopy_reshape.
std::optional<std::vector<int64_t>> Restride(const std::vector<int64_t>& from, const std::vector<int64_t>& s,
                                            const std::vector<int64_t>& to) {
  std::vector<int64_t> od, os;  // from's dims of size != 1
  for (size_t k = 0; k < from.size(); ++k)
    if (from[k] != 1) {
      od.push_back(from[k]);
      os.push_back(s[k]);
    }
  std::vector<int64_t> ns(to.size(), 1);
  size_t oi = 0, ni = 0;
  while (ni < to.size() && oi < od.size()) {
    if (to[ni] == 1) {
      ++ni;
      continue;
    }
    // Grow a group of old dims [oi, oj) and new dims [ni, nj) with equal products.
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = od[oi], np = to[ni];
    while (op != np) {
      if (np < op) {
        if (nj == to.size()) return std::nullopt;
        np *= to[nj++];
      } else {
        if (oj == od.size()) return std::nullopt;
        op *= od[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;  // the old group is not one run
    ns[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) ns[k - 1] = ns[k] * to[k];
    ni = nj;
    oi = oj;
  }
  if (oi != od.size()) return std::nullopt;
  for (; ni < to.size(); ++ni)
    if (to[ni] != 1) return std::nullopt;
  return ns;
}

// The movement nodes (slice, reshape, transpose) from kernel g's one output back to its one
// input, output first; nullopt when g is not such a copy.
std::optional<std::vector<const Node*>> MovementChain(const Step& st) {
  if (st.kind != Step::kGenerated || st.operands.size() != 1 || st.results.size() != 1) return std::nullopt;
  const GeneratedKernel& g = *st.generated;
  // A group of reshapes (is_copy) costs nothing already: its output takes its input's storage.
  if (g.is_copy || g.reduction || g.row_blocks != 1 || g.inputs.size() != 1 || g.outputs.size() != 1)
    return std::nullopt;
  std::vector<const Node*> chain;
  for (const Value* v = g.body_outputs[0]; v != g.body_inputs[0];) {
    const Node* n = v->node();
    if (n == nullptr || n->num_operands() != 1 ||
        (n->op() != OpKind::kReshape && n->op() != OpKind::kTranspose && n->op() != OpKind::kSlice))
      return std::nullopt;
    chain.push_back(n);
    v = n->operand(0);
  }
  if (chain.empty()) return std::nullopt;
  return chain;
}

// Node n's operand as a view, given its result's (forward: its result, given its operand's);
// nullopt when a slice drops elements (only forward keeps a slice) or a reshape needs a copy.
std::optional<cpu::View> Across(const Node& n, cpu::View v, bool forward) {
  const std::vector<int64_t> out_dims = n.result()->shape().dims();
  const std::vector<int64_t> in_dims = n.operand(0)->shape().dims();
  if (n.op() == OpKind::kSlice) {
    if (!forward) return std::nullopt;
    const auto& a = n.attrs_as<ir::SliceAttrs>();
    for (size_t d = 0; d < in_dims.size(); ++d) {
      v.offset += a.start[d] * v.strides[d];
      v.strides[d] *= a.strides[d];
    }
    return v;
  }
  if (n.op() == OpKind::kTranspose) {  // result dim i is operand dim perm[i]
    const auto& perm = n.attrs_as<ir::TransposeAttrs>().perm;
    std::vector<int64_t> s(v.strides.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      const size_t p = static_cast<size_t>(perm[i]);
      if (forward) s[i] = v.strides[p];
      else s[p] = v.strides[i];
    }
    v.strides = std::move(s);
    return v;
  }
  auto s = forward ? Restride(in_dims, v.strides, out_dims) : Restride(out_dims, v.strides, in_dims);
  if (!s) return std::nullopt;
  v.strides = std::move(*s);
  return v;
}

// The view of a chain's input inside its output's buffer, given the output's view.
std::optional<cpu::View> Backward(const std::vector<const Node*>& chain, cpu::View v) {
  for (const Node* n : chain) {
    auto next = Across(*n, std::move(v), /*forward=*/false);
    if (!next) return std::nullopt;
    v = std::move(*next);
  }
  return v;
}

// The view of a chain's output inside its input's buffer, given the input's view.
std::optional<cpu::View> Forward(const std::vector<const Node*>& chain, cpu::View v) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto next = Across(**it, std::move(v), /*forward=*/true);
    if (!next) return std::nullopt;
    v = std::move(*next);
  }
  return v;
}

cpu::View RowMajor(const Value& v) { return cpu::View{0, v.shape().Strides()}; }

bool PlainProduct(const Step& st) {
  return st.kind == Step::kKernel && st.kernel.fn && !st.kernel.in_place && st.node->op() == OpKind::kDotGeneral;
}

}  // namespace

int FoldViews(std::vector<Step>& steps, const std::vector<bool>& is_result, std::vector<FoldedCopy>* folded_copies) {
  std::unordered_map<int, size_t> producer;
  std::unordered_map<int, std::vector<size_t>> readers;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (int s : steps[k].results) producer[s] = k;
    for (int s : steps[k].operands) {
      std::vector<size_t>& r = readers[s];
      if (r.empty() || r.back() != k) r.push_back(k);
    }
  }
  std::vector<bool> elided(steps.size(), false);
  auto only_reader = [&](int slot, size_t k) {
    const auto it = readers.find(slot);
    return !is_result[static_cast<size_t>(slot)] && it != readers.end() && it->second == std::vector<size_t>{k};
  };
  // A product writing value `into` through view v of into's buffer, directly or through a
  // movement kernel: {the product, the kernel or -1, the product's view}.
  struct Writer {
    size_t product;
    int64_t copy;
    cpu::View view;
  };
  auto product_writer = [&](size_t p, int64_t copy, const cpu::View& v) -> std::optional<Writer> {
    Step& d = steps[p];
    if (!PlainProduct(d) || !d.views.out.plain() || d.results.size() != 1) return std::nullopt;
    cpu::DotViews views = d.views;
    views.out = v;
    if (!cpu::DotTakesViews(*d.node, views)) return std::nullopt;
    return Writer{p, copy, v};
  };
  // Movement kernel k's input written by its product, given the view of k's output.
  auto through_copy = [&](size_t k, const cpu::View& v) -> std::optional<Writer> {
    const auto chain = MovementChain(steps[k]);
    if (!chain || elided[k]) return std::nullopt;
    const int in = steps[k].operands[0];
    const auto through = Backward(*chain, v);
    if (!through || !producer.count(in) || !only_reader(in, k)) return std::nullopt;
    return product_writer(producer.at(in), static_cast<int64_t>(k), *through);
  };
  std::vector<bool> written(steps.size(), false);  // elided copies whose results products write
  auto write = [&](const Writer& w, int slot, const Value* into) {
    Step& d = steps[w.product];
    d.views.out = w.view;
    d.into = into;
    d.results = {slot};
    if (w.copy >= 0) elided[static_cast<size_t>(w.copy)] = written[static_cast<size_t>(w.copy)] = true;
  };
  // Concatenations written by their operands' products.
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& c = steps[k];
    if (c.kind != Step::kKernel || c.node->op() != OpKind::kConcatenate || c.results.size() != 1) continue;
    const Value* into = c.node->result();
    const int64_t dim = c.node->attrs_as<ir::ConcatenateAttrs>().dim;
    const std::vector<int64_t> strides = into->shape().Strides();
    std::vector<Writer> writers;
    int64_t start = 0;
    for (size_t j = 0; j < c.operands.size(); ++j) {
      const int x = c.operands[j];
      if (!only_reader(x, k) || !producer.count(x) || std::count(c.operands.begin(), c.operands.end(), x) != 1) break;
      const cpu::View v{start * strides[static_cast<size_t>(dim)], strides};
      const size_t p = producer.at(x);
      const auto w = MovementChain(steps[p]) ? through_copy(p, v) : product_writer(p, -1, v);
      if (!w) break;
      writers.push_back(*w);
      start += c.node->operand(j)->shape().dim(dim);
    }
    if (writers.size() != c.operands.size()) continue;
    for (const Writer& w : writers) write(w, c.results[0], into);
    elided[k] = written[k] = true;
  }
  // Transposes of a product's result written by the product.
  for (size_t k = 0; k < steps.size(); ++k) {
    if (elided[k] || steps[k].kind != Step::kGenerated || steps[k].results.size() != 1) continue;
    const Value* into = steps[k].generated->outputs[0];
    if (const auto w = through_copy(k, RowMajor(*into))) write(*w, steps[k].results[0], into);
  }
  // Slices (and reshapes, transposes) read only by products that read their input in place.
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto chain = MovementChain(steps[k]);
    if (elided[k] || !chain) continue;
    const int in = steps[k].operands[0], out = steps[k].results[0];
    const auto view = Forward(*chain, RowMajor(*steps[k].generated->inputs[0]));
    if (!view || is_result[static_cast<size_t>(out)] || !readers.count(out)) continue;
    const std::vector<size_t>& users = readers.at(out);
    bool ok = true;
    std::vector<cpu::DotViews> after;
    for (size_t u : users) {
      const Step& d = steps[u];
      cpu::DotViews v = d.views;
      ok = ok && PlainProduct(d) && d.operands.size() == 2;
      if (!ok) break;
      for (int j = 0; j < 2; ++j)
        if (d.operands[static_cast<size_t>(j)] == out) {
          cpu::View& o = j == 0 ? v.lhs : v.rhs;
          ok = ok && o.plain();
          o = *view;
        }
      ok = ok && cpu::DotTakesViews(*d.node, v);
      after.push_back(std::move(v));
    }
    if (!ok) continue;
    for (size_t i = 0; i < users.size(); ++i) {
      Step& d = steps[users[i]];
      d.views = after[i];
      for (int& s : d.operands)
        if (s == out) s = in;
      readers[in].push_back(users[i]);
    }
    elided[k] = true;
  }
  int folded = 0;
  std::vector<Step> kept;
  kept.reserve(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    if (elided[k]) {
      ++folded;
      if (folded_copies != nullptr) folded_copies->push_back({steps[k].node, written[k]});
      continue;
    }
    kept.push_back(std::move(steps[k]));
  }
  steps = std::move(kept);
  return folded;
}

}  // namespace axle::runtime::internal
