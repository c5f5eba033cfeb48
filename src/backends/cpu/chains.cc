// Batch-sliced chains: a product and the kernels that read it by slices of its batch (or of its
// rows), run slice by slice, each thread its slices of all of them (Note [Batch-sliced chains]);
// planned when the executable is built (MarkChains), run by RunRegion (region.cc).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "backends/cpu/executor_internal.h"
#include "backends/cpu/cpu_flags.h"
#include "ir/interpreter.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::internal {

// Note [Batch-sliced chains]
// Attention runs as three kernels a layer each way, each over all (batch, head) pairs: the scores'
// batched product, the softmax's rows, the values' batched product (and in the backward two
// products, the softmax's backward rows, two products). Each kernel is split over the threads and
// waits for its slowest part before the next starts, and each one's result (GPT-2 small: 32
// matrices of 64 x 64, 512 KB) goes out of the L1 and L2 of the thread that wrote it before the
// next reads it, often on the other core. Yet the kernels are independent across (batch, head):
// slice s of the scores is all the softmax's slice s reads, and all the next product's item s
// reads of it. So a chain runs them together: each thread takes slices of the batch and runs the
// scores' product, the softmax and the values' product for them in turn, its slices' data staying
// in its caches, with one wait at the chain's end instead of one per kernel (a flash-attention
// schedule made of the kernels we already have: BLAS calls per item and generated row kernels).
// The same holds for rows: a product whose kernel cuts it into one block of rows per thread (the
// MLP's and projections' forward products, Note [Product tiles]) gives each thread its rows, and
// the layer norm, GELU and next product after it read only those rows. So the forward's run from
// one attention's output projection to the next one's QKV product (projection, layer norm, MLP,
// layer norm, QKV and its bias) is one chain of two slices: each thread carries its 256 tokens
// through all of it.
//
// Every value a chain member reads from an earlier member is cut the same way: slice s of S is
// elements [s n / S, (s + 1) n / S) of its n. A product is a member when it makes one BLAS call
// per batch item anyway (cpu::ChainSlices: batch count S, at least the pool's threads, operands
// read in place) and reads each earlier member's result with that operand's batch dims leading,
// or when its kernel cuts it into S equal blocks of rows, one per thread (cpu::ChainRowSlices),
// it reads earlier members only as its lhs, stored by rows (cpu::LhsRowsInOrder), and it is not
// in a pair (Note [Products side by side]: there it is one BLAS call, here one per block). A
// product cut by items may leave a pair whose other product is cut by items too (its calls are
// the same either way). A generated kernel is a member when its loop splits into S equal slices
// and it reads each earlier member's result only in order (GeneratedKernel::input_in_order), and
// never in place, a copy or a column sum by blocks. A kernel between members that reads no
// member's result and is not a product moves before the chain (the attention's causal mask). A
// chain starts at a product and has a member that reads another.
//
// Each member computes the same values as kernel by kernel: a product's items or row blocks are
// the same BLAS calls, a generated kernel's elements or rows are independent of how the loop is
// cut. When a product's BLAS block comes out inf or NaN, its kernel recomputes the whole product
// exactly (Note [BLAS and non-finite values]): the chain then runs again kernel by kernel into the
// same buffers (no member writes in place, so its inputs are intact), and the bits are those of
// an unchained run in every case. AXLE_CHAINS=0 turns chains off.
//
// Measured on GPT-2 small (alternated 300-step runs, `AXLE_CHAINS=1/0`): no change while the two
// vCPUs share a core complex; when they do not, where every wait between kernels is a cross-complex
// round trip, 13.78-13.91 against 14.33-14.59 ms with the attention's chains, and with the rows'
// chains added 13.59-13.65 against the attention's chains alone at 13.69-13.99 ms. The work inside did not get cheaper: the
// 64 x 64 products run at oneDNN's per-call speed and the softmax's 64-wide rows at ~80 ns a row.
namespace {

bool ReadsAny(const Step& st, const std::unordered_set<int>& slots) {
  return std::any_of(st.operands.begin(), st.operands.end(), [&](int s) { return slots.count(s) > 0; });
}

}  // namespace

// How a product is cut into `slices` slices: by batch items, by blocks of rows, or not at all.
Cut ProductCut(const Step& st, int64_t slices, int threads) {
  if (st.kind != Step::kKernel || !st.kernel.fn || st.kernel.in_place || st.node->op() != OpKind::kDotGeneral)
    return Cut::kNone;
  if (cpu::ChainSlices(*st.node, threads, st.views) == slices) return Cut::kItems;
  if (cpu::ChainRowSlices(*st.node, threads, st.views) == slices) return Cut::kRows;
  return Cut::kNone;
}

namespace {

// A generated kernel whose loop a chain can cut into `slices` equal slices.
bool SliceableKernel(const Step& st, int64_t slices) {
  if (st.kind != Step::kGenerated) return false;
  const GeneratedKernel& g = *st.generated;
  return g.fn != nullptr && !g.is_copy && g.row_blocks == 1 && g.elements > 0 && g.elements % slices == 0;
}

}  // namespace

// Whether member-to-be `st` reads each of the chain's values (`internal`) by its slices. A value
// written through a view (`viewed`) is not in its slices' layout, nor one read through a view.
bool ReadsBySlices(const Step& st, int64_t slices, int threads, const std::unordered_set<int>& internal,
                   const std::unordered_set<int>& viewed) {
  for (size_t j = 0; j < st.operands.size(); ++j) {
    if (!internal.count(st.operands[j])) continue;
    if (viewed.count(st.operands[j])) return false;
    if (st.kind == Step::kKernel && !(j == 0 ? st.views.lhs : st.views.rhs).plain()) return false;
  }
  if (st.kind == Step::kGenerated) {
    if (!SliceableKernel(st, slices)) return false;
    for (size_t j = 0; j < st.operands.size(); ++j)
      if (internal.count(st.operands[j]) && !st.generated->input_in_order[j]) return false;
    return true;
  }
  const Cut cut = ProductCut(st, slices, threads);
  if (cut == Cut::kNone) return false;
  const auto& d = st.node->attrs_as<ir::DotGeneralAttrs>();
  for (size_t j = 0; j < st.operands.size(); ++j) {
    if (!internal.count(st.operands[j])) continue;
    if (cut == Cut::kRows) {
      if (j != 0 || !cpu::LhsRowsInOrder(*st.node)) return false;  // block s reads rows s of the lhs
      continue;
    }
    const std::vector<int64_t>& batch = j == 0 ? d.lhs_batch : d.rhs_batch;
    for (size_t b = 0; b < batch.size(); ++b)
      if (batch[b] != static_cast<int64_t>(b)) return false;  // batch dims leading, in order
  }
  return true;
}


void CpuExecutable::MarkChains(std::vector<Step>& steps) {
  const int threads = target_.threads;
  if (threads < 2 || !flags::chains()) return;
  // Pairs are marked first (Note [Products side by side]); a chain keeps every product's calls as
  // they are without it. A product in a pair is whole on one thread: one BLAS call per batch item,
  // the same calls as when it is cut by items (at least `threads` items) and not those of row
  // blocks. So a product joins a chain cut by items when it is unpaired or its partner would make
  // the same calls unpaired (cut by items too), and the pair is undone; cut by rows only when it is
  // unpaired. Only generated kernels and non-product kernels move before a chain, so no pair is
  // split or formed by the new order.
  auto partner = [&](size_t j) -> int64_t {  // the other product of j's pair (pairs have no fillers yet)
    if (steps[j].region < 0) return -1;
    if (j + 1 < steps.size() && steps[j + 1].region == steps[j].region) return static_cast<int64_t>(j + 1);
    if (j > 0 && steps[j - 1].region == steps[j].region) return static_cast<int64_t>(j - 1);
    return -1;
  };
  auto member = [&](size_t j, int64_t slices) {
    const Cut cut = ProductCut(steps[j], slices, threads);
    const int64_t p = partner(j);
    if (cut == Cut::kRows) return p < 0;
    if (cut != Cut::kItems) return false;
    if (p < 0) return true;
    const Step& other = steps[static_cast<size_t>(p)];
    return cpu::ChainSlices(*other.node, threads, other.views) > 0;
  };
  auto is_product = [](const Step& st) { return st.kind == Step::kKernel && st.node->op() == OpKind::kDotGeneral; };
  std::unordered_set<int> viewed;  // slots products write through views (Note [Products into views])
  for (const Step& st : steps)
    if (st.into != nullptr) viewed.insert(st.results.begin(), st.results.end());
  // First the chains, on the plan as it is: members marked, their pairs undone; then the order.
  std::vector<std::vector<size_t>> hoisted_before(steps.size());  // steps that move before position k
  size_t k = 0;
  while (k < steps.size()) {
    const Step& first = steps[k];
    // A chain starts at a product, cut by items or by rows.
    int64_t slices = 0;
    if (is_product(first) && first.kernel.fn && !first.kernel.in_place) {
      slices = cpu::ChainSlices(*first.node, threads, first.views);
      if (slices == 0) slices = cpu::ChainRowSlices(*first.node, threads, first.views);
      if (slices > 0 && !member(k, slices)) slices = 0;
    }
    std::vector<size_t> members = {k}, before;
    std::unordered_set<int> internal(first.results.begin(), first.results.end());
    bool linked = false;  // a member reads an earlier one
    for (size_t j = k + 1; slices > 0 && j < steps.size(); ++j) {
      const Step& st = steps[j];
      if (st.kind == Step::kParameter || st.kind == Step::kConstant || st.kind == Step::kForward ||
          st.kind == Step::kCollective)
        break;
      const bool reads = ReadsAny(st, internal);
      if (!reads && !member(j, slices)) {
        if (is_product(st)) break;  // products keep their place (and their pairs)
        before.push_back(j);
        continue;
      }
      if (reads && (!ReadsBySlices(st, slices, threads, internal, viewed) ||
                    (st.kind == Step::kKernel && !member(j, slices))))
        break;
      linked = linked || reads;
      members.push_back(j);
      internal.insert(st.results.begin(), st.results.end());
    }
    if (!linked) {  // a chain needs a member that reads another
      ++k;
      continue;
    }
    const size_t last = members.back();
    for (size_t b : before)
      if (b < last) hoisted_before[k].push_back(b);
    const int chain = static_cast<int>(regions_.size());
    regions_.push_back({.kind = Region::kChain, .steps = static_cast<int>(members.size()), .slices = slices});
    std::string label;
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t j = members[i];
      if (const int64_t p = partner(j); p >= 0) {  // the pair is undone
        regions_[static_cast<size_t>(steps[j].region)].steps = 0;
        steps[j].region = steps[static_cast<size_t>(p)].region = -1;
      }
      Step& st = steps[j];
      st.region = chain;
      regions_.back().cuts.push_back(ProductCut(st, slices, threads));
      if (profile::Labeling()) label += (i ? "; " : "") + st.label;
    }
    if (profile::Labeling()) regions_.back().label = fmt::format("chain/{}{{{}}}", slices, label);
    k = last + 1;  // the steps after the chain's last member that did not move stay after it
  }
  std::vector<bool> taken(steps.size(), false);
  std::vector<Step> order;
  order.reserve(steps.size());
  for (size_t p = 0; p < steps.size(); ++p) {
    for (size_t b : hoisted_before[p]) {
      order.push_back(std::move(steps[b]));
      taken[b] = true;
    }
    if (!taken[p]) order.push_back(std::move(steps[p]));
  }
  steps = std::move(order);
}

}  // namespace axle::runtime::internal
