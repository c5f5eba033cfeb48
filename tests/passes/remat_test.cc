// The remat pass under a memory budget (Note [Rematerialization under a budget], passes/remat.cc)
// on the compiled backend: the plan fits the budget, the results keep their bits, and a budget it
// cannot meet is an error naming the smallest it meets. (tests/passes/remat.axir shows the rewrite
// as text; tests/train/parallel_test.cc holds a training run's losses to the run without.)
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "autodiff/vjp.h"
#include "backends/cpu/executor.h"
#include "backends/registry.h"
#include "core/error.h"
#include "core/flags.h"
#include "ir/builder.h"
#include "../runtime/runtime_test_util.h"

namespace axle {
namespace {

using ir::Value;

// flags::memory_budget for a scope.
struct BudgetScope {
  int64_t saved = flags::memory_budget();
  explicit BudgetScope(int64_t bytes) { flags::set_memory_budget(bytes); }
  ~BudgetScope() { flags::set_memory_budget(saved); }
};

// A deep tanh MLP's loss and its gradients: every layer's activations are kept from the forward
// to the backward, so the step's peak is at the turn, as a transformer's is.
std::unique_ptr<ir::Module> DeepMlpStep(int64_t batch, int64_t width, int layers) {
  auto f32 = [](Shape s) { return ir::TensorType(DType::kF32, std::move(s)); };
  ir::Module m("deep");
  ir::Builder b(m.AddFunction("main"));
  Value* h = b.Parameter(0, f32({batch, width}), "x");
  std::vector<int> wrt;
  for (int l = 0; l < layers; ++l) {
    Value* w = b.Parameter(1 + 2 * l, f32({width, width}), "w" + std::to_string(l));
    Value* bias = b.Parameter(2 + 2 * l, f32({width}), "b" + std::to_string(l));
    h = b.Unary(ir::OpKind::kTanh, b.Add(b.MatMul(h, w), b.BroadcastInDim(bias, Shape{batch, width}, {1})));
    // Centred over the batch: a column sum, which reads every row, so the schedule does not run
    // the whole forward as one chain of row blocks (Note [Batch-sliced chains]), whose values
    // would all live across it.
    Value* sum = b.BroadcastInDim(b.Reduce(h, ir::ReduceKind::kSum, {0}), Shape{batch, width}, {1});
    h = b.Sub(h, b.Mul(sum, b.BroadcastInDim(b.Scalar(DType::kF32, 1.0 / static_cast<double>(batch)), Shape{batch, width}, {})));
    wrt.push_back(1 + 2 * l);
    wrt.push_back(2 + 2 * l);
  }
  b.Return({b.Reduce(b.Mul(h, h), ir::ReduceKind::kSum, {0, 1})});
  return autodiff::GradModule(m, 0, wrt);
}

std::vector<ir::Literal> Args(const ir::Module& m) {
  std::vector<ir::Literal> args;
  uint64_t seed = 1;
  for (const ir::Node* p : m.entry()->Parameters()) {
    const ir::TensorType& t = p->result()->type();
    args.push_back(runtime::testutil::RandomLiteral(t.dtype, t.shape, seed++));
  }
  return args;
}

int64_t Arena(const runtime::Executable& exe) { return runtime::BuffersOf(exe).plan->arena_bytes; }
size_t Steps(const runtime::Executable& exe) { return runtime::BuffersOf(exe).problem->steps.size(); }

TEST(RematTest, ABudgetIsMetAndTheResultsKeepTheirBits) {
  const std::unique_ptr<ir::Module> m = DeepMlpStep(256, 256, 6);
  const std::vector<ir::Literal> args = Args(*m);
  runtime::Backend& backend = runtime::GetBackend("compiled");
  std::unique_ptr<runtime::Executable> plain;
  {
    BudgetScope none(0);
    plain = backend.Compile(*m);
  }
  const std::vector<runtime::BufferPtr> want = plain->Execute(runtime::testutil::Buffers(args));
  for (const double fraction : {0.75, 0.5}) {
    SCOPED_TRACE(fmt::format("budget {} of {} bytes", fraction, Arena(*plain)));
    const int64_t budget = static_cast<int64_t>(fraction * static_cast<double>(Arena(*plain)));
    BudgetScope scope(budget);
    const std::unique_ptr<runtime::Executable> exe = backend.Compile(*m);
    EXPECT_LE(Arena(*exe), budget);
    EXPECT_GT(Steps(*exe), Steps(*plain));  // kernels run again
    const std::vector<runtime::BufferPtr> got = exe->Execute(runtime::testutil::Buffers(args));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(runtime::testutil::SameBits(*want[i], *got[i])) << "result " << i;
  }
}

// A budget below what the pass reaches: an error naming the budget it does meet, which then works.
TEST(RematTest, AnUnmetBudgetNamesTheSmallestItMeets) {
  const std::unique_ptr<ir::Module> m = DeepMlpStep(256, 256, 6);
  runtime::Backend& backend = runtime::GetBackend("compiled");
  std::string message;
  {
    BudgetScope scope(1000);
    try {
      backend.Compile(*m);
    } catch (const Error& e) {
      message = e.what();
    }
  }
  ASSERT_NE(message.find("remat: the memory budget of 1.0 KB cannot be met"), std::string::npos) << message;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(message, match, std::regex("give --memory-budget (\\S+) or more"))) << message;
  const int64_t smallest = flags::ParseByteSize(match[1].str(), "--memory-budget");
  BudgetScope scope(smallest);
  const std::unique_ptr<runtime::Executable> exe = backend.Compile(*m);
  EXPECT_LE(Arena(*exe), smallest);
}

}  // namespace
}  // namespace axle
