// Products side by side on a two-thread pool, and the small kernels that run with them: the pairs
// (Note [Products side by side]), their fillers (Note [Kernels beside a pair]) and their
// followers (Note [Followers of a pair]); planned when the executable is built, run by RunRegion
// (region.cc).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>

#include "backends/cpu/executor_internal.h"
#include "ir/interpreter.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::internal {
// Note [Products side by side]
// A backward pass computes each linear layer's two gradient products, dx = dy w^T and
// dw = x^T dy, one after the other; they read the same dy, neither reads the other, and they
// have the same multiply-adds. Split over two threads, each product is cut into two tiles that
// each pack their panels again, and the caller waits for the slower half; run side by side, one
// whole product per thread, neither happens (GPT-2 small's MLP pair, hot, in a C harness on
// MKL: 730-940 us split against 600-610 side by side). So with a pool of two threads, two
// consecutive products of at least pair_min_macs multiply-adds (passes::CpuScheduleParams) each, within 2x of each other, of
// which the second does not read the first and each of whose results is at most
// pair_max_result_elements (a larger C is better cut into tiles, Note [Product tiles] in dot.cc:
// GPT-2 124M's LM head weight gradient is 38.6M), run as one pool call of two items, each product
// on one thread (cpu::ProductsOnOneThread) making the calls it makes unpaired: one per batch item,
// or, for a product of one item large enough to be cut, its tiles one after the other (Note
// [Products cut for the target] in kernels.h), which still spares the wait for the slower half.
// Whether a product is paired depends on its neighbours (a recomputation placed between two
// products unpairs them, Note [Rematerialization under a budget]), so its calls must not: until
// session 40 a paired product ran whole, unpaired in tiles, and the two can round differently.
// Each product is computed by the same calls whichever thread (or, when the pool is crowded, the
// caller alone) runs it, paired or not, so the bits do not depend on the schedule.
namespace {

int64_t ProductMacs(const Node& n) {
  const auto& d = n.attrs_as<ir::DotGeneralAttrs>();
  int64_t k = 1;
  for (int64_t c : d.lhs_contracting) k *= n.operand(0)->shape().dim(c);
  return n.result()->shape().NumElements() * k;
}

}  // namespace

bool PairLegal(const Step& a, const Step& b) {
  auto product = [&](const Step& st) {
    return st.kind == Step::kKernel && st.region < 0 && st.kernel.fn && !st.kernel.in_place &&
           st.node->op() == OpKind::kDotGeneral && st.into == nullptr;
  };
  return product(a) && product(b) && std::none_of(b.operands.begin(), b.operands.end(), [&](int s) {
           return std::find(a.results.begin(), a.results.end(), s) != a.results.end();
         });
}

bool Pairable(const Step& a, const Step& b, const passes::Target& target) {
  if (target.threads != 2 || !PairLegal(a, b)) return false;
  auto sized = [&](const Step& st) {
    return ProductMacs(*st.node) >= target.cpu.pair_min_macs &&
           st.node->result()->shape().NumElements() <= target.cpu.pair_max_result_elements;
  };
  if (!sized(a) || !sized(b)) return false;
  const int64_t ma = ProductMacs(*a.node), mb = ProductMacs(*b.node);
  return std::max(ma, mb) <= 2 * std::min(ma, mb);
}

void MarkPairs(std::vector<Step>& steps, std::vector<Region>& regions, const passes::Target& target) {
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    if (!Pairable(steps[k], steps[k + 1], target)) continue;
    steps[k].region = steps[k + 1].region = static_cast<int>(regions.size());
    regions.push_back({.kind = Region::kPair, .steps = 2});
    ++k;  // the second is taken
  }
}

namespace {

// Note [Kernels beside a pair]
// The two products of a pair rarely end together (GPT-2 small: one thread waited 1.4 ms a step
// for the other's product, ~0.07 ms a pair), while small kernels that read neither product sit
// right next to the pair: a bias gradient (a column sum of the dy both products read) just before
// it, and, in the schedule's last place, the global gradient norm's per-parameter sums of squares,
// tiny full reductions that ran one after the other on one thread (27 of them, ~0.25 ms of a
// GPT-2 small step's tail). So HoistBesidePairs moves such steps next to a pair: filler-sized
// steps (generated kernels reading at most filler_max_elements elements) between the previous pair
// and a pair that neither product, nor any step staying in between, reads go down to just after
// it (at first only the ones right before the pair moved; the final layer norm's weight and bias
// gradients sat behind its backward rows, which the next pair reads, and ran split after that
// pair while one thread had waited ~40 us at its end), and each tiny reduction goes up to just
// after the first pair that starts after its inputs exist. Then up to max_fillers of the steps
// right after a pair that read neither product nor one another's results join the pair's pool
// call as whole items: the thread that finishes its product first takes the next one. GPT-2
// small: 30 kernels a step beside its 13 pairs (26 sums of squares, the QKV bias gradients and
// two transposes); the sums of squares left in the tail take 0.04 ms instead of 0.27.
// Moving a step up only shortens its inputs' lives and lengthens its tiny results'; moving one
// down lengthens its inputs' lives by a pair. A filler never writes in place (a product may still
// read its input). Every kernel computes the same values whichever thread runs it and however it
// is cut (Note [Pool chunks], thread_pool.h), so the bits do not depend on who took what.

// Note [Followers of a pair]
// The backward pass's path runs through a pair's input gradient dx: the steps after a pair (the
// layer norm's backward rows, the bias gradients' column sums) read dx and not the weight
// gradient dw, which only the optimizer reads, at the end. Yet they waited for dw too: on a Zen 1
// host dw (A transposed, OpenBLAS) took 1.9-2.2 ms against dx's 1.8-1.9 (oneDNN), and the thread
// that ran dx sat idle ~1.7 ms a GPT-2 small step at the pairs' ends. So up to max_followers
// filler-sized steps after a pair's fillers that read neither dw nor a filler's result are the
// pair's followers: the thread that ran dx runs them, each whole and in order, for as long as dw
// is still running, and the steps it did not reach run after the pool call as usual (split).
// Their outputs are bound before the call and never in place, like the fillers'. Whoever runs a
// follower and however it is cut, it computes the same values (Note [Pool chunks]), so the bits
// do not depend on how far the thread got.

}  // namespace

bool FillerLegal(const Step& st) {
  return st.kind == Step::kGenerated && st.region < 0 && !st.generated->is_copy && st.generated->fn != nullptr;
}

namespace {

bool IsFillerKind(const Step& st, const std::vector<int64_t>& slot_bytes, const passes::CpuScheduleParams& p) {
  if (!FillerLegal(st)) return false;
  int64_t bytes = 0;
  for (int s : st.operands) bytes += slot_bytes[static_cast<size_t>(s)];
  return bytes <= p.filler_max_elements * 4;
}

bool IsTinyReduction(const Step& st, const passes::CpuScheduleParams& p) {
  if (st.kind != Step::kGenerated || st.region >= 0 || st.generated->is_copy) return false;
  for (const ir::Value* v : st.generated->outputs)
    if (v->type().NumElements() > p.tiny_result_elements) return false;
  return st.generated->reduction;
}

}  // namespace

// Moves steps next to the pairs whose pool calls they can join (Note [Kernels beside a pair]):
// the filler-sized steps right before a pair that neither product (nor a later one of them)
// reads go down to just after it, and each tiny reduction goes up to just after the first pair
// that starts after all of its inputs are produced.
void CpuExecutable::HoistBesidePairs(std::vector<Step>& steps) const {
  if (target_.threads != 2) return;
  const size_t n = steps.size();
  auto pair_at = [&](size_t p) {  // a pair's first product
    return StartsRegion(steps, p) && regions_[static_cast<size_t>(steps[p].region)].kind == Region::kPair;
  };
  std::vector<size_t> pair_ends;  // positions of the second product of each pair
  for (size_t p = 0; p + 1 < n; ++p)
    if (pair_at(p)) pair_ends.push_back(p + 1);
  if (pair_ends.empty()) return;
  std::vector<std::vector<size_t>> after(n);  // steps to emit after position p (a pair's end)
  std::vector<bool> moves(n, false);
  std::vector<size_t> at(n);  // where each step's results exist once moved
  for (size_t p = 0; p < n; ++p) at[p] = p;
  // Down: the candidates between the previous pair and each pair, nearest first, that neither
  // product nor any step staying in between reads.
  std::vector<bool> is_end(n, false);
  for (size_t end : pair_ends) is_end[end] = true;
  for (size_t end : pair_ends) {
    const size_t a = end - 1;
    std::vector<int> readers(steps[a].operands);
    readers.insert(readers.end(), steps[end].operands.begin(), steps[end].operands.end());
    std::vector<size_t> run;
    for (size_t c = a; c-- > 0;) {
      const Step& st = steps[c];
      if (moves[c] || pair_at(c) || is_end[c] || run.size() >= static_cast<size_t>(target_.cpu.max_fillers)) break;
      const bool read = std::any_of(st.results.begin(), st.results.end(), [&](int s) {
        return std::find(readers.begin(), readers.end(), s) != readers.end();
      });
      readers.insert(readers.end(), st.operands.begin(), st.operands.end());
      if (!read && IsFillerKind(st, slot_bytes_, target_.cpu)) run.push_back(c);
    }
    for (size_t i = run.size(); i-- > 0;) {
      after[end].push_back(run[i]);
      moves[run[i]] = true;
      at[run[i]] = end;
    }
  }
  std::vector<int64_t> producer(slot_bytes_.size(), -1);  // where each slot exists, once moved
  for (size_t p = 0; p < n; ++p)
    for (int s : steps[p].results) producer[static_cast<size_t>(s)] = static_cast<int64_t>(at[p]);
  // Up: after the first pair whose first product comes after the inputs (end - 1 > ready).
  bool any = std::any_of(moves.begin(), moves.end(), [](bool m) { return m; });
  for (size_t p = 0; p < n; ++p) {
    if (moves[p] || !IsTinyReduction(steps[p], target_.cpu)) continue;
    int64_t ready = -1;
    for (int s : steps[p].operands) ready = std::max(ready, producer[static_cast<size_t>(s)]);
    auto it = std::upper_bound(pair_ends.begin(), pair_ends.end(), static_cast<size_t>(ready + 1));
    if (it == pair_ends.end() || *it >= p) continue;
    after[*it].push_back(p);
    moves[p] = true;
    for (int s : steps[p].results) producer[static_cast<size_t>(s)] = static_cast<int64_t>(*it);
    any = true;
  }
  if (!any) return;
  std::vector<Step> order;
  order.reserve(n);
  for (size_t p = 0; p < n; ++p) {
    if (!moves[p]) order.push_back(std::move(steps[p]));
    for (size_t q : after[p]) order.push_back(std::move(steps[q]));
  }
  steps = std::move(order);
}

// Counts each pair's fillers (Note [Kernels beside a pair]: they read neither product nor one
// another) and then its followers (Note [Followers of a pair]: they read neither the second
// product nor a filler).
void CpuExecutable::MarkBesidePairs(std::vector<Step>& steps) {
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    const Step& a = steps[k];
    if (!StartsRegion(steps, k) || regions_[static_cast<size_t>(a.region)].kind != Region::kPair) continue;
    Region& pair = regions_[static_cast<size_t>(a.region)];
    std::vector<int> unready(steps[k + 1].results);  // the second product's and the fillers'
    size_t j = k + 2;
    auto mark = [&](int& count, int most, bool filler) {
      for (; j < steps.size() && count < most; ++j) {
        const Step& f = steps[j];
        if (!IsFillerKind(f, slot_bytes_, target_.cpu)) break;  // (a step in a region is not)
        const bool reads = std::any_of(f.operands.begin(), f.operands.end(), [&](int s) {
          return std::find(unready.begin(), unready.end(), s) != unready.end() ||
                 (filler && std::find(a.results.begin(), a.results.end(), s) != a.results.end());
        });
        if (reads) break;
        if (filler) unready.insert(unready.end(), f.results.begin(), f.results.end());
        ++count;
      }
    };
    mark(pair.fillers, target_.cpu.max_fillers, /*filler=*/true);
    mark(pair.followers, target_.cpu.max_followers, /*filler=*/false);
    pair.steps = 2 + pair.fillers + pair.followers;
    for (size_t q = k + 2; q < j; ++q) steps[q].region = a.region;
    k = j - 1;
  }
}

}  // namespace axle::runtime::internal
