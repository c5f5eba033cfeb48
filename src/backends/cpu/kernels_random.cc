// rng_bit_generator on the CPU: Philox-4x32-10 (ir/philox.h), bit for bit the interpreter's
// sequence (element i is word i % 4 of philox(key, counter + i / 4)), computed block by block
// straight into the result and split over the thread pool (blocks are independent).
#include <algorithm>

#include "backends/cpu/kernels.h"
#include "ir/philox.h"
#include "runtime/thread_pool.h"

namespace axle::runtime::cpu {
namespace {

using ir::Literal;
using ir::Node;

bool RngBitGenerator(const Node&, Operands ops, Literal& out) {
  const uint32_t* k = ops[0]->data<uint32_t>();
  const uint32_t* c = ops[1]->data<uint32_t>();
  const std::array<uint32_t, 2> key = {k[0], k[1]};
  const ir::PhiloxBlock counter = {c[0], c[1], c[2], c[3]};
  uint32_t* dst = out.mutable_data<uint32_t>();
  const int64_t n = out.NumElements();
  const int64_t blocks = (n + 3) / 4;
  ThreadPool::Global().ParallelFor(blocks, kParallelElements / 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const ir::PhiloxBlock w = ir::Philox4x32_10(key, ir::AddToCounter(counter, static_cast<uint64_t>(b)));
      const int64_t base = 4 * b;
      const int64_t m = std::min<int64_t>(4, n - base);
      for (int64_t j = 0; j < m; ++j) dst[base + j] = w[static_cast<size_t>(j)];
    }
  });
  return true;
}

}  // namespace

KernelChoice SelectRandomKernel(const Node& node) {
  if (node.op() == ir::OpKind::kRngBitGenerator && node.result()->dtype() == DType::kU32 &&
      node.operand(0)->dtype() == DType::kU32 && node.operand(1)->dtype() == DType::kU32)
    return {RngBitGenerator, false, -1, "rng_bit_generator"};
  return {};
}

}  // namespace axle::runtime::cpu
