// Targeted tests of the cpu backend: the registry, each dot_general layout through BLAS, the
// threaded paths on big tensors, donation, argument errors, and an MLP's forward and backward.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <thread>
#include <utility>

#include "autodiff/vjp.h"
#include "backends/cpu/blas.h"
#include "backends/cpu/kernels.h"
#include "backends/registry.h"
#include "backends/cpu/cpu_flags.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "runtime_test_util.h"
#include "testing/models.h"

namespace axle::runtime {
namespace {

using ir::Builder;
using ir::DotGeneralAttrs;
using ir::Literal;
using ir::OpKind;
using ir::ReduceKind;
using ir::TensorType;
using ir::Value;
using testutil::RandomLiteral;

TensorType F32(Shape s) { return TensorType(DType::kF32, std::move(s)); }

// The CPU backend's flags are its own table (backends/cpu/cpu_flags.h) in the one registry:
// `axle flags` lists them, the environment sets them, ResetForTesting forgets them.
TEST(CpuFlagsTest, TheBackendsFlagsShareTheRegistry) {
  bool listed = false;
  for (const flags::FlagInfo& f : flags::AllFlags())
    if (f.env == "AXLE_VIEWS") {
      listed = true;
      EXPECT_EQ(f.type, "bool");
      EXPECT_EQ(f.default_value, "true");
      EXPECT_NE(f.help.find("Products into views"), std::string::npos) << f.help;
    }
  EXPECT_TRUE(listed);
  ::setenv("AXLE_VIEWS", "0", 1);
  flags::ResetForTesting();
  EXPECT_FALSE(flags::views());
  ::setenv("AXLE_VIEWS", "maybe", 1);
  flags::ResetForTesting();
  EXPECT_THROW(flags::views(), Error);
  ::unsetenv("AXLE_VIEWS");
  flags::ResetForTesting();
  EXPECT_TRUE(flags::views());
}

TEST(BackendRegistryTest, NamesAndUnknown) {
  EXPECT_EQ(BackendNames(), (std::vector<std::string>{"compiled", "cpu", "interpreter"}));
  EXPECT_EQ(GetBackend("cpu").name(), "cpu");
  EXPECT_EQ(GetBackend("interpreter").name(), "interpreter");
  EXPECT_EQ(&GetBackend("cpu"), &GetBackend("cpu"));
  try {
    GetBackend("tpu");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu, interpreter"), std::string::npos) << e.what();
  }
}

// Runs `body` once with each BLAS this machine loads (Note [Which BLAS], blas.cc): OpenBLAS
// always, oneDNN beside it and MKL when they are installed; then restores the choice AXLE_BLAS
// makes. Returns how many ran.
int ForEachBlas(const std::function<void()>& body) {
  std::vector<std::string> names = {"openblas"};
  static bool told_mkl = false, told_dnnl = false;
  if (cpu::DnnlAvailable())
    names.push_back("onednn");
  else if (!std::exchange(told_dnnl, true))
    std::cout << "note: oneDNN does not load here (scripts/setup.sh installs libdnnl2); its products are not tested\n";
  if (cpu::MklAvailable())
    names.push_back("mkl");
  else if (!std::exchange(told_mkl, true))
    std::cout << "note: MKL does not load here (scripts/setup.sh installs it); it is not tested\n";
  for (const std::string& name : names) {
    SCOPED_TRACE("blas " + name);
    EXPECT_EQ(cpu::UseBlas(name).name, name);
    body();
  }
  cpu::UseBlas(flags::blas());
  return static_cast<int>(names.size());
}

// Runs `m` on the interpreter and on the cpu backend (once with each BLAS, ForEachBlas) with
// `args` and compares every result (bitwise up to NaN payloads, or within rel). Returns how many
// times the cpu backend ran; the interpreter's results go to *want_out when given.
int ExpectSame(const ir::Module& m, const std::vector<Literal>& args, double rel, ExecuteStats* stats = nullptr,
               std::vector<BufferPtr>* want_out = nullptr) {
  std::vector<BufferPtr> want = testutil::Run("interpreter", m, args);
  if (want_out) *want_out = want;
  auto exe = GetBackend("cpu").Compile(m);
  return ForEachBlas([&] {
    std::vector<BufferPtr> got = exe->Execute(testutil::Buffers(args));
    if (stats) *stats = exe->last_stats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (rel == 0) {
        EXPECT_TRUE(testutil::SameBits(*want[i], *got[i])) << "result " << i << "\nwant " << want[i]->ToString()
                                                           << "\ngot  " << got[i]->ToString();
      } else {
        std::string where;
        EXPECT_TRUE(testutil::Near(*want[i], *got[i], rel, 1.0, &where)) << "result " << i << ": " << where;
      }
    }
  });
}

TEST(BlasTest, UnknownNameIsAClearError) {
  try {
    cpu::UseBlas("atlas");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AXLE_BLAS='atlas'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("onednn"), std::string::npos) << e.what();
  }
}

// Note [Which BLAS]: auto takes MKL only on an Intel CPU, where it is the faster; elsewhere (AMD)
// OpenBLAS, even when MKL is installed, with oneDNN beside it when that loads.
TEST(BlasTest, AutoTakesMklOnlyOnIntel) {
  const std::string vendor = cpu::CpuVendor();
#if defined(__x86_64__)
  EXPECT_EQ(vendor.size(), 12u) << vendor;
#endif
  const bool intel = vendor == "GenuineIntel";
  const std::string want = intel && cpu::MklAvailable() ? "mkl" : cpu::DnnlAvailable() ? "onednn" : "openblas";
  EXPECT_EQ(cpu::UseBlas("auto").name, want) << vendor;
  if (!intel) {
    EXPECT_NE(cpu::Blas().detail.find(vendor), std::string::npos) << cpu::Blas().detail;
  }
  cpu::UseBlas(flags::blas());
}

// Note [OpenBLAS's kernels]: the `blas:` line names the core whose kernels OpenBLAS runs, and the
// OPENBLAS_CORETYPE that chose it when one is set (a VM's environment set Haswell on a Zen 5).
TEST(BlasTest, OpenBlasNamesItsKernels) {
  const std::string detail = cpu::UseBlas("openblas").detail;
  EXPECT_NE(detail.find(" kernels"), std::string::npos) << detail;
  if (const char* core = std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_NE(detail.find(std::string("OPENBLAS_CORETYPE=") + core), std::string::npos) << detail;
  } else {
    EXPECT_EQ(detail.find("OPENBLAS_CORETYPE"), std::string::npos) << detail;
  }
  cpu::UseBlas(flags::blas());
}

// Note [Which BLAS]: the same product gives the same bits whatever its operands' alignment (MKL
// runs in conditional numerical reproducibility mode; operand copies are only 16-byte aligned).
TEST(BlasTest, SameBitsWhateverTheAlignment) {
  ForEachBlas([] {
    const int64_t M = 96, N = 200, K = 333;
    std::vector<float> store(static_cast<size_t>((M * K + N * K + 64) * 2));
    std::vector<float> want(static_cast<size_t>(M * N)), got(want.size());
    for (int64_t shift : {0, 1, 2, 3, 5, 8}) {
      float* a = store.data() + shift;
      float* b = a + M * K + shift;
      for (int64_t i = 0; i < M * K; ++i) a[i] = std::sin(0.37 * static_cast<double>(i)) * 0.5f;
      for (int64_t i = 0; i < N * K; ++i) b[i] = std::cos(0.11 * static_cast<double>(i));
      cpu::Blas().sgemm(cpu::kCblasRowMajor, cpu::kCblasNoTrans, cpu::kCblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f,
                        (shift ? got : want).data(), N);
      if (shift) {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << shift;
      }
      if (cpu::Blas().dnnl_sgemm != nullptr) {  // and oneDNN's, for the products it takes
        std::vector<float> dnnl(want.size());
        ASSERT_EQ(cpu::Blas().dnnl_sgemm('N', 'T', M, N, K, 1.0f, a, K, b, K, 0.0f, dnnl.data(), N), 0);
        static std::vector<float> first;
        if (shift == 0) first = dnnl;
        EXPECT_EQ(std::memcmp(dnnl.data(), first.data(), dnnl.size() * sizeof(float)), 0) << "onednn " << shift;
      }
    }
  });
}

// Note [Products through oneDNN]: which products oneDNN takes is a function of the shape alone.
TEST(BlasTest, OnednnTakesSmallProductsAndUntransposedMediumOnes) {
  EXPECT_TRUE(cpu::DnnlTakes(false, false, 64, 64, 32, 128));     // the attention's
  EXPECT_TRUE(cpu::DnnlTakes(true, true, 64, 32, 64, 128));
  EXPECT_TRUE(cpu::DnnlTakes(true, false, 64, 64, 64, 512));      // 2^18 exactly, whatever ldb
  EXPECT_TRUE(cpu::DnnlTakes(false, true, 512, 512, 128, 128));   // GPT-2 small's logits
  EXPECT_TRUE(cpu::DnnlTakes(false, false, 256, 384, 128, 384));  // half of its QKV projection
  EXPECT_FALSE(cpu::DnnlTakes(false, false, 256, 512, 128, 512)); // half of its MLP's: B rows 2 KB apart
  EXPECT_FALSE(cpu::DnnlTakes(true, false, 512, 128, 512, 128));  // a weight gradient (A transposed)
  // On AVX-512 hosts every product up to 2^26 multiply-adds, those two included:
  EXPECT_TRUE(cpu::DnnlTakes(true, false, 512, 128, 512, 128, /*avx512=*/true));
  EXPECT_TRUE(cpu::DnnlTakes(true, false, 128, 512, 512, 512, true));
  EXPECT_TRUE(cpu::DnnlTakes(false, false, 256, 512, 128, 512, true));
  EXPECT_FALSE(cpu::DnnlTakes(false, false, 256, 768, 768, 768)); // GPT-2 124M's: OpenBLAS
  EXPECT_FALSE(cpu::DnnlTakes(false, false, 256, 768, 768, 768, true));
  EXPECT_FALSE(cpu::DnnlTakes(true, false, 768, 768, 256, 768, true));
  if (!cpu::DnnlAvailable()) GTEST_SKIP() << "oneDNN does not load here";
  const cpu::BlasLibrary& lib = cpu::UseBlas("onednn");
  EXPECT_EQ(lib.name, "onednn");
  EXPECT_NE(lib.dnnl_sgemm, nullptr);
  EXPECT_NE(lib.detail.find("oneDNN"), std::string::npos) << lib.detail;
  EXPECT_NE(lib.detail.find("OpenBLAS"), std::string::npos) << lib.detail;
  EXPECT_EQ(cpu::UseBlas("openblas").dnnl_sgemm, nullptr);
  cpu::UseBlas(flags::blas());
}

// Note [Products through oneDNN]: oneDNN's OpenMP runtime starts no threads of its own. A thread
// that never ran a product runs a few through oneDNN; the process has as many threads after as
// before (OpenMP would have started a team of hardware_concurrency threads for it).
TEST(BlasTest, OnednnStartsNoThreads) {
  if (!cpu::DnnlAvailable()) GTEST_SKIP() << "oneDNN does not load here";
  auto threads = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.is_directory() ? 1 : 0;
    return n;
  };
  ir::Module m("dot");
  Builder b(m.AddFunction("main"));
  const Shape lhs{4, 64, 32}, rhs{4, 32, 64};  // 4 products of 64 x 64 x 32: oneDNN's
  Value* d = b.DotGeneral(b.Parameter(0, F32(lhs)), b.Parameter(1, F32(rhs)), {{0}, {0}, {2}, {1}});
  b.Return({d});
  const Literal x = RandomLiteral(DType::kF32, lhs, 1), y = RandomLiteral(DType::kF32, rhs, 2);
  const Literal* const ops_array[] = {&x, &y};
  const cpu::KernelChoice k = cpu::SelectDotKernel(*d->node());
  ASSERT_NE(k.fn, nullptr);
  ASSERT_TRUE(cpu::DnnlTakes(false, false, 64, 64, 32, 64));
  cpu::UseBlas("onednn");
  int before = 0, after = 0;
  std::thread fresh([&] {
    cpu::ProductsOnOneThread alone;  // on this thread, not the pool's
    before = threads();
    for (int i = 0; i < 3; ++i) {
      Literal out(d->type());
      ASSERT_TRUE(k.fn(*d->node(), cpu::Operands(ops_array, 2), out));
    }
    after = threads();
  });
  fresh.join();
  EXPECT_EQ(after, before);
  cpu::UseBlas(flags::blas());
}

struct DotCase {
  const char* name;
  Shape lhs, rhs;
  DotGeneralAttrs attrs;
  int copies = 0;  // operands Arrange copies (the rest are read in place)
};

TEST(CpuDotTest, EveryLayoutThroughBlas) {
  // M = 48, K = 40, N = 56, batch 3: well above BlasMinFlops().
  const std::vector<DotCase> cases = {
      {"mk,kn", {48, 40}, {40, 56}, {{}, {}, {1}, {0}}},
      {"km,kn (lhs transposed)", {40, 48}, {40, 56}, {{}, {}, {0}, {0}}},
      {"mk,nk (rhs transposed)", {48, 40}, {56, 40}, {{}, {}, {1}, {1}}},
      {"km,nk (both transposed)", {40, 48}, {56, 40}, {{}, {}, {0}, {1}}},
      {"bmk,bkn", {3, 48, 40}, {3, 40, 56}, {{0}, {0}, {2}, {1}}},
      {"bkm,bnk", {3, 40, 48}, {3, 56, 40}, {{0}, {0}, {1}, {2}}},
      {"mbk,kbn (batch in the middle: strided batches)", {48, 3, 40}, {40, 3, 56}, {{1}, {1}, {2}, {0}}},
      {"bthd,bshd->bhts (attention scores, heads in place)", {2, 48, 3, 40}, {2, 56, 3, 40},
       {{0, 2}, {0, 2}, {3}, {3}}},
      {"bhts,bshd->bhtd (attention values)", {2, 3, 48, 40}, {2, 40, 3, 56}, {{0, 1}, {0, 2}, {3}, {1}}},
      {"kbm,bkn (lhs transposed, strided batches)", {40, 3, 48}, {3, 40, 56}, {{1}, {0}, {0}, {1}}},
      {"two contracting dims", {48, 8, 5}, {5, 8, 56}, {{}, {}, {1, 2}, {1, 0}}, 1},
      {"free dims on both sides of k", {6, 40, 8}, {40, 7, 8}, {{}, {}, {1}, {0}}, 1},
      {"matrix-vector", {48, 40}, {40}, {{}, {}, {1}, {0}}},
  };
  ASSERT_LE(cpu::BlasMinFlops(), 48 * 40 * 56);
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    for (const DotCase& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(DTypeName(t)));
      ir::Module m("dot");
      Builder b(m.AddFunction("main"));
      Value* x = b.Parameter(0, TensorType(t, c.lhs));
      Value* y = b.Parameter(1, TensorType(t, c.rhs));
      b.Return({b.DotGeneral(x, y, c.attrs)});
      // Sums of 40 products of values in [-1, 1): compare relative to a scale of 1. A half's f32
      // sum (Note [Products of halves]) can round to the neighbour of the interpreter's: one ulp.
      const double rel = t == DType::kF32 ? 1e-5 : t == DType::kF64 ? 1e-12 : t == DType::kBF16 ? 0x1p-7 : 0x1p-10;
      const int64_t copies = cpu::DotOperandCopies();
      const int runs = ExpectSame(m, {RandomLiteral(t, c.lhs, 1), RandomLiteral(t, c.rhs, 2)}, rel);
      EXPECT_EQ(cpu::DotOperandCopies() - copies, c.copies * runs);
    }
  }
}

TEST(CpuDotTest, TransposeIntoMatchesTheDefinition) {
  // {rows, cols, lds, ldd}: remainders of the 4 x 4 blocks, padded rows, and destination rows 1 KB
  // apart (the tiles that write 4 of them at a time).
  const std::vector<std::array<int64_t, 4>> cases = {
      {1, 1, 1, 1}, {3, 5, 7, 3}, {4, 4, 4, 4}, {17, 33, 40, 20}, {130, 512, 512, 130}, {512, 130, 130, 512}};
  for (const auto& [rows, cols, lds, ldd] : cases) {
    SCOPED_TRACE(fmt::format("{} x {}, lds {}, ldd {}", rows, cols, lds, ldd));
    std::vector<float> src(static_cast<size_t>(rows * lds)), dst(static_cast<size_t>(cols * ldd), -1.0f);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    cpu::TransposeInto(src.data(), rows, cols, lds, dst.data(), ldd);
    int64_t wrong = 0;
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < ldd; ++r) {
        const float want = r < rows ? src[static_cast<size_t>(r * lds + c)] : -1.0f;  // padding untouched
        wrong += dst[static_cast<size_t>(c * ldd + r)] != want;
      }
    EXPECT_EQ(wrong, 0);
  }
}

// Note [B transposed for oneDNN] (backends/cpu/dot.cc): with oneDNN on AVX-512, each item of a product
// whose B is stored [N, K] with K >= 512, N <= K / 4 and at least 256 rows, or with N <= 64,
// K <= 128 and at least 64 rows, reads B copied to [K, N]; no other product, and no other BLAS,
// copies it. Values as the interpreter's; an inf in B
// still gives the exact loop's pattern.
TEST(CpuDotTest, SomeTransposedBsAreCopiedForOneDnn) {
  struct Case {
    const char* name;
    int64_t M, K, N;
    bool copied;  // with oneDNN on AVX-512
  };
  const std::vector<Case> cases = {
      {"long and narrow", 256, 512, 64, true},
      {"N > K / 4", 256, 512, 160, false},
      {"K < 512", 256, 256, 64, false},
      {"M < 256", 128, 512, 64, false},
      {"small: an attention head's scores", 64, 32, 64, true},
      {"small, N > 64", 64, 32, 128, false},
      {"small, K > 128", 64, 256, 32, false},
      {"small, M < 64", 32, 32, 64, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ir::Module m("dot");
    Builder b(m.AddFunction("main"));
    // bmk,bnk->bmn: two batch items, one BLAS call each.
    b.Return({b.DotGeneral(b.Parameter(0, F32({2, c.M, c.K})), b.Parameter(1, F32({2, c.N, c.K})),
                           {{0}, {0}, {2}, {2}})});
    Literal x = RandomLiteral(DType::kF32, {2, c.M, c.K}, 3), y = RandomLiteral(DType::kF32, {2, c.N, c.K}, 4);
    const int64_t before = cpu::DotTransposedOperands();
    ExpectSame(m, {x, y}, 1e-4);  // sums of up to 512 products in f32
    const int64_t copies = cpu::DotTransposedOperands() - before;
    const bool dnnl512 = cpu::DnnlAvailable() && cpu::UseBlas("onednn").dnnl_avx512;
    cpu::UseBlas(flags::blas());
    EXPECT_EQ(copies, c.copied && dnnl512 ? 2 : 0);
    if (!c.copied) continue;
    y.mutable_data<float>()[5 * c.K + 7] = std::numeric_limits<float>::infinity();  // column 5 of item 0
    y.mutable_data<float>()[(c.N + 9) * c.K + 1] = std::numeric_limits<float>::quiet_NaN();
    ExpectSame(m, {x, y}, 0);
  }
}

// Note [Products side by side], Note [Products cut for the target]: a product makes the same
// BLAS calls paired (on one thread) as unpaired (over the pool), so its bits do not depend on the
// schedule. Single-item products large enough to be cut into tiles, with B transposed or not, long
// and narrow (Note [B transposed for oneDNN]) or not, with each BLAS: bitwise equal both ways.
// (Until session 40 a paired product ran as one call and an unpaired one in tiles; on an AVX-512
// host with oneDNN the tiles did not copy B, and GPT-2 small's MLP input gradient changed bits.)
TEST(CpuDotTest, AProductMakesTheSameCallsPairedOrNot) {
  struct Case {
    const char* name;
    int64_t M, K, N;
    bool b_transposed;
  };
  const std::vector<Case> cases = {
      {"dx = dy w^T, long and narrow", 512, 1024, 128, true},
      {"dx = dy w^T", 512, 384, 256, true},
      {"x w", 1024, 256, 384, false},
      {"wide: tiles by columns", 64, 512, 4096, false},
  };
  for (const char* blas : {"openblas", "onednn"}) {
    if (std::string(blas) == "onednn" && !cpu::DnnlAvailable()) continue;
    cpu::UseBlas(blas);
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{}: {}", blas, c.name));
      ir::Module m("dot");
      Builder b(m.AddFunction("main"));
      const Shape rhs = c.b_transposed ? Shape{c.N, c.K} : Shape{c.K, c.N};
      Value* d = b.DotGeneral(b.Parameter(0, F32({c.M, c.K})), b.Parameter(1, F32(rhs)),
                              {{}, {}, {1}, {c.b_transposed ? 1 : 0}});
      b.Return({d});
      const Literal x = RandomLiteral(DType::kF32, {c.M, c.K}, 5), y = RandomLiteral(DType::kF32, rhs, 6);
      const Literal* const ops_array[] = {&x, &y};
      const cpu::KernelChoice k = cpu::SelectDotKernel(*d->node());
      ASSERT_NE(k.fn, nullptr);
      Literal pool(d->type()), alone(d->type());
      {
        cpu::ProductsCutFor cut(2);  // as a two-thread target's executor does
        ASSERT_TRUE(k.fn(*d->node(), cpu::Operands(ops_array, 2), pool));
      }
      std::thread paired([&] {
        cpu::ProductsOnOneThread one;  // as a pair's thread does (region.cc)
        cpu::ProductsCutFor cut(2);
        ASSERT_TRUE(k.fn(*d->node(), cpu::Operands(ops_array, 2), alone));
      });
      paired.join();
      EXPECT_TRUE(testutil::SameBits(pool, alone));
    }
  }
  cpu::UseBlas(flags::blas());
}

// The exact loop (products under BlasMinFlops) reads the same in-place layouts: bitwise.
TEST(CpuDotTest, SmallStridedLayoutsAreExact) {
  const std::vector<DotCase> cases = {
      {"bthd,bshd->bhts", {2, 5, 3, 4}, {2, 6, 3, 4}, {{0, 2}, {0, 2}, {3}, {3}}},
      {"bhts,bshd->bhtd", {2, 3, 5, 6}, {2, 6, 3, 4}, {{0, 1}, {0, 2}, {3}, {1}}},
      {"kbm,bkn", {4, 3, 5}, {3, 4, 6}, {{1}, {0}, {0}, {1}}},
  };
  for (const DotCase& c : cases) {
    SCOPED_TRACE(c.name);
    ir::Module m("dot");
    Builder b(m.AddFunction("main"));
    b.Return({b.DotGeneral(b.Parameter(0, F32(c.lhs)), b.Parameter(1, F32(c.rhs)), c.attrs)});
    const int64_t copies = cpu::DotOperandCopies();
    ExpectSame(m, {RandomLiteral(DType::kF32, c.lhs, 1), RandomLiteral(DType::kF32, c.rhs, 2)}, 0);
    EXPECT_EQ(cpu::DotOperandCopies() - copies, 0);
  }
}

// Note [BLAS and non-finite values] (backends/cpu/dot.cc): an inf or NaN operand, a 0 * inf, and f32
// partial sums that overflow where the exact sum does not, on both the batched and the split path.
template <typename T>
void CheckNonFiniteDot(int64_t M, int64_t K, int64_t N) {
  SCOPED_TRACE(fmt::format("{} x {} x {} {}", M, K, N, sizeof(T) == 4 ? "f32" : "f64"));
  const DType t = sizeof(T) == 4 ? DType::kF32 : DType::kF64;
  const T inf = std::numeric_limits<T>::infinity(), big = std::numeric_limits<T>::max() / 2 * T(1.5);
  ir::Module m("dot");
  Builder b(m.AddFunction("main"));
  b.Return({b.MatMul(b.Parameter(0, TensorType(t, {M, K})), b.Parameter(1, TensorType(t, {K, N})))});
  auto run = [&](Literal x, Literal y, double rel) {
    std::vector<BufferPtr> want;
    ExpectSame(m, {x, y}, rel, nullptr, &want);
    return want;
  };
  {  // inf, NaN and 0 * inf: the exact loop's pattern, bitwise.
    Literal x = RandomLiteral(t, {M, K}, 5), y = RandomLiteral(t, {K, N}, 6);
    T* xs = x.mutable_data<T>();
    T* ys = y.mutable_data<T>();
    xs[3 * K + 5] = inf;
    ys[7 * N + 10] = std::numeric_limits<T>::quiet_NaN();
    xs[9 * K + 20] = -inf;
    for (int64_t n = 0; n < N; ++n) ys[20 * N + n] = 0;  // row 9 of the product: -inf * 0 = NaN
    run(x, y, 0);
  }
  {  // big + big - big: inf in an f32 running sum, finite in the interpreter's double one.
    Literal x = RandomLiteral(t, {M, K}, 7), y = RandomLiteral(t, {K, N}, 8);
    T* xs = x.mutable_data<T>();
    T* ys = y.mutable_data<T>();
    for (int64_t k = 0; k < K; ++k) xs[11 * K + k] = k == 0 || k == 1 ? big : k == 2 ? -big : T(0);
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t n = 0; n < N; ++n) ys[k * N + n] = 1;
    std::vector<BufferPtr> want = run(x, y, 1e-5);
    if (t == DType::kF32) {
      EXPECT_TRUE(std::isfinite(want[0]->data<T>()[11 * N]));  // double accumulation
    }
  }
}

TEST(CpuDotTest, NonFiniteValuesMatchTheExactLoop) {
  CheckNonFiniteDot<float>(64, 48, 96);     // one BLAS call per batch entry
  CheckNonFiniteDot<float>(128, 96, 128);   // split over the pool
  CheckNonFiniteDot<double>(128, 96, 128);
}

// Note [Zeroing C ourselves] (backends/cpu/dot.cc): OpenBLAS is called with beta = 1 on a C we clear
// first, so what the output buffer held before (a recycled intermediate: here NaN) never reaches
// the result, on the batched path and on C split by rows and by columns.
TEST(CpuDotTest, WhatTheOutputBufferHeldDoesNotReachTheResult) {
  ForEachBlas([] {
    struct Case { Shape lhs, rhs; DotGeneralAttrs attrs; };
    const std::vector<Case> cases = {
        {{3, 48, 40}, {3, 40, 56}, {{0}, {0}, {2}, {1}}},      // a batch: one call per product
        {{128, 96}, {96, 130}, {{}, {}, {1}, {0}}},            // split over the pool
        {{1100, 32}, {1100, 2000}, {{}, {}, {0}, {0}}},        // x^T y: column blocks (strided rows)
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.lhs.ToString() + " x " + c.rhs.ToString());
      ir::Module m("dot");
      Builder b(m.AddFunction("main"));
      Value* x = b.Parameter(0, TensorType(DType::kF32, c.lhs));
      Value* y = b.Parameter(1, TensorType(DType::kF32, c.rhs));
      Value* d = b.DotGeneral(x, y, c.attrs);
      b.Return({d});
      const Literal lx = RandomLiteral(DType::kF32, c.lhs, 3), ly = RandomLiteral(DType::kF32, c.rhs, 4);
      const cpu::KernelChoice k = cpu::SelectDotKernel(*d->node());
      ASSERT_NE(k.fn, nullptr);
      const Literal* const ops_array[] = {&lx, &ly};
      const cpu::Operands ops(ops_array, 2);
      Literal clean(d->type());
      ASSERT_TRUE(k.fn(*d->node(), ops, clean));
      Literal dirty(d->type());
      std::fill(dirty.mutable_data<float>(), dirty.mutable_data<float>() + dirty.NumElements(),
                std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(k.fn(*d->node(), ops, dirty));
      EXPECT_EQ(std::memcmp(clean.data<float>(), dirty.data<float>(), sizeof(float) * clean.NumElements()), 0);
      // And they are a product: against the exact loop's double sums.
      const std::vector<Literal> want = ir::Evaluate(*m.entry(), {lx, ly});
      for (int64_t i = 0; i < clean.NumElements(); ++i)
        ASSERT_NEAR(clean.data<float>()[i], want[0].data<float>()[i], 1e-4) << i;
    }
  });
}

// Note [Product tiles] (backends/cpu/dot.cc): a product whose C is a few MB per thread is cut into one
// block per thread; a bigger one into at least two tiles per thread of at most 2 MB, covering C
// with no empty tile.
TEST(CpuDotTest, LargeProductsAreCutIntoTilesThatCoverTheResult) {
  struct Case {
    int64_t M, N, K;
    int threads;
    bool tiled;
    bool by_rows = false;  // when not tiled
  };
  const std::vector<Case> cases = {
      {256, 3072, 768, 2, false, false},  // a layer's forward product: columns (each packs half of B)
      {768, 3072, 256, 2, false, true},   // its weight gradient (K < M): rows
      {3072, 768, 256, 2, false, true},   {96, 300, 4000, 2, false, false}, {20, 10, 5, 2, false, true},
      {50257, 768, 256, 2, true},         {256, 50257, 768, 2, true},       {96, 45000, 8, 2, true},
      {4200, 1040, 8, 2, true},           {5000, 5000, 64, 3, true},        {8, 2000000, 8, 2, true},
      {2000000, 8, 8, 4, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} x {} x {} on {} threads", c.M, c.K, c.N, c.threads));
    const cpu::DotTiles t = cpu::DotTiling(c.M, c.N, c.K, c.threads);
    ASSERT_GE(t.rows, 1);
    ASSERT_GE(t.cols, 1);
    // The tiles cover [0, M) x [0, N), and the last row and column of tiles are not empty.
    EXPECT_GE(t.rows * t.row_extent, c.M);
    EXPECT_GE(t.cols * t.col_extent, c.N);
    EXPECT_LT((t.rows - 1) * t.row_extent, c.M);
    EXPECT_LT((t.cols - 1) * t.col_extent, c.N);
    if (!c.tiled) {
      EXPECT_EQ(c.by_rows ? t.rows : t.cols, c.threads);
      EXPECT_EQ(t.rows * t.cols, c.threads);
      continue;
    }
    EXPECT_GE(t.rows * t.cols, 2 * c.threads);
    // At most 2 MB of f32, except where a 16-wide strip is itself larger.
    EXPECT_LE(std::min(t.row_extent, c.M) * std::min(t.col_extent, c.N), (int64_t{1} << 19) + 16 * (c.M + c.N));
  }
}

// Tiled products against the interpreter, both orientations, and non-finite results in a tile.
TEST(CpuDotTest, TiledProductsMatchTheInterpreter) {
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{4200, 1040}, {96, 45000}}) {
    SCOPED_TRACE(fmt::format("{} x 8 x {}", m, n));
    ir::Module mod("dot");
    Builder b(mod.AddFunction("main"));
    b.Return({b.MatMul(b.Parameter(0, F32({m, 8})), b.Parameter(1, F32({8, n})))});
    ExpectSame(mod, {RandomLiteral(DType::kF32, {m, 8}, 1), RandomLiteral(DType::kF32, {8, n}, 2)}, 1e-5);
  }
  CheckNonFiniteDot<float>(4200, 24, 1040);
}

// Note [Products of halves]: a large bf16 product cut into tiles, and products of halves with an
// inf or a NaN (the exact loop: bitwise), on every BLAS (with oneDNN, bf16 goes through its bf16
// GEMM where this CPU has one; with OpenBLAS, widened to f32).
TEST(CpuDotTest, HalfProductsTiledAndNonFinite) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    ir::Module tiled("dot");
    Builder b(tiled.AddFunction("main"));
    b.Return({b.MatMul(b.Parameter(0, TensorType(t, Shape{4200, 8})), b.Parameter(1, TensorType(t, Shape{8, 1040})))});
    ExpectSame(tiled, {RandomLiteral(t, {4200, 8}, 1), RandomLiteral(t, {8, 1040}, 2)},
               t == DType::kBF16 ? 0x1p-7 : 0x1p-10);
    ir::Module special("dot");
    Builder c(special.AddFunction("main"));
    c.Return({c.MatMul(c.Parameter(0, TensorType(t, Shape{64, 48})), c.Parameter(1, TensorType(t, Shape{48, 96})))});
    Literal x = RandomLiteral(t, {64, 48}, 3), y = RandomLiteral(t, {48, 96}, 4);
    x.SetDouble(5 * 48 + 7, std::numeric_limits<double>::infinity());
    y.SetDouble(9 * 96 + 11, std::numeric_limits<double>::quiet_NaN());
    ExpectSame(special, {x, y}, 0);
  }
}

TEST(CpuDotTest, SmallDotsAreExactAndEmptyContractionIsZero) {
  ir::Module m("dot");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({3, 0}));
  Value* y = b.Parameter(1, F32({0, 4}));
  Value* u = b.Parameter(2, F32({5, 3}));
  Value* v = b.Parameter(3, F32({3, 2}));
  b.Return({b.MatMul(x, y), b.MatMul(u, v)});
  ExpectSame(m, {Literal(F32({3, 0})), Literal(F32({0, 4})), RandomLiteral(DType::kF32, {5, 3}, 3),
                 RandomLiteral(DType::kF32, {3, 2}, 4)}, 0);
}

// Note [Keeping freed memory] (backends/cpu/executor.cc): a buffer freed by a thread other than the main
// one (the executor thread allocates every kernel's outputs) is reused by the next allocation of
// its size without faulting its pages in again. glibc gives such a thread its own arena of
// mmapped heaps unless the process has one arena; the backend's static initializer sets it.
TEST(CpuMemoryTest, BuffersFreedOnAnotherThreadAreReusedWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer has its own allocator";
#endif
  (void)GetBackend("cpu");  // the backend's library, and so its static initializer, is linked in
  auto faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<int64_t>(u.ru_minflt);
  };
  const int64_t elements = int64_t{16} << 20;  // 64 MB: 16K pages
  std::vector<int64_t> per_round;
  std::thread([&] {
    for (int round = 0; round < 4; ++round) {
      const int64_t before = faults();
      Literal a = Literal::Uninitialized(F32({elements}));
      Literal b = Literal::Uninitialized(F32({elements / 2}));
      std::memset(a.mutable_bytes().data(), round, a.mutable_bytes().size());
      std::memset(b.mutable_bytes().data(), round, b.mutable_bytes().size());
      per_round.push_back(faults() - before);
    }
  }).join();
  // The first round may fault its pages in (or reuse memory earlier tests freed); later ones
  // must not (with an arena per thread each round faulted ~24K pages in).
  for (size_t r = 1; r < per_round.size(); ++r) EXPECT_LT(per_round[r], 500) << "round " << r;
}

// Big tensors (> 32K elements) take the threaded paths; every one is bitwise exact.
TEST(CpuThreadedTest, BigTensorsMatchBitwise) {
  const Shape s{64, 96, 72};  // 442368 elements
  ir::Module m("big");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32(s));
  Value* y = b.Parameter(1, F32(s));
  Value* half = b.BroadcastInDim(b.Scalar(DType::kF32, 0.5), s, {});
  Value* row = b.Parameter(2, F32({72}));
  Value* e = b.Unary(OpKind::kExp, b.Mul(x, half));
  Value* z = b.Add(b.Sub(e, y), b.BroadcastInDim(row, s, {2}));
  Value* mx = b.Max(z, y);
  Value* t = b.Transpose(mx, {2, 0, 1});
  Value* sel = b.Select(b.Compare(ir::CompareDir::kGt, x, y), x, mx);
  Value* cvt = b.Convert(b.Convert(sel, DType::kF64), DType::kF32);
  Value* inner = b.Reduce(cvt, ReduceKind::kSum, {2});
  Value* leading = b.Reduce(z, ReduceKind::kSum, {0});
  Value* middle = b.Reduce(z, ReduceKind::kMax, {1});
  Value* scattered = b.Reduce(t, ReduceKind::kMin, {0, 2});
  Value* all = b.Reduce(z, ReduceKind::kSum, {0, 1, 2});
  Value* sl = b.Build1(OpKind::kSlice, {t}, ir::SliceAttrs{{1, 0, 3}, {70, 64, 96}, {2, 1, 3}});
  Value* cat = b.Build1(OpKind::kConcatenate, {x, y, x}, ir::ConcatenateAttrs{1});
  Value* rs = b.Reshape(cat, Shape{64 * 288, 72});
  // Embedding lookup and its gradient: gather rows of a table, scatter_add them back.
  Value* table = b.Reshape(x, Shape{64 * 96, 72});
  std::vector<int32_t> ids(5000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 6200) - 3;
  Value* idx = b.Constant(Literal::FromVector<int32_t>(DType::kI32, {5000}, ids));
  Value* g = b.Build1(OpKind::kGather, {table, idx}, ir::GatherAttrs{0, 0});
  Value* grad = b.Build1(OpKind::kScatterAdd, {table, idx, g}, ir::GatherAttrs{0, 0});
  // Many updates to few rows, cut by destination rows over the pool (Note [Scatter-add by
  // destination rows]): each row must still add its updates in order, rounding each add.
  std::vector<int32_t> dup(5000);
  for (size_t i = 0; i < dup.size(); ++i) dup[i] = static_cast<int32_t>((i * 13) % 97) * 61;
  Value* dup_idx = b.Constant(Literal::FromVector<int32_t>(DType::kI32, {5000}, dup));
  Value* dup_grad = b.Build1(OpKind::kScatterAdd, {table, dup_idx, g}, ir::GatherAttrs{0, 0});
  b.Return({z, t, inner, leading, middle, scattered, all, sl, rs, g, grad, cvt, dup_grad});
  ExpectSame(m, {RandomLiteral(DType::kF32, s, 5), RandomLiteral(DType::kF32, s, 6),
                 RandomLiteral(DType::kF32, {72}, 7)}, 0);
}

TEST(CpuDonationTest, UniqueArgumentStorageIsReused) {
  const Shape s{1000};
  ir::Module m("step");
  Builder b(m.AddFunction("main"));
  Value* p = b.Parameter(0, F32(s), "param");
  Value* g = b.Parameter(1, F32(s), "grad");
  Value* lr = b.BroadcastInDim(b.Scalar(DType::kF32, 0.25), s, {});
  b.Return({b.Sub(p, b.Mul(g, lr))});
  auto exe = GetBackend("cpu").Compile(m);
  const Literal p0 = RandomLiteral(DType::kF32, s, 8), g0 = RandomLiteral(DType::kF32, s, 9);
  const std::vector<BufferPtr> want = testutil::Run("interpreter", m, {p0, g0});

  // Donated: the result lives in the parameter's storage.
  auto param = std::make_shared<Literal>(p0);
  auto grad = std::make_shared<Literal>(g0);
  const float* storage = param->data<float>();
  std::vector<BufferPtr> args;
  args.push_back(std::move(param));
  args.push_back(grad);  // shared with this test: read only
  std::vector<BufferPtr> out = exe->Execute(std::move(args));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->data<float>(), storage);
  EXPECT_EQ(exe->last_stats().donated_reused, 1);
  EXPECT_TRUE(*out[0] == *want[0]);
  EXPECT_TRUE(*grad == g0);  // untouched

  // Not donated: the caller keeps a reference, so it must not change.
  auto kept = std::make_shared<Literal>(p0);
  out = exe->Execute({kept, grad});
  EXPECT_NE(out[0]->data<float>(), kept->data<float>());
  EXPECT_EQ(exe->last_stats().donated_reused, 0);
  EXPECT_TRUE(*kept == p0);
  EXPECT_TRUE(*out[0] == *want[0]);
  EXPECT_EQ(exe->last_stats().kernels_run, 3);  // broadcast, mul, sub (not parameters, constants)
}

TEST(CpuDonationTest, IntermediatesAreFreedAfterTheirLastUse) {
  // A chain of 10 adds on 1 MB tensors: at most ~3 live at once, not 10.
  const Shape s{256, 1024};
  ir::Module m("chain");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32(s));
  Value* v = x;
  for (int i = 0; i < 10; ++i) v = b.Unary(OpKind::kTanh, b.Add(v, x));
  b.Return({v});
  ExecuteStats stats;
  ExpectSame(m, {RandomLiteral(DType::kF32, s, 10)}, 0, &stats);
  EXPECT_EQ(stats.kernels_run, 20);
  EXPECT_LE(stats.peak_bytes, 2 * 256 * 1024 * 4);
  EXPECT_GT(stats.peak_bytes, 0);
}

TEST(CpuArgumentsTest, WrongCountOrTypeNamesTheParameter) {
  ir::Module m("f");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32({2, 3}), "x");
  Value* y = b.Parameter(1, F32({3}), "y");
  b.Return({b.Add(x, b.BroadcastInDim(y, Shape{2, 3}, {1}))});
  for (const char* name : {"cpu", "interpreter"}) {
    auto exe = GetBackend(name).Compile(m);
    try {
      exe->Execute({std::make_shared<Literal>(F32({2, 3}))});
      ADD_FAILURE() << name << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected 2 arguments, got 1"), std::string::npos) << e.what();
    }
    try {
      exe->Execute({std::make_shared<Literal>(F32({2, 3})),
                    std::make_shared<Literal>(TensorType(DType::kF64, Shape{3}))});
      ADD_FAILURE() << name << ": expected an error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("argument 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("f64[3]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("f32[3]"), std::string::npos) << msg;
    }
  }
}

TEST(CpuMlpTest, ForwardAndBackwardMatchTheInterpreter) {
  // loss = sum((tanh(x W1 + b1) W2 + b2 - target)^2) / batch
  const int64_t B = 32, I = 64, H = 128, O = 16;
  std::unique_ptr<ir::Module> mlp = testing::MlpLossModule(B, I, H, O);
  const ir::Module& m = *mlp;
  std::unique_ptr<ir::Module> g = autodiff::GradModule(m, 0, {1, 2, 3, 4});
  std::vector<Literal> args = {RandomLiteral(DType::kF32, {B, I}, 11),
                               RandomLiteral(DType::kF32, {I, H}, 12),
                               RandomLiteral(DType::kF32, {H}, 13),
                               RandomLiteral(DType::kF32, {H, O}, 14),
                               RandomLiteral(DType::kF32, {O}, 15),
                               RandomLiteral(DType::kF32, {B, O}, 16)};
  ASSERT_EQ(g->entry()->results().size(), 5u);
  std::vector<BufferPtr> want = testutil::Run("interpreter", *g, args);
  std::vector<BufferPtr> got = testutil::Run("cpu", *g, args);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 0;  // relative to the result's largest magnitude
    for (int64_t k = 0; k < want[i]->NumElements(); ++k) scale = std::max(scale, std::fabs(want[i]->GetDouble(k)));
    std::string where;
    EXPECT_TRUE(testutil::Near(*want[i], *got[i], 1e-5, scale, &where)) << "result " << i << ": " << where;
  }
}

// Not a correctness test: prints the cpu backend's speed against the interpreter's.
TEST(CpuBenchmarkTest, DotAndAdd) {
  using Clock = std::chrono::steady_clock;
  auto time = [](Executable& exe, const std::vector<Literal>& args, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto bufs = testutil::Buffers(args);
      auto t0 = Clock::now();
      exe.Execute(std::move(bufs));
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
  };
  {
    const int64_t n = 1024;
    ir::Module m("dot");
    Builder b(m.AddFunction("main"));
    b.Return({b.MatMul(b.Parameter(0, F32({n, n})), b.Parameter(1, F32({n, n})))});
    std::vector<Literal> args = {RandomLiteral(DType::kF32, {n, n}, 1), RandomLiteral(DType::kF32, {n, n}, 2)};
    auto cpu = GetBackend("cpu").Compile(m);
    const double t_cpu = time(*cpu, args, 3);
    std::printf("[bench] f32 [1024x1024]x[1024x1024] dot: cpu %.4f s (%.1f GFLOP/s)\n", t_cpu,
                2.0 * n * n * n / t_cpu / 1e9);
    if (std::getenv("AXLE_BENCH_INTERPRETER")) {
      auto interp = GetBackend("interpreter").Compile(m);
      std::printf("[bench]   interpreter %.2f s\n", time(*interp, args, 1));
    }
  }
  {
    const Shape s{4 * 1024 * 1024};
    ir::Module m("add");
    Builder b(m.AddFunction("main"));
    b.Return({b.Add(b.Parameter(0, F32(s)), b.Parameter(1, F32(s)))});
    std::vector<Literal> args = {RandomLiteral(DType::kF32, s, 1), RandomLiteral(DType::kF32, s, 2)};
    auto cpu = GetBackend("cpu").Compile(m);
    auto interp = GetBackend("interpreter").Compile(m);
    std::printf("[bench] f32 4M-element add: cpu %.4f s, interpreter %.4f s\n", time(*cpu, args, 5),
                time(*interp, args, 2));
  }
}

}  // namespace
}  // namespace axle::runtime

namespace axle::runtime {
namespace {

// Executables may run concurrently on different threads (they share the kernels' thread pool).
TEST(CpuThreadedTest, TwoExecutablesOnTwoThreads) {
  const Shape s{512, 512};
  ir::Module m("par");
  Builder b(m.AddFunction("main"));
  Value* x = b.Parameter(0, F32(s));
  Value* y = b.Unary(OpKind::kTanh, b.Add(x, b.Transpose(x, {1, 0})));
  b.Return({b.Reduce(y, ReduceKind::kSum, {0}), b.MatMul(y, y)});
  const std::vector<Literal> args = {RandomLiteral(DType::kF32, s, 21)};
  const std::vector<BufferPtr> want = testutil::Run("cpu", m, args);
  auto e1 = GetBackend("cpu").Compile(m), e2 = GetBackend("cpu").Compile(m);
  std::vector<BufferPtr> r1, r2;
  std::thread t([&] {
    for (int i = 0; i < 5; ++i) r1 = e1->Execute(testutil::Buffers(args));
  });
  for (int i = 0; i < 5; ++i) r2 = e2->Execute(testutil::Buffers(args));
  t.join();
  EXPECT_TRUE(*r1[0] == *want[0]);  // the reduce is exact
  EXPECT_TRUE(*r2[0] == *want[0]);
  std::string where;  // OpenBLAS is expected to be deterministic, but promises no bits
  EXPECT_TRUE(testutil::Near(*want[1], *r1[1], 1e-6, 1.0, &where)) << where;
  EXPECT_TRUE(testutil::Near(*want[1], *r2[1], 1e-6, 1.0, &where)) << where;
}

}  // namespace
}  // namespace axle::runtime

namespace axle::runtime {
namespace {

// Collectives run on devices (runtime/devices.h, tests/runtime/collectives_test.cc); a plain
// Execute of a module partitioned for several replicas is refused.
TEST(CpuCompileTest, PartitionedModulesNeedDevices) {
  ir::Module m("allreduce");
  m.set_num_replicas(2);
  Builder b(m.AddFunction("main"), ir::ShapeContext{2});
  Value* x = b.Parameter(0, F32({4}), "x");
  Value* s = b.Build1(OpKind::kAllReduce, {x}, ir::AllReduceAttrs{ReduceKind::kSum, {}});
  s->set_name("summed");
  b.Return({s});
  auto exe = GetBackend("cpu").Compile(m);
  try {
    exe->Execute({std::make_shared<Literal>(F32({4}))});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("partitioned for 2 replicas"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace axle::runtime

namespace axle::runtime {
namespace {

TEST(EvaluateNodeTest, RunsOneLocalKernelAndRejectsTheRest) {
  ir::Module m("f");
  m.set_num_replicas(2);
  Builder b(m.AddFunction("main"), ir::ShapeContext{2});
  Value* x = b.Parameter(0, F32({3}), "x");
  Value* e = b.Unary(OpKind::kExp, x);
  Value* s = b.Build1(OpKind::kAllReduce, {x}, ir::AllReduceAttrs{ReduceKind::kSum, {}});
  b.Return({e, s});
  const Literal in = Literal::FromVector<float>(DType::kF32, {3}, {0.f, 1.f, -2.f});
  const Literal* ops[] = {&in};
  std::vector<Literal> out = ir::EvaluateNode(*e->node(), ops);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data<float>()[1], std::exp(1.0f));
  EXPECT_THROW(ir::EvaluateNode(*s->node(), ops), Error);
  EXPECT_THROW(ir::EvaluateNode(*x->node(), {}), Error);
}

}  // namespace
}  // namespace axle::runtime
