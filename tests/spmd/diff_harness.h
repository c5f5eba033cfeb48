// The differential harness of the SPMD tests (partitioner_test.cc, primitive_diff_test.cc): a global
// program, given random shardings on a mesh, is partitioned; ir::EvaluateReplicated of the
// partitioned program on the shards of random arguments (their padding poisoned) must assemble to
// what ir::Evaluate gives on the whole arguments.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shard_util.h"

namespace axle::spmd_test {

struct Program {
  std::string name;
  bool exact;  // no sum is reordered: results must match bitwise
  std::function<void(ir::Builder&)> build;
};
inline void PrintTo(const Program& p, std::ostream* os) { *os << p.name; }

// Overwrites the padding of a shard with garbage (NaN for floats), so that a partitioned program
// that lets padding reach a valid element fails.
inline void PoisonPadding(ir::Literal& shard, const Shape& global, const ir::Sharding& s, const ir::Mesh& mesh,
                          int64_t device) {
  ir::Literal marker =
      spmd::ShardLiteral(ir::Literal::Splat(ir::TensorType(DType::kU8, global), 1), s, mesh, device);
  for (int64_t i = 0; i < shard.NumElements(); ++i)
    if (marker.GetInt64(i) == 0) shard.SetDouble(i, IsFloat(shard.dtype()) ? std::nan("") : 5);
}

// Floats are mostly uniform in [-2, 2), with `specials` one in 16 a special value (-0, +-inf,
// NaN) that must survive partitioning as in the global program; integers 0..6; bools 0/1.
inline ir::Literal RandomLiteral(const ir::TensorType& t, std::mt19937& rng, bool specials = false) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  std::uniform_real_distribution<double> u(-2, 2);
  const double special[] = {-0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::nan("")};
  for (double& x : v) {
    if (IsFloat(t.dtype)) x = specials && rng() % 16 == 0 ? special[rng() % 4] : u(rng);
    else if (IsBool(t.dtype)) x = rng() % 2;
    else x = static_cast<double>(rng() % 7);
  }
  return ir::Literal::FromDoubles(t.dtype, t.shape, v);
}

// Each mesh axis goes to a random dim (or none), in random order, so a dim gets no axis, one, or
// a tuple of them, and no axis is used twice; float intermediates may also be a pending partial
// sum over axes no dim uses.
inline ir::Sharding RandomSharding(const ir::TensorType& t, const ir::Mesh& mesh, bool allow_partial,
                                   std::mt19937& rng) {
  ir::Sharding s;
  s.dims.resize(static_cast<size_t>(t.rank()));
  std::vector<std::string> axes = mesh.axis_names();
  std::shuffle(axes.begin(), axes.end(), rng);
  for (const std::string& a : axes) {
    int64_t pick = static_cast<int64_t>(rng() % static_cast<uint32_t>(t.rank() + 2));
    if (pick < t.rank()) s.dims[pick].push_back(a);
    else if (pick == t.rank() + 1 && allow_partial && IsFloat(t.dtype) && rng() % 2) s.partial.push_back(a);
  }
  return s;
}

// Bitwise for exact programs and non-floats (with `signed_zeros_free`, +0 matches -0); otherwise
// a relative 1e-5 (sums reordered by the split), any NaN matching any NaN.
inline bool Close(const ir::Literal& want, const ir::Literal& got, bool exact, std::string* why,
                  bool signed_zeros_free = false) {
  if (want.type() != got.type()) {
    *why = "type " + got.type().ToString() + " vs " + want.type().ToString();
    return false;
  }
  if (exact || !IsFloat(want.dtype())) {
    if (want == got) return true;
    for (int64_t i = 0; i < want.NumElements(); ++i)
      if (ir::ElementBits(want, i) != ir::ElementBits(got, i) &&
          !(signed_zeros_free && IsFloat(want.dtype()) && want.GetDouble(i) == 0 && got.GetDouble(i) == 0)) {
        *why = fmt::format("not bitwise equal; first at element {}: {} vs {}", i, got.GetDouble(i), want.GetDouble(i));
        return false;
      }
    return true;  // only zeros of opposite signs differ
  }
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    double a = want.GetDouble(i), b = got.GetDouble(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (!(std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(a)))) {
      *why = fmt::format("element {}: {} vs {}", i, b, a);
      return false;
    }
  }
  return true;
}

enum class Annotate {
  kEveryValue,            // every value (4 in 5) gets a random sharding; no propagation
  kParameters,            // parameters only (4 in 5); PropagateShardings fills the rest
  kParametersAndResults,  // parameters and returned values (each 1 in 2); then PropagateShardings
};

// Annotates the entry function of `m` (which has a mesh) at random as `how` says, then runs
// sharding propagation where `how` asks for it.
inline void AnnotateAtRandom(ir::Module& m, Annotate how, std::mt19937& rng) {
  const ir::Mesh& mesh = *m.mesh();
  ir::Function& f = *m.entry();
  for (const auto& n : f.nodes())
    for (ir::Value* v : n->results()) {
      if (how != Annotate::kEveryValue && n->op() != ir::OpKind::kParameter) continue;
      if (rng() % 5 != 0) v->set_sharding(RandomSharding(v->type(), mesh, n->op() != ir::OpKind::kParameter, rng));
    }
  if (how == Annotate::kParametersAndResults)
    for (ir::Value* v : f.results())
      if (rng() % 2 == 0)
        v->set_sharding(RandomSharding(v->type(), mesh, v->node()->op() != ir::OpKind::kParameter, rng));
  if (how != Annotate::kEveryValue) spmd::PropagateShardings(m);
  ir::Verify(m);
}

// Whether the partitioned program sums floats across devices (all_reduce / reduce_scatter of
// kind sum).
inline bool HasFloatSums(const ir::Module& part) {
  for (const auto& n : part.entry()->nodes()) {
    const ir::OpKind op = n->op();
    if (n->num_results() != 1 || !IsFloat(n->result(0)->dtype())) continue;
    if (op == ir::OpKind::kAllReduce && n->attrs_as<ir::AllReduceAttrs>().kind == ir::ReduceKind::kSum) return true;
    if (op == ir::OpKind::kReduceScatter && n->attrs_as<ir::ReduceScatterAttrs>().kind == ir::ReduceKind::kSum)
      return true;
  }
  return false;
}

// Partitions the annotated global module `m` and compares its partitioned run on the shards of
// `args` (padding poisoned) with ir::Evaluate on `args`; `pipeline` also runs the default pass
// pipeline on the partitioned program first (it must keep its meaning).
inline void CheckPartitioned(const ir::Module& m, const ir::Module& part, const std::vector<ir::Literal>& args,
                             bool exact, bool signed_zeros_free, bool pipeline) {
  const ir::Mesh& mesh = *m.mesh();
  const ir::Function& f = *m.entry();
  std::vector<ir::Literal> want = ir::Evaluate(f, args);
  std::vector<std::vector<ir::Literal>> per_device(static_cast<size_t>(mesh.size()));
  for (int64_t d = 0; d < mesh.size(); ++d)
    for (const ir::Node* param : f.Parameters()) {
      const int64_t i = param->attrs_as<ir::ParameterAttrs>().index;
      ir::Sharding s = spmd::ParameterSharding(m, i);
      per_device[d].push_back(spmd::ShardLiteral(args[i], s, mesh, d));
      PoisonPadding(per_device[d].back(), param->result()->type().shape, s, mesh, d);
    }
  std::unique_ptr<ir::Module> run = part.Clone();
  if (pipeline) passes::RunDefaultPipeline(*run);
  std::vector<std::vector<ir::Literal>> got = ir::EvaluateReplicated(*run->entry(), per_device);
  for (size_t r = 0; r < want.size(); ++r) {
    const ir::Value* res = f.results()[r];
    std::vector<ir::Literal> shards;
    for (int64_t d = 0; d < mesh.size(); ++d) shards.push_back(got[d][r]);
    ir::Literal whole =
        spmd::AssembleLiteral(shards, spmd::ResultSharding(m, static_cast<int64_t>(r)), mesh, res->type());
    std::string why;
    ASSERT_TRUE(Close(want[r], whole, exact, &why, signed_zeros_free))
        << m.name() << " on " << mesh.ToString() << ", result " << r << ": " << why << "\nwant "
        << want[r].ToString() << "\ngot  " << whole.ToString() << "\n--- global:\n"
        << ir::PrintModule(m) << "--- partitioned" << (pipeline ? " (then the default pipeline ran)" : "")
        << ":\n"
        << ir::PrintModule(part);
  }
}

// Builds `p` on `mesh`, annotates it at random as `how` says, partitions it, and compares the
// partitioned program's results on random sharded arguments with the global run, `trials` times.
inline void CheckRandomShardings(const Program& p, const ir::Mesh& mesh, int trials, std::mt19937& rng,
                                 Annotate how = Annotate::kEveryValue) {
  for (int trial = 0; trial < trials; ++trial) {
    ir::Module m(p.name);
    m.set_mesh(mesh);
    ir::Builder b(m.AddFunction("main"));
    p.build(b);
    AnnotateAtRandom(m, how, rng);
    std::unique_ptr<ir::Module> part;
    try {
      part = spmd::Partition(m);
    } catch (const Error& e) {
      FAIL() << p.name << " on " << mesh.ToString() << ": " << e.what() << "\n" << ir::PrintModule(m);
    }
    // A float sum across devices (all_reduce / reduce_scatter of kind sum: a contracted split dim,
    // or a pending partial sum carried through neg, mul, div, ... as docs/spmd.md allows) computes
    // op(a) + op(b) where the global program computes op(a + b). IEEE arithmetic does not
    // distribute over signed zeros: with 0 held as 0 + -0 on two devices, -(0) is -0 but
    // -(0) + -(-0) is +0; so in programs with such a sum +0 matches -0. Infinities and NaN reach
    // every program: a sum holding inf is inf (or NaN) in any order, and a partial sum is carried
    // only through factors known finite (Note [Partial sums through products]), so 2 * inf + -1 * inf
    // never stands in for 1 * inf. Results must match bitwise (or within `exact`'s tolerance).
    const bool sums = HasFloatSums(*part);
    std::vector<ir::Literal> args;
    for (const ir::Node* param : m.entry()->Parameters())
      args.push_back(RandomLiteral(param->result()->type(), rng, /*specials=*/true));
    // The default pipeline (folding, CSE, ...) runs on every other trial.
    CheckPartitioned(m, *part, args, p.exact, /*signed_zeros_free=*/sums, /*pipeline=*/trial % 2 == 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

inline ir::TensorType F32(Shape s) { return ir::TensorType(DType::kF32, std::move(s)); }

inline ir::DotGeneralAttrs Dot(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                               std::vector<int64_t> rc) {
  return ir::DotGeneralAttrs{std::move(lb), std::move(rb), std::move(lc), std::move(rc)};
}

// Meshes of 1, 2, 4 and 8 devices, 1-D and 2-D (one with a non-identity device order).
inline std::vector<ir::Mesh> Meshes() {
  return {ir::Mesh({"x"}, {1}),         ir::Mesh({"x"}, {2}),         ir::Mesh({"x"}, {4}),
          ir::Mesh({"x"}, {8}),         ir::Mesh({"x", "y"}, {2, 4}), ir::Mesh({"x", "y"}, {4, 2}),
          ir::Mesh({"x", "y"}, {2, 2}, {3, 1, 0, 2})};
}

}  // namespace axle::spmd_test
