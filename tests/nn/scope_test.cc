// Module forwards name their graph regions (axle::NameScope) by module path, which is what
// recompilation reports print. Reads the frontend's trace (frontend/lazy.h) to see the names.
#include <set>

#include "frontend/lazy.h"
#include "nn_test_util.h"

namespace axle::nn {
namespace {

std::set<std::string> ScopesOfPendingTrace() {
  std::set<std::string> out;
  const detail::Trace& t = detail::CurrentTrace();
  for (int32_t i : t.scope_of)  // the scopes some node of the trace has
    if (i >= 0) out.insert(t.scope_names[static_cast<size_t>(i)]);
  return out;
}

TEST(NameScopes, GPT2RegionsAreModulePaths) {
  GPT2 model(GPT2Config::Preset("tiny"), 0);
  Tensor idx = testing::I64(std::vector<int64_t>(32, 3), {2, 16});
  sync();
  Tensor loss = model.forward(idx, idx);
  const std::set<std::string> scopes = ScopesOfPendingTrace();
  sync();
  for (const char* s : {"GPT2.wte", "GPT2.wpe", "GPT2.h.0.ln_1", "GPT2.h.0.attn.c_attn",
                        "GPT2.h.1.attn", "GPT2.h.1.mlp.c_proj", "GPT2.ln_f", "GPT2.lm_head",
                        "GPT2.loss"}) {
    EXPECT_TRUE(scopes.count(s)) << s << " in " << ::testing::PrintToString(scopes);
  }
  for (const auto& s : scopes) EXPECT_EQ(s.rfind("GPT2", 0), 0u) << s;
}

TEST(NameScopes, ChildCalledDirectlyUsesItsPath) {
  GPT2 model(GPT2Config::Preset("tiny"), 0);
  (*model.blocks[1]->mlp)(zeros({1, 2, 64}));
  const std::set<std::string> scopes = ScopesOfPendingTrace();
  sync();
  EXPECT_TRUE(scopes.count("h.1.mlp.c_fc")) << ::testing::PrintToString(scopes);
  Linear lin(2, 2);
  lin(zeros({1, 2}));
  EXPECT_TRUE(ScopesOfPendingTrace().count("Linear"));
  sync();
}

}  // namespace
}  // namespace axle::nn
