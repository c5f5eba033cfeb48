// transpose and dot_general together:
//   - the cpu backend's transpose kernel (cache-blocked for 4- and 8-byte elements) against the
//     interpreter, bitwise, over many shapes and permutations: ranks 1-5, odd sizes, size-1 and
//     zero-sized dims, every element width;
//   - the dot-transpose-fold pass on random dot_general(transpose(x), transpose(y)) programs: the
//     interpreter's results before and after the pass are bitwise equal (the pass keeps the
//     batch and contracting lists in order, so the interpreter's summation order is unchanged);
//   - the time of transpose f32[50257,768] -> f32[768,50257] (GPT-2's embedding), old strided
//     copy and new kernel, printed (never asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "backends/cpu/kernels.h"
#include "backends/registry.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

namespace axle::runtime {
namespace {

using ir::Builder;
using ir::DotGeneralAttrs;
using ir::Literal;
using ir::TensorType;
using ir::Value;

Literal RandomOf(DType t, const Shape& s, uint64_t seed) {
  Literal l = testutil::RandomLiteral(t == DType::kBool ? DType::kF32 : t, s, seed);
  if (IsInteger(t)) {  // spread the values over more than {-1, 0}
    for (int64_t i = 0; i < l.NumElements(); ++i) l.SetDouble(i, static_cast<double>((i * 37 + static_cast<int64_t>(seed)) % 101));
  }
  return l;
}

// transpose(x, perm) on the cpu backend equals the interpreter's, bitwise.
void CheckTranspose(DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, uint64_t seed) {
  ir::Module m("t");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, TensorType(t, Shape(dims)), "x");
  b.Return({b.Transpose(x, perm)});
  const std::vector<Literal> args = {RandomOf(t, Shape(dims), seed)};
  std::vector<Literal> want = ir::Evaluate(*m.entry(), args);
  std::vector<BufferPtr> got = testutil::Run("cpu", m, args);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(*got[0] == want[0]) << DTypeName(t) << " " << Shape(dims).ToString() << " perm "
                                  << ::testing::PrintToString(perm);
}

TEST(TransposeKernel, MatchesInterpreterOnManyShapes) {
  std::mt19937_64 rng(7);
  const DType types[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kF16, DType::kBF16};
  const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 31, 32, 33, 63, 65, 100};
  int cases = 0;
  for (int rank = 1; rank <= 5; ++rank) {
    for (int rep = 0; rep < 60; ++rep) {
      std::vector<int64_t> dims;
      int64_t total = 1;
      for (int d = 0; d < rank; ++d) {
        int64_t n = sizes[rng() % std::size(sizes)];
        if (rep % 10 != 0 && n == 0) n = 3;  // zero-sized dims in one case of ten
        if (total * std::max<int64_t>(n, 1) > 200000) n = 2;
        dims.push_back(n);
        total *= std::max<int64_t>(n, 1);
      }
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      const DType t = types[rng() % std::size(types)];
      CheckTranspose(t, dims, perm, rng());
      ++cases;
    }
  }
  // Every permutation of small and tile-straddling rank-2..4 shapes, f32 and f64.
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {33, 65}, {64, 32}, {1, 77}, {77, 1}, {0, 5}, {3, 1, 40}, {37, 2, 35}, {5, 33, 1, 34}, {2, 3, 4, 5}}) {
    std::vector<int64_t> perm(dims.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      for (DType t : {DType::kF32, DType::kF64}) {
        CheckTranspose(t, dims, perm, static_cast<uint64_t>(++cases));
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  // Big enough to run on the thread pool.
  CheckTranspose(DType::kF32, {1000, 771}, {1, 0}, 1);
  CheckTranspose(DType::kF64, {3, 300, 257}, {0, 2, 1}, 2);
  CheckTranspose(DType::kF32, {40, 50, 60}, {2, 0, 1}, 3);
  std::fprintf(stderr, "transpose: %d random and exhaustive cases\n", cases);
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// GPT-2's embedding transpose, timed (printed, not asserted): the old path (one StridedCopy, as
// the kernel did before) and the cpu backend's transpose kernel; results bitwise equal.
TEST(TransposeKernel, TimesGpt2EmbeddingTranspose) {
  const int64_t rows = 50257, cols = 768;
  ir::Module m("t");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, TensorType(DType::kF32, Shape{rows, cols}), "x");
  b.Return({b.Transpose(x, {1, 0})});
  Literal in(TensorType(DType::kF32, Shape{rows, cols}));
  float* p = in.mutable_data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = static_cast<float>(i % 1000003) * 0.5f;
  const double gb = 2.0 * static_cast<double>(rows * cols * 4) / 1e9;  // read + write

  Literal old(TensorType(DType::kF32, Shape{cols, rows}));
  double old_ms = 1e30;
  for (int r = 0; r < 2; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    cpu::StridedCopy(in.bytes().data(), 0, {cols, rows}, {1, cols}, 4, old.mutable_bytes().data());
    old_ms = std::min(old_ms, Ms(std::chrono::steady_clock::now() - t0));
  }
  // The kernel alone, into an output whose pages are already mapped (as for the strided copy).
  const ir::Node& node = *m.entry()->nodes().back();
  const cpu::KernelChoice k = cpu::SelectMovementKernel(node);
  ASSERT_NE(k.fn, nullptr);
  Literal direct(TensorType(DType::kF32, Shape{cols, rows}));
  const Literal* ops[] = {&in};
  double kernel_ms = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    k.fn(node, cpu::Operands(ops, 1), direct);
    kernel_ms = std::min(kernel_ms, Ms(std::chrono::steady_clock::now() - t0));
  }
  EXPECT_TRUE(direct == old);
  auto exe = GetBackend("cpu").Compile(m);
  std::vector<BufferPtr> args = testutil::Buffers({in});
  double new_ms = 1e30;
  BufferPtr got;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    got = exe->Execute(args)[0];
    new_ms = std::min(new_ms, Ms(std::chrono::steady_clock::now() - t0));
  }
  EXPECT_TRUE(*got == old);
  std::fprintf(stderr,
               "transpose f32[50257,768] -> f32[768,50257] (%d threads): old strided copy %.1f ms "
               "(%.2f GB/s), blocked kernel %.1f ms (%.2f GB/s), cpu backend Execute (fresh "
               "output) %.1f ms (%.2f GB/s)\n",
               ThreadPool::Global().num_threads(), old_ms, gb / (old_ms / 1e3), kernel_ms,
               gb / (kernel_ms / 1e3), new_ms, gb / (new_ms / 1e3));
}

// A random dot_general whose operands are transposes: t-side dims get random roles (batch,
// contracting, free), the transposes random permutations. Sizes 0-4.
std::unique_ptr<ir::Module> RandomDotOfTransposes(std::mt19937_64& rng, DType t) {
  auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  const int64_t nb = pick(3), nc = pick(3), lf = pick(3), rf = pick(3);
  std::vector<int64_t> bsz, csz;
  auto size = [&] { return pick(12) == 0 ? 0 : 1 + pick(4); };
  for (int64_t i = 0; i < nb; ++i) bsz.push_back(size());
  for (int64_t i = 0; i < nc; ++i) csz.push_back(size());
  // One side's dims: roles laid out at random positions.
  struct Side {
    std::vector<int64_t> dims, batch, contracting;
  };
  auto make = [&](int64_t nfree) {
    const int64_t rank = nb + nc + nfree;
    std::vector<int64_t> pos(static_cast<size_t>(rank));
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    Side s;
    s.dims.assign(static_cast<size_t>(rank), 0);
    size_t k = 0;
    for (int64_t i = 0; i < nb; ++i, ++k) {
      s.batch.push_back(pos[k]);
      s.dims[static_cast<size_t>(pos[k])] = bsz[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < nc; ++i, ++k) {
      s.contracting.push_back(pos[k]);
      s.dims[static_cast<size_t>(pos[k])] = csz[static_cast<size_t>(i)];
    }
    for (; k < pos.size(); ++k) s.dims[static_cast<size_t>(pos[k])] = size();
    return s;
  };
  Side l = make(lf), r = make(rf);
  auto m = std::make_unique<ir::Module>("dot");
  Builder b(m->AddFunction("main"));
  auto operand = [&](const Side& s, int64_t index) {
    // t = transpose(x, p) has s.dims: x's dim p[i] has size s.dims[i].
    if (pick(5) == 0) return b.Parameter(index, TensorType(t, Shape(s.dims)));  // no transpose
    std::vector<int64_t> p(s.dims.size());
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    std::vector<int64_t> xd(s.dims.size());
    for (size_t i = 0; i < p.size(); ++i) xd[static_cast<size_t>(p[i])] = s.dims[i];
    return b.Transpose(b.Parameter(index, TensorType(t, Shape(xd))), p);
  };
  Value* lhs = operand(l, 0);
  Value* rhs = operand(r, 1);
  DotGeneralAttrs d{l.batch, r.batch, l.contracting, r.contracting};
  b.Return({b.DotGeneral(lhs, rhs, d)});
  return m;
}

TEST(DotTransposeFold, RandomProgramsKeepInterpreterResultsBitwise) {
  std::mt19937_64 rng(11);
  int folded = 0, kept = 0;
  for (int seed = 0; seed < 400; ++seed) {
    const DType t = seed % 3 == 0 ? DType::kF64 : seed % 3 == 1 ? DType::kF32 : DType::kI32;
    std::unique_ptr<ir::Module> m = RandomDotOfTransposes(rng, t);
    std::vector<Literal> args;
    for (const auto& n : m->entry()->nodes())
      if (n->op() == ir::OpKind::kParameter)
        args.push_back(RandomOf(t, n->result()->shape(), rng()));
    const std::string before = ir::PrintModule(*m);
    const std::vector<Literal> want = ir::Evaluate(*m->entry(), args);
    passes::RunPasses(*m, {"dot-transpose-fold", "dce"});
    const std::string after = ir::PrintModule(*m);
    (after.find("transpose") == std::string::npos ? folded : kept) += before.find("transpose") != std::string::npos;
    const std::vector<Literal> got = ir::Evaluate(*m->entry(), args);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(testutil::SameBits(want[0], got[0])) << "before:\n" << before << "after:\n" << after;
  }
  std::fprintf(stderr, "dot-transpose-fold: %d programs folded every transpose, %d kept one\n", folded, kept);
  EXPECT_GT(folded, 100);
  EXPECT_GT(kept, 20);
}

}  // namespace
}  // namespace axle::runtime
