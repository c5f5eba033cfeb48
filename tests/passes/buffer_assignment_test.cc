// Note [Buffer assignment] (src/passes/buffer_assignment.h): liveness, in place, arena offsets.
#include "passes/buffer_assignment.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

namespace axle::passes {
namespace {

using Kind = BufferProblem::Value::Kind;
using Storage = BufferPlan::Storage;

// A problem written step by step: values by name.
struct Writer {
  BufferProblem p;
  int Value(Kind kind, int64_t bytes, const std::string& name) {
    p.values.push_back({kind, bytes, kind == Kind::kArgument ? static_cast<int64_t>(p.values.size()) : -1, name});
    return static_cast<int>(p.values.size()) - 1;
  }
  BufferProblem::Step& Step(std::vector<int> operands, std::vector<int> results) {
    BufferProblem::Step st;
    // A step without operands that writes an argument or a constant binds it.
    st.binds = operands.empty() && results.size() == 1 &&
               p.values[static_cast<size_t>(results[0])].kind != Kind::kTemp &&
               p.values[static_cast<size_t>(results[0])].kind != Kind::kResult;
    st.operands = std::move(operands);
    st.results = std::move(results);
    p.steps.push_back(std::move(st));
    return p.steps.back();
  }
};

TEST(BufferAssignmentTest, ChainReusesTheArenaAndWritesInPlace) {
  // x -> a = f(x) -> b = g(a) in place -> c = h(b) (not in place) -> r = k(c): a result.
  Writer w;
  const int x = w.Value(Kind::kArgument, 1024, "%x"), a = w.Value(Kind::kTemp, 1024, "%a"),
            b = w.Value(Kind::kTemp, 1024, "%b"), c = w.Value(Kind::kTemp, 1024, "%c"),
            r = w.Value(Kind::kResult, 1024, "%r");
  w.Step({}, {x});
  w.Step({x}, {a});
  w.Step({a}, {b}).in_place = {{0}};
  w.Step({b}, {c});
  w.Step({c}, {r});
  const BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(CheckBufferPlan(w.p, plan), "");
  EXPECT_EQ(plan.values[x].storage, Storage::kArgument);
  EXPECT_EQ(plan.values[r].storage, Storage::kOwn);
  EXPECT_EQ(plan.values[a].buffer, plan.values[b].buffer);  // in place
  EXPECT_EQ(plan.takes[2][0].operand, 0);
  EXPECT_FALSE(plan.takes[2][0].if_donated);
  EXPECT_EQ(plan.num_in_place, 1);
  // a/b live over steps 1-3, c over 3-4: they overlap at step 3, so two kilobytes of arena.
  EXPECT_EQ(plan.values[a].begin, 1);
  EXPECT_EQ(plan.values[b].end, 3);
  EXPECT_NE(plan.values[c].offset, plan.values[b].offset);
  EXPECT_EQ(plan.arena_bytes, 2048);
  EXPECT_EQ(plan.temp_peak_bytes, 2048);
  EXPECT_EQ(plan.own_bytes, 1024);
  // The executor's count (the argument not counted): a; a+b (in place, both counted during the
  // step); b+c; c+r.
  EXPECT_EQ(plan.peak_live_bytes, 2048);
  const std::string text = plan.ToString(w.p);
  EXPECT_NE(text.find("%a -> %b"), std::string::npos) << text;
  EXPECT_NE(text.find("arena 2048 bytes (live at once at most 2.0 KiB)"), std::string::npos) << text;
}

TEST(BufferAssignmentTest, DeadBuffersShareAnOffset) {
  // t0 dies before t1 is written: both at offset 0.
  Writer w;
  const int x = w.Value(Kind::kArgument, 256, "%x"), t0 = w.Value(Kind::kTemp, 512, "%t0"),
            u = w.Value(Kind::kTemp, 64, "%u"), t1 = w.Value(Kind::kTemp, 512, "%t1"),
            r = w.Value(Kind::kResult, 64, "%r");
  w.Step({}, {x});
  w.Step({x}, {t0});
  w.Step({t0}, {u});
  w.Step({u}, {t1});
  w.Step({t1}, {r});
  const BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(CheckBufferPlan(w.p, plan), "");
  EXPECT_EQ(plan.values[t0].offset, plan.values[t1].offset);
  EXPECT_NE(plan.values[t0].buffer, plan.values[t1].buffer);
  EXPECT_EQ(plan.arena_bytes, 512 + 64);
}

TEST(BufferAssignmentTest, RegionsKeepTheirValuesApart) {
  // Steps 1-2 run at once: a dies at step 1 but b, written at step 2, may not take its bytes,
  // nor write it in place.
  Writer w;
  const int x = w.Value(Kind::kArgument, 128, "%x"), a = w.Value(Kind::kTemp, 128, "%a"),
            b = w.Value(Kind::kTemp, 128, "%b"), c = w.Value(Kind::kTemp, 128, "%c"),
            r = w.Value(Kind::kResult, 128, "%r");
  w.Step({}, {x});
  w.Step({x}, {a});
  w.Step({x}, {c}).region = 1;
  w.p.steps[1].region = 2;  // steps 1 and 2
  w.Step({a}, {b});
  w.Step({b, c}, {r});
  BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(CheckBufferPlan(w.p, plan), "");
  EXPECT_EQ(plan.values[a].begin, 1);
  EXPECT_EQ(plan.values[c].begin, 1);  // widened to the region's first step
  EXPECT_NE(plan.values[a].offset, plan.values[c].offset);
  // Without the region, c (written at 2) could not share with a either (a lives to 3); but a
  // value released inside a region is released after its last step.
  Writer v;
  const int y = v.Value(Kind::kArgument, 128, "%y"), p = v.Value(Kind::kTemp, 128, "%p"),
            q = v.Value(Kind::kTemp, 128, "%q"), s = v.Value(Kind::kResult, 128, "%s");
  v.Step({}, {y});
  v.Step({y}, {p}).region = 2;
  v.Step({p}, {q});  // p dies here, inside the region: q may not take its bytes
  v.Step({q}, {s});
  plan = AssignBuffers(v.p);
  EXPECT_EQ(CheckBufferPlan(v.p, plan), "");
  EXPECT_EQ(plan.values[p].end, 2);
  EXPECT_NE(plan.values[p].offset, plan.values[q].offset);
}

TEST(BufferAssignmentTest, ArgumentsAreTakenOnlyIfDonated) {
  Writer w;
  const int p = w.Value(Kind::kArgument, 64, "%p"), g = w.Value(Kind::kArgument, 64, "%g"),
            q = w.Value(Kind::kResult, 64, "%q");
  w.Step({}, {p});
  w.Step({}, {g});
  w.Step({p, g}, {q}).in_place = {{0, 1}};
  const BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(CheckBufferPlan(w.p, plan), "");
  EXPECT_EQ(plan.takes[2][0].operand, 0);
  EXPECT_TRUE(plan.takes[2][0].if_donated);
  EXPECT_EQ(plan.values[q].storage, Storage::kOwn);  // for when the caller keeps %p
  EXPECT_EQ(plan.num_if_donated, 1);
  EXPECT_NE(plan.ToString(w.p).find("%q into %p if donated"), std::string::npos) << plan.ToString(w.p);
}

TEST(BufferAssignmentTest, NoInPlaceOverAValueStillReadOrForwarded) {
  // a is read again after step 2, and f (a forward of b) outlives step 3: neither is taken.
  Writer w;
  const int x = w.Value(Kind::kArgument, 64, "%x"), a = w.Value(Kind::kTemp, 64, "%a"),
            b = w.Value(Kind::kTemp, 64, "%b"), f = w.Value(Kind::kTemp, 64, "%f"),
            c = w.Value(Kind::kTemp, 64, "%c"), k = w.Value(Kind::kConstant, 64, "%k"),
            d = w.Value(Kind::kTemp, 64, "%d"), r = w.Value(Kind::kResult, 64, "%r");
  w.Step({}, {x});
  w.Step({x}, {a});
  w.Step({a}, {b}).in_place = {{0}};  // a is read at step 5
  w.Step({b}, {f}).forward = true;
  w.Step({b}, {c}).in_place = {{0}};  // b dies here, but f shares its storage and lives on
  w.Step({}, {k});
  w.Step({k}, {d}).in_place = {{0}};  // constants are never written
  w.Step({a, c, d, f}, {r});
  const BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(CheckBufferPlan(w.p, plan), "");
  EXPECT_EQ(plan.num_in_place, 0);
  EXPECT_EQ(plan.values[b].buffer, plan.values[f].buffer);
  EXPECT_NE(plan.values[c].buffer, plan.values[b].buffer);
  EXPECT_EQ(plan.values[k].storage, Storage::kConstant);
  // Counted as the executor counts: f (a forward), x and k (bound) not at all, b until its own
  // last use: at step 4, a, b and c are live; at the last step a, c, d and r.
  EXPECT_EQ(plan.peak_live_bytes, 4 * 64);
}

TEST(BufferAssignmentTest, ResultsTakeTheirTemporariesStorageAsTheirOwn) {
  Writer w;
  const int x = w.Value(Kind::kArgument, 64, "%x"), t = w.Value(Kind::kTemp, 64, "%t"),
            r = w.Value(Kind::kResult, 64, "%r");
  w.Step({}, {x});
  w.Step({x}, {t});
  w.Step({t}, {r}).in_place = {{0}};
  const BufferPlan plan = AssignBuffers(w.p);
  EXPECT_EQ(plan.values[t].storage, Storage::kOwn);  // the caller keeps it as r
  EXPECT_EQ(plan.values[t].buffer, plan.values[r].buffer);
  EXPECT_EQ(plan.arena_bytes, 0);
}

TEST(BufferAssignmentTest, MalformedProblemsAreErrors) {
  Writer w;
  const int a = w.Value(Kind::kTemp, 64, "%a"), b = w.Value(Kind::kTemp, 32, "%b");
  w.p.title = "@m";
  w.Step({a}, {b});
  try {
    AssignBuffers(w.p);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 0 reads value 0 (%a) before any step writes it"), std::string::npos) << e.what();
  }
  w.p.steps = {{{}, {a}, false, false, {}, 1}, {{a}, {b}, false, false, {{0}}, 1}};
  try {
    AssignBuffers(w.p);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("would write %b (32 bytes) in place of %a (64 bytes)"), std::string::npos)
        << e.what();
  }
  w.p.steps = {{{}, {a}, false, false, {}, 3}};
  EXPECT_THROW(AssignBuffers(w.p), Error);
  w.p.steps = {{{7}, {a}, false, false, {}, 1}};
  EXPECT_THROW(AssignBuffers(w.p), Error);
}

// Random programs: the plan is legal (no two values alive at once share a byte), the arena is
// at least the most bytes alive at once, and, replayed step by step, every value read still holds
// what its writer wrote (a tag per value, written over its bytes).
TEST(BufferAssignmentTest, RandomProgramsNeverShareLiveBytes) {
  std::mt19937 rng(17);
  for (int round = 0; round < 300; ++round) {
    Writer w;
    const int args = 1 + static_cast<int>(rng() % 3);
    std::vector<int> live;
    for (int i = 0; i < args; ++i) {
      live.push_back(w.Value(Kind::kArgument, 64 * (1 + static_cast<int64_t>(rng() % 4)), "%a" + std::to_string(i)));
      w.Step({}, {live.back()});
    }
    const int steps = 3 + static_cast<int>(rng() % 30);
    for (int t = 0; t < steps; ++t) {
      std::vector<int> ops;
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) ops.push_back(live[rng() % live.size()]);
      if (rng() % 8 == 0) {  // a forward
        const int f = w.Value(Kind::kTemp, w.p.values[static_cast<size_t>(ops[0])].bytes, "%f" + std::to_string(t));
        BufferProblem::Step& st = w.Step({ops[0]}, {f});
        st.forward = true;
        live.push_back(f);
        continue;
      }
      const int64_t bytes = rng() % 2 ? w.p.values[static_cast<size_t>(ops[0])].bytes : 64 * (1 + static_cast<int64_t>(rng() % 4));
      const int v = w.Value(Kind::kTemp, bytes, "%v" + std::to_string(t));
      BufferProblem::Step& st = w.Step(ops, {v});
      std::vector<int> cand;
      for (size_t j = 0; j < ops.size(); ++j)
        if (w.p.values[static_cast<size_t>(ops[j])].bytes == bytes) cand.push_back(static_cast<int>(j));
      st.in_place = {cand};
      live.push_back(v);
    }
    // Regions: a few runs of consecutive steps (not over the parameters).
    for (size_t t = static_cast<size_t>(args); t + 3 < w.p.steps.size(); ++t)
      if (rng() % 6 == 0) {
        w.p.steps[t].region = 2 + static_cast<int>(rng() % 2);
        t += static_cast<size_t>(w.p.steps[t].region) - 1;
      }
    // The last few values are results.
    for (size_t i = live.size() - 1 - std::min<size_t>(live.size() - 1, rng() % 3); i < live.size(); ++i)
      if (w.p.values[static_cast<size_t>(live[i])].kind == Kind::kTemp) w.p.values[static_cast<size_t>(live[i])].kind = Kind::kResult;
    const BufferPlan plan = AssignBuffers(w.p);
    ASSERT_EQ(CheckBufferPlan(w.p, plan), "") << "round " << round << "\n" << plan.ToString(w.p);
    EXPECT_GE(plan.arena_bytes, plan.temp_peak_bytes);

    // Replay: arena bytes hold the tag of the value written there last; a read of an arena value
    // must find its own tag (or the tag of the value it was written in place of, for the reads at
    // the handing-over step, which come first).
    std::vector<int> arena(static_cast<size_t>(plan.arena_bytes / 64), -1);
    std::vector<int> tag(w.p.values.size());
    for (size_t v = 0; v < tag.size(); ++v) tag[v] = static_cast<int>(v);
    for (size_t t = 0; t < w.p.steps.size(); ++t) {
      const BufferProblem::Step& st = w.p.steps[t];
      for (int v : st.operands) {
        const BufferPlan::Value& pv = plan.values[static_cast<size_t>(v)];
        if (pv.storage != Storage::kArena) continue;
        for (int64_t k = pv.offset / 64; k < (pv.offset + w.p.values[static_cast<size_t>(v)].bytes) / 64; ++k)
          ASSERT_EQ(arena[static_cast<size_t>(k)], tag[static_cast<size_t>(v)]) << "round " << round << " step " << t;
      }
      for (size_t r = 0; r < st.results.size(); ++r) {
        const int v = st.results[r];
        const BufferPlan::Value& pv = plan.values[static_cast<size_t>(v)];
        if (st.forward) {
          tag[static_cast<size_t>(v)] = tag[static_cast<size_t>(st.operands[r])];
          continue;
        }
        if (pv.storage != Storage::kArena) continue;
        for (int64_t k = pv.offset / 64; k < (pv.offset + w.p.values[static_cast<size_t>(v)].bytes) / 64; ++k)
          arena[static_cast<size_t>(k)] = tag[static_cast<size_t>(v)];
      }
    }
  }
}

}  // namespace
}  // namespace axle::passes
