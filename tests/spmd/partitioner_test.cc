// The SPMD partitioner (src/spmd/partitioner.h): collectives it inserts (printed IR against CHECK
// lines), errors, the shard helpers, and differential tests: each global program, with random
// shardings on several meshes, must give through ir::EvaluateReplicated on the shards what
// ir::Evaluate gives on the whole inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"
#include "testing/filecheck.h"
#include "diff_harness.h"

namespace axle {
namespace {

using ir::Builder;
using ir::DotGeneralAttrs;
using ir::Literal;
using ir::Mesh;
using ir::Module;
using ir::OpKind;
using ir::Sharding;
using ir::TensorType;
using ir::Value;
using spmd_test::CheckRandomShardings;
using spmd_test::Dot;
using spmd_test::F32;
using spmd_test::Meshes;
using spmd_test::Program;

// ---------------------------------------------------------------------------------------------
// Printed partitioned programs.

std::string PartitionText(const std::string& text) {
  std::unique_ptr<Module> m = ir::ParseModule(text);
  return ir::PrintModule(*spmd::Partition(*m));
}

void ExpectChecks(const std::string& text, const std::string& checks) {
  std::string printed = PartitionText(text);
  testing::FileCheckResult r = testing::FileCheck(printed, checks);
  EXPECT_TRUE(r.ok) << r.message << "\n--- printed module:\n" << printed;
}

TEST(PartitionText, ContractingDimShardedIsOneAllReduce) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4,8]{[], [x]}
    %b = parameter() {index=1} : f32[8,2]{[x], []}
    %c = dot_general(%a, %b) {lhs_contracting=[1], rhs_contracting=[0]} : f32[4,2]
    return %c
  }
})",
               R"(
// CHECK: num_replicas=2
// CHECK: %a = parameter() {index=0} : f32[4,4]
// CHECK: %b = parameter() {index=1} : f32[4,2]
// CHECK-NOT: all_gather
// CHECK: dot_general(%a, %b) {{.*}} : f32[4,2]
// CHECK-NEXT: %c = all_reduce({{.*}}) {kind=sum, groups=[[0, 1]]} : f32[4,2]
// CHECK-NEXT: return %c
)");
}

// Note [Partitioned random bits]: randn's [2, rows, cols] draw split by rows is two runs of the
// stream per device, each drawn locally from its own counter; nothing is drawn whole.
TEST(PartitionText, RandomBitsSplitByRowsAreDrawnPerDevice) {
  ExpectChecks(R"(module @m {mesh_axes=[fsdp], mesh_shape=[4]} {
  func @main {
    %key = constant() {value=[7, 9]} : u32[2]
    %ctr = constant() {value=[0, 0, 0, 0]} : u32[4]
    %bits = rng_bit_generator(%key, %ctr) : u32[2,8,12]{[], [fsdp], []}
    return %bits
  }
})",
               R"(
// CHECK-NOT: u32[2,8,12]
// CHECK: replica_id
// CHECK: rng_bit_generator({{.*}}) : u32[24]
// CHECK: rng_bit_generator({{.*}}) : u32[24]
// CHECK: concatenate({{.*}}) {dim=0} : u32[48]
// CHECK: reshape({{.*}}) : u32[2,2,12]
// CHECK-NOT: all_gather
)");
}

TEST(PartitionText, ShardedBatchDimNeedsNoCollective) {
  ExpectChecks(R"(module @m {mesh_axes=[dp, tp], mesh_shape=[2,2]} {
  func @main {
    %a = parameter() {index=0} : f32[4,3,5]{[dp], [], []}
    %b = parameter() {index=1} : f32[4,5,6]{[dp], [], [tp]}
    %c = dot_general(%a, %b) {lhs_batch=[0], rhs_batch=[0], lhs_contracting=[2], rhs_contracting=[1]} : f32[4,3,6]{[dp], [], [tp]}
    return %c
  }
})",
               R"(
// CHECK: %b = parameter() {index=1} : f32[2,5,3]
// CHECK-NOT: all_
// CHECK-NOT: reduce_scatter
// CHECK: %c = dot_general(%a, %b) {{.*}} : f32[2,3,3]
// CHECK-NEXT: return %c
)");
}

TEST(PartitionText, ResultShardedOnContractingAxisIsReduceScatter) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[4]} {
  func @main {
    %a = parameter() {index=0} : f32[8,8]{[], [x]}
    %b = parameter() {index=1} : f32[8,4]{[x], []}
    %c = dot_general(%a, %b) {lhs_contracting=[1], rhs_contracting=[0]} : f32[8,4]{[x], []}
    return %c
  }
})",
               R"(
// CHECK: dot_general(%a, %b) {{.*}} : f32[8,4]
// CHECK-NEXT: %c = reduce_scatter({{.*}}) {kind=sum, dim=0, groups=[[0, 1, 2, 3]]} : f32[2,4]
// CHECK-NOT: all_reduce
)");
}

TEST(PartitionText, FsdpWeightIsGatheredNotTheActivations) {
  ExpectChecks(R"(module @m {mesh_axes=[dp], mesh_shape=[2]} {
  func @main {
    %x = parameter() {index=0} : f32[8,6]{[dp], []}
    %w = parameter() {index=1} : f32[6,4]{[dp], []}
    %y = dot_general(%x, %w) {lhs_contracting=[1], rhs_contracting=[0]} : f32[8,4]{[dp], []}
    return %y
  }
})",
               R"(
// CHECK: %x = parameter() {index=0} : f32[4,6]
// CHECK: %w = parameter() {index=1} : f32[3,4]
// CHECK-NEXT: [[W:%[0-9]+]] = all_gather(%w) {dim=0, groups=[[0, 1]]} : f32[6,4]
// CHECK-NEXT: %y = dot_general(%x, [[W]]) {{.*}} : f32[4,4]
// CHECK-NEXT: return %y
)");
}

TEST(PartitionText, ReduceOverShardedDimOfUnevenSizeMasksAndAllReduces) {
  ExpectChecks(R"(module @m {mesh_axes=[x, y], mesh_shape=[2,2]} {
  func @main {
    %a = parameter() {index=0} : f32[7,3]{[y], [x]}
    %s = reduce(%a) {kind=max, dims=[0]} : f32[3]{[x]}
    return %s
  }
})",
               R"(
// CHECK: %a = parameter() {index=0} : f32[4,2]
// CHECK: replica_id()
// CHECK: select(
// CHECK: reduce({{.*}}) {kind=max, dims=[0]} : f32[2]
// CHECK-NEXT: %s = all_reduce({{.*}}) {kind=max, groups=[[0, 1], [2, 3]]} : f32[2]
)");
}

TEST(PartitionText, PartialResultIsKeptUntilAConsumerNeedsItWhole) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4,8]{[], [x]}
    %s = reduce(%a) {kind=sum, dims=[1]} : f32[4]{[], partial=[x]}
    %t = add(%s, %s) : f32[4]{[], partial=[x]}
    %u = exp(%t) : f32[4]
    return %u
  }
})",
               R"(
// CHECK: %s = reduce(%a) {kind=sum, dims=[1]} : f32[4]
// CHECK-NOT: all_reduce
// CHECK: %t = add(%s, %s)
// CHECK-NEXT: all_reduce(%t) {kind=sum, groups=[[0, 1]]}
// CHECK-NEXT: %u = exp(
)");
}

// Note [Partial sums through products]: a row split as 2 + (-1) on two devices, times a
// parameter holding inf, divided by one holding 0, or multiplied into a matrix holding inf, gives
// inf as on one device (a partial sum carried through would give inf + (-inf) = NaN), even where
// the annotations ask for the products to be left partial.
TEST(PartitionDiff, PartialSumsMeetingInfinityOrZeroAreCompletedFirst) {
  std::unique_ptr<Module> m = ir::ParseModule(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[2,2]{[], [x]}
    %c = parameter() {index=1} : f32[2]
    %w = parameter() {index=2} : f32[2,2]
    %s = reduce(%a) {kind=sum, dims=[1]} : f32[2]{[], partial=[x]}
    %m = mul(%s, %c) : f32[2]{[], partial=[x]}
    %d = div(%s, %c) : f32[2]{[], partial=[x]}
    %p = dot_general(%s, %w) {lhs_contracting=[], rhs_contracting=[]} : f32[2,2,2]{[], [], [], partial=[x]}
    %q = mul(%s, %s) : f32[2]
    return %m, %d, %p, %q
  }
})");
  std::unique_ptr<Module> part = spmd::Partition(*m);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Literal> args = {Literal::FromVector<float>(DType::kF32, Shape{2, 2}, {2, -1, -3, 1}),
                               Literal::FromVector<float>(DType::kF32, Shape{2}, {inf, 0}),
                               Literal::FromVector<float>(DType::kF32, Shape{2, 2}, {inf, 1, -inf, 0})};
  std::vector<Literal> want = ir::Evaluate(*m->entry(), args);
  EXPECT_EQ(want[0].GetDouble(0), inf);   // (2 - 1) * inf
  EXPECT_EQ(want[1].GetDouble(1), -inf);  // (-3 + 1) / 0
  spmd_test::CheckPartitioned(*m, *part, args, /*exact=*/false, /*signed_zeros_free=*/false, /*pipeline=*/false);
  spmd_test::CheckPartitioned(*m, *part, args, /*exact=*/false, /*signed_zeros_free=*/false, /*pipeline=*/true);
}

TEST(PartitionText, ReplicatedToShardedIsALocalDynamicSlice) {
  ExpectChecks(R"(module @m {mesh_axes=[x, y], mesh_shape=[2,4]} {
  func @main {
    %a = parameter() {index=0} : f32[8,6]
    %b = neg(%a) : f32[8,6]{[x, y], []}
    return %b
  }
})",
               R"(
// CHECK-NOT: all_
// CHECK: replica_id()
// CHECK: constant() {value=[0, 1, 2, 3, 4, 5, 6, 7]} : i32[8]
// CHECK: dynamic_slice({{.*}}) {sizes=[1, 6]} : f32[1,6]
// CHECK: %b = neg(
)");
}

TEST(PartitionText, AxisMoveIsAllToAll) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4,6]{[x], []}
    %b = abs(%a) : f32[4,6]{[], [x]}
    return %b
  }
})",
               R"(
// CHECK: %a = parameter() {index=0} : f32[2,6]
// CHECK-NEXT: all_to_all(%a) {split_dim=1, concat_dim=0, groups=[[0, 1]]} : f32[4,3]
// CHECK-NEXT: %b = abs(
)");
}

TEST(PartitionText, DroppingOrAddingAMinorAxisTouchesOnlyThatAxis) {
  ExpectChecks(R"(module @m {mesh_axes=[x, y], mesh_shape=[2,2]} {
  func @main {
    %a = parameter() {index=0} : f32[8,4]{[x, y], []}
    %b = neg(%a) : f32[8,4]{[x], []}
    %c = abs(%b) : f32[8,4]{[x, y], []}
    return %c
  }
})",
               R"(
// CHECK: %a = parameter() {index=0} : f32[2,4]
// CHECK-NEXT: [[G:%[0-9]+]] = all_gather(%a) {dim=0, groups=[[0, 1], [2, 3]]} : f32[4,4]
// CHECK-NEXT: %b = neg([[G]]) : f32[4,4]
// CHECK-NOT: all_gather
// CHECK: constant() {value=[0, 1, 0, 1]} : i32[4]
// CHECK: dynamic_slice(%b, {{.*}}) {sizes=[2, 4]} : f32[2,4]
// CHECK-NEXT: %c = abs(
)");
}

TEST(PartitionText, EmbeddingLookupSplitOverBatchAndFeaturesIsLocal) {
  ExpectChecks(R"(module @m {mesh_axes=[dp, tp], mesh_shape=[2,2]} {
  func @main {
    %table = parameter() {index=0} : f32[10,8]{[], [tp]}
    %ids = parameter() {index=1} : i32[4,3]{[dp], []}
    %e = gather(%table, %ids) {axis=0, batch_dims=0} : f32[4,3,8]{[dp], [], [tp]}
    return %e
  }
})",
               R"(
// CHECK: %table = parameter() {index=0} : f32[10,4]
// CHECK: %ids = parameter() {index=1} : i32[2,3]
// CHECK-NEXT: %e = gather(%table, %ids) {axis=0, batch_dims=0} : f32[2,3,4]
// CHECK-NEXT: return %e
)");
}

TEST(PartitionText, AValueIsGatheredOnceForAllItsUsers) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4,6]{[x], []}
    %b = neg(%a) : f32[4,6]
    %c = abs(%a) : f32[4,6]
    return %b, %c
  }
})",
               R"(
// CHECK: [[G:%[0-9]+]] = all_gather(%a)
// CHECK-NEXT: %b = neg([[G]])
// CHECK-NEXT: %c = abs([[G]])
)");
}

TEST(PartitionText, ShardedToReplicatedGathersAndDropsPadding) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[7]{[x]}
    %b = neg(%a) : f32[7]
    return %b
  }
})",
               R"(
// CHECK: %a = parameter() {index=0} : f32[4]
// CHECK-NEXT: all_gather(%a) {dim=0, groups=[[0, 1]]} : f32[8]
// CHECK-NEXT: slice({{.*}}) {start=[0], limit=[7], strides=[1]} : f32[7]
)");
}

TEST(PartitionText, PassIsRegisteredUnderItsName) {
  std::unique_ptr<passes::Pass> p = spmd::CreatePartitionPass();
  EXPECT_EQ(p->name(), "spmd-partition");
  std::unique_ptr<Module> m = ir::ParseModule(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4]{[x]}
    return %a
  }
})");
  EXPECT_TRUE(p->Run(*m));
  EXPECT_EQ(m->num_replicas(), 2);
  EXPECT_EQ(m->entry()->Parameters()[0]->result()->type().ToString(), "f32[2]");
}

// ---------------------------------------------------------------------------------------------
// Errors.

void ExpectError(const std::string& text, const std::string& needle) {
  std::unique_ptr<Module> m = ir::ParseModule(text);
  try {
    spmd::Partition(*m);
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PartitionErrors, PartialParameter) {
  ExpectError(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4]{[], partial=[x]}
    return %a
  }
})",
              "parameter %a is f32[4]{[], partial=[x]} with partial axes");
}

TEST(PartitionText, ReturnedPartialSumIsCompletedAtTheReturn) {
  ExpectChecks(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4]{[x]}
    %s = reduce(%a) {kind=sum, dims=[0]} : f32[]{partial=[x]}
    return %s
  }
})",
               R"(
// CHECK: %s = reduce(%a) {kind=sum, dims=[0]} : f32[]
// CHECK-NEXT: [[R:%[0-9]+]] = all_reduce(%s) {kind=sum, groups=[[0, 1]]} : f32[]
// CHECK-NEXT: return [[R]]
)");
}

TEST(PartitionErrors, NoMeshOrAlreadyPartitioned) {
  ExpectError("module @m {\n func @main {\n %a = parameter() {index=0} : f32[4]\n return %a\n }\n}", "has no mesh");
  ExpectError(R"(module @m {num_replicas=2, mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4]
    return %a
  }
})",
              "has num_replicas 2");
}

TEST(PartitionErrors, CollectiveInGlobalProgram) {
  ExpectError(R"(module @m {mesh_axes=[x], mesh_shape=[2]} {
  func @main {
    %a = parameter() {index=0} : f32[4]
    %b = all_reduce(%a) {kind=sum, groups=[]} : f32[4]
    return %b
  }
})",
              "collective all_reduce in the global program");
}

// ---------------------------------------------------------------------------------------------
// Shard helpers.

TEST(ShardUtil, UnevenBlocksArePaddedAndRoundTrip) {
  Mesh mesh({"x", "y"}, {2, 2}, {3, 1, 0, 2});
  std::vector<float> v(21);
  for (int i = 0; i < 21; ++i) v[i] = static_cast<float>(i);
  Literal g = Literal::FromVector<float>(DType::kF32, Shape{7, 3}, v);
  Sharding s{{{"y", "x"}, {}}, {}};
  std::vector<Literal> shards;
  for (int64_t d = 0; d < 4; ++d) shards.push_back(spmd::ShardLiteral(g, s, mesh, d));
  // Block k (of 2 rows) goes to the device whose index along [y, x] is k.
  for (int64_t d = 0; d < 4; ++d) {
    int64_t k = mesh.ShardIndex(d, {"y", "x"});
    ASSERT_EQ(shards[d].type().ToString(), "f32[2,3]");
    for (int64_t i = 0; i < 6; ++i) {
      int64_t gi = k * 6 + i;
      EXPECT_EQ(shards[d].GetDouble(i), gi < 21 ? gi : 0) << "device " << d << " element " << i;
    }
  }
  EXPECT_EQ(spmd::AssembleLiteral(shards, s, mesh, g.type()), g);
  EXPECT_THROW(spmd::ShardLiteral(g, Sharding{{{}, {}}, {"x"}}, mesh, 0), Error);
}

// ---------------------------------------------------------------------------------------------
// Differential tests.

std::vector<Program> Programs() {
  std::vector<Program> ps;
  ps.push_back({"unary", true, [](Builder& b) { b.Return({b.Unary(OpKind::kExp, b.Parameter(0, F32({7, 6})))}); }});
  ps.push_back({"binary", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6}));
                  Value* y = b.Parameter(1, F32({7, 6}));
                  Value* s = b.Add(x, y);
                  b.Return({b.Mul(s, x), b.Sub(s, y)});
                }});
  ps.push_back({"select_compare_convert", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({5, 3}));
                  Value* y = b.Parameter(1, F32({5, 3}));
                  Value* c = b.Compare(ir::CompareDir::kLt, x, y);
                  Value* s = b.Select(c, x, y);
                  b.Return({s, b.Convert(s, DType::kI32), b.Convert(c, DType::kF32)});
                }});
  ps.push_back({"broadcast_in_dim", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7}));
                  Value* y = b.Parameter(1, F32({1, 6}));
                  Value* bx = b.BroadcastInDim(x, Shape{7, 6}, {0});
                  Value* by = b.BroadcastInDim(y, Shape{7, 6}, {0, 1});
                  Value* bs = b.BroadcastInDim(b.Scalar(DType::kF32, 3), Shape{7, 6}, {});
                  b.Return({b.Add(b.Mul(bx, by), bs)});
                }});
  ps.push_back({"reshape", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({8, 6}));
                  Value* merged = b.Reshape(x, Shape{48});
                  Value* split = b.Reshape(b.Unary(OpKind::kNeg, merged), Shape{4, 6, 2});
                  Value* y = b.Parameter(1, F32({7, 6}));
                  Value* ones = b.Reshape(b.Parameter(2, F32({1, 4, 1, 3})), Shape{12, 1});
                  b.Return({b.Reshape(split, Shape{24, 2}), b.Reshape(y, Shape{42}), b.Reshape(y, Shape{6, 7}), ones});
                }});
  ps.push_back({"transpose", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6, 4}));
                  b.Return({b.Transpose(x, {2, 0, 1}), b.Transpose(b.Unary(OpKind::kNeg, x), {1, 0, 2})});
                }});
  ps.push_back({"reduce", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6, 5}));
                  b.Return({b.Reduce(x, ir::ReduceKind::kSum, {0}), b.Reduce(x, ir::ReduceKind::kSum, {0, 2}),
                            b.Reduce(x, ir::ReduceKind::kMax, {1}), b.Reduce(x, ir::ReduceKind::kMin, {0, 1, 2})});
                }});
  ps.push_back({"reduce_prod_int", true, [](Builder& b) {
                  Value* x = b.Parameter(0, TensorType(DType::kI32, Shape{7, 3}));
                  Value* p = b.Parameter(1, TensorType(DType::kBool, Shape{5, 3}));
                  b.Return({b.Reduce(x, ir::ReduceKind::kProd, {0}), b.Reduce(x, ir::ReduceKind::kSum, {0, 1}),
                            b.Reduce(x, ir::ReduceKind::kMax, {1}), b.Reduce(p, ir::ReduceKind::kAnd, {0}),
                            b.Reduce(p, ir::ReduceKind::kOr, {1})});
                }});
  ps.push_back({"dot", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 5}));
                  Value* w = b.Parameter(1, F32({5, 6}));
                  b.Return({b.DotGeneral(x, w, Dot({}, {}, {1}, {0}))});
                }});
  ps.push_back({"dot_batch", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({4, 3, 7}));
                  Value* y = b.Parameter(1, F32({4, 7, 2}));
                  Value* z = b.Parameter(2, F32({3, 4, 6}));
                  b.Return({b.DotGeneral(x, y, Dot({0}, {0}, {2}, {1})), b.DotGeneral(x, z, Dot({}, {}, {0, 1}, {1, 0}))});
                }});
  ps.push_back({"mlp", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({8, 6}));
                  Value* w1 = b.Parameter(1, F32({6, 16}));
                  Value* w2 = b.Parameter(2, F32({16, 4}));
                  Value* h = b.Unary(OpKind::kTanh, b.DotGeneral(x, w1, Dot({}, {}, {1}, {0})));
                  Value* y = b.DotGeneral(h, w2, Dot({}, {}, {1}, {0}));
                  Value* loss = b.Reduce(b.Mul(y, y), ir::ReduceKind::kSum, {0, 1});
                  b.Return({y, loss});
                }});
  // Values that random annotations may leave partial feeding the linear rules (dot, mul, div,
  // add, reduce sum, convert).
  ps.push_back({"partial_chain", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({6, 5}));
                  Value* w = b.Parameter(1, F32({5, 4}));
                  Value* y = b.Parameter(2, F32({6, 4}));
                  Value* d = b.DotGeneral(b.Unary(OpKind::kNeg, x), b.Unary(OpKind::kNeg, w), Dot({}, {}, {1}, {0}));
                  Value* m = b.Mul(b.Unary(OpKind::kNeg, d), b.Unary(OpKind::kNeg, y));
                  Value* q = b.Div(b.Unary(OpKind::kNeg, m), b.Unary(OpKind::kExp, y));
                  Value* s = b.Reduce(b.Add(q, d), ir::ReduceKind::kSum, {0});
                  b.Return({m, b.Convert(b.Unary(OpKind::kNeg, s), DType::kF64)});
                }});
  ps.push_back({"slice_pad_reverse", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6}));
                  Value* s = b.Build1(OpKind::kSlice, {x}, ir::SliceAttrs{{1, 0}, {7, 6}, {2, 1}});
                  Value* p = b.Build1(OpKind::kPad, {x, b.Scalar(DType::kF32, 9)}, ir::PadAttrs{{0, 1}, {0, -2}, {0, 1}});
                  Value* r = b.Build1(OpKind::kReverse, {x}, ir::ReverseAttrs{{1}});
                  b.Return({s, p, r});
                }});
  ps.push_back({"concat_cumsum_argmax_sort", false, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6}));
                  Value* y = b.Parameter(1, F32({3, 6}));
                  Value* c = b.Build1(OpKind::kConcatenate, {x, y}, ir::ConcatenateAttrs{0});
                  Value* cs = b.Build1(OpKind::kCumsum, {x}, ir::CumsumAttrs{1, false});
                  Value* am = b.Build1(OpKind::kArgMax, {x}, ir::ArgReduceAttrs{0, DType::kI32});
                  std::vector<Value*> so = b.Build(OpKind::kSort, {x, b.Unary(OpKind::kNeg, x)}, ir::SortAttrs{1, false});
                  b.Return({c, cs, am, so[0], so[1]});
                }});
  ps.push_back({"iota_constant", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6}));
                  Value* i = b.Iota(F32({7, 6}), 0);
                  Value* j = b.Iota(TensorType(DType::kI32, Shape{7, 6}), 1);
                  std::vector<float> cv(42);
                  for (int k = 0; k < 42; ++k) cv[k] = static_cast<float>(k) * 0.5f;
                  Value* c = b.Constant(Literal::FromVector<float>(DType::kF32, Shape{7, 6}, cv));
                  Value* s = b.Constant(Literal::Splat(F32({7, 6}), 1.5));
                  b.Return({b.Add(b.Mul(x, i), b.Add(c, s)), j});
                }});
  // Note [Partitioned random bits]: each device draws its runs of the stream; a counter about to
  // carry across all its words, a runtime counter, randn's [2, ...] draw, uneven splits.
  ps.push_back({"rng_bits", true, [](Builder& b) {
                  auto bits = [&](Value* key, Value* counter, Shape shape) {
                    return b.Build(OpKind::kRngBitGenerator, {key, counter}, ir::NoAttrs{},
                                   {TensorType(DType::kU32, std::move(shape))})[0];
                  };
                  Value* key = b.Constant(Literal::FromVector<uint32_t>(DType::kU32, Shape{2}, {7u, 9u}));
                  Value* wrap = b.Constant(Literal::FromVector<uint32_t>(
                      DType::kU32, Shape{4}, {0xfffffffdu, 0xffffffffu, 0xffffffffu, 3u}));
                  Value* counter = b.Parameter(0, TensorType(DType::kU32, Shape{4}));
                  b.Return({bits(key, wrap, Shape{2, 8, 12}), bits(key, counter, Shape{7, 4}),
                            bits(key, wrap, Shape{9, 8}), bits(key, counter, Shape{10})});
                }});
  ps.push_back({"gather_dynamic_slice", true, [](Builder& b) {
                  Value* x = b.Parameter(0, F32({7, 6}));
                  Value* idx = b.Parameter(1, TensorType(DType::kI32, Shape{4}));
                  Value* g = b.Build1(OpKind::kGather, {x, idx}, ir::GatherAttrs{0, 0});
                  Value* ds = b.Build1(OpKind::kDynamicSlice, {x, b.Scalar(DType::kI32, 2), b.Scalar(DType::kI32, 1)},
                                       ir::DynamicSliceAttrs{{3, 4}});
                  Value* rows = b.Build1(OpKind::kDynamicSlice, {x, b.Parameter(2, TensorType(DType::kI32, Shape{})),
                                                                 b.Scalar(DType::kI32, 0)},
                                         ir::DynamicSliceAttrs{{3, 6}});
                  Value* upd = b.Build1(OpKind::kDynamicUpdateSlice,
                                        {x, b.Unary(OpKind::kNeg, rows), b.Scalar(DType::kI32, 3), b.Scalar(DType::kI32, 0)});
                  Value* emb = b.Parameter(3, F32({5, 3, 4}));
                  Value* ids = b.Parameter(4, TensorType(DType::kI32, Shape{5, 2, 3}));
                  Value* bg = b.Build1(OpKind::kGather, {emb, ids}, ir::GatherAttrs{1, 1});  // [5, 2, 3, 4]
                  Value* sc = b.Build1(OpKind::kScatterAdd, {emb, ids, b.Unary(OpKind::kNeg, bg)}, ir::GatherAttrs{1, 1});
                  b.Return({g, ds, rows, upd, bg, sc});
                }});
  return ps;
}

class PartitionDiffTest : public ::testing::TestWithParam<Program> {};

TEST_P(PartitionDiffTest, MatchesGlobalProgramOnRandomShardings) {
  std::mt19937 rng(1234);
  for (const Mesh& mesh : Meshes()) CheckRandomShardings(GetParam(), mesh, 30, rng);
}

INSTANTIATE_TEST_SUITE_P(Ops, PartitionDiffTest, ::testing::ValuesIn(Programs()),
                         [](const ::testing::TestParamInfo<Program>& info) { return info.param.name; });

// Sharding propagation fills every value from the parameters' random layouts; the partitioned
// program of its output still computes the global one.
TEST_P(PartitionDiffTest, MatchesGlobalProgramAfterShardingPropagation) {
  std::mt19937 rng(99);
  for (const Mesh& mesh : Meshes()) CheckRandomShardings(GetParam(), mesh, 6, rng, spmd_test::Annotate::kParameters);
}

// Every Reshard between random shardings of one value gives the same global tensor.
TEST(Reshard, AnyToAny) {
  std::mt19937 rng(77);
  for (const Mesh& mesh : Meshes())
    for (Shape shape : {Shape{7, 6}, Shape{8, 4}, Shape{5}}) {
      Program p{"reshard", true, [&](Builder& b) { b.Return({b.Unary(OpKind::kNeg, b.Unary(OpKind::kAbs, b.Parameter(0, F32(shape))))}); }};
      CheckRandomShardings(p, mesh, 8, rng);
    }
}

}  // namespace
}  // namespace axle
