// GPT-2: Hugging Face names and layouts, configs, the forward pass against a plain C++
// reference, and loading Hugging Face directories and files.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "nn_test_util.h"

namespace axle::nn {
namespace {

using testing::ErrorOf;
using testing::I64;
using testing::Vec;

TEST(GPT2, TinyStateDictIsHuggingFaces) {
  GPT2 model(GPT2Config::Preset("tiny"));
  // Hugging Face GPT2Model(GPT2Config(vocab_size=256, n_positions=128, n_embd=64, n_layer=2,
  // n_head=4)).state_dict(), in order.
  std::vector<std::pair<std::string, Dims>> want = {{"wte.weight", {256, 64}},
                                                    {"wpe.weight", {128, 64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    want.insert(want.end(), {{h + "ln_1.weight", {64}},
                             {h + "ln_1.bias", {64}},
                             {h + "attn.c_attn.weight", {64, 192}},
                             {h + "attn.c_attn.bias", {192}},
                             {h + "attn.c_proj.weight", {64, 64}},
                             {h + "attn.c_proj.bias", {64}},
                             {h + "ln_2.weight", {64}},
                             {h + "ln_2.bias", {64}},
                             {h + "mlp.c_fc.weight", {64, 256}},
                             {h + "mlp.c_fc.bias", {256}},
                             {h + "mlp.c_proj.weight", {256, 64}},
                             {h + "mlp.c_proj.bias", {64}}});
  }
  want.insert(want.end(), {{"ln_f.weight", {64}}, {"ln_f.bias", {64}}});
  const StateDict state = model.state_dict();
  ASSERT_EQ(state.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(state[i].first, want[i].first);
    EXPECT_EQ(state[i].second.sizes(), want[i].second) << state[i].first;
    EXPECT_EQ(state[i].second.dtype(), DType::kF32);
  }
  EXPECT_EQ(model.named_parameters().size(), want.size());
  EXPECT_EQ(model.num_parameters(), 256 * 64 + 128 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 128);
}

TEST(GPT2, Init) {
  GPT2Config c = GPT2Config::Preset("tiny");
  GPT2 model(c, 1);
  auto stats = [](const Tensor& t) {
    double sum = 0, sq = 0;
    std::vector<float> v = Vec(t);
    for (float x : v) sum += x, sq += double(x) * x;
    const double mean = sum / v.size();
    return std::pair{mean, std::sqrt(sq / v.size() - mean * mean)};
  };
  auto [m, sd] = stats(model.wte->weight);
  EXPECT_NEAR(m, 0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.002);
  std::tie(m, sd) = stats(model.blocks[0]->mlp->c_proj->weight);
  EXPECT_NEAR(sd, 0.02 / std::sqrt(4.0), 0.001);
  std::tie(m, sd) = stats(model.blocks[1]->attn->c_proj->weight);
  EXPECT_NEAR(sd, 0.01, 0.001);
  for (float b : Vec(model.blocks[0]->attn->c_attn->bias)) EXPECT_EQ(b, 0);
  for (float w : Vec(model.ln_f->weight)) EXPECT_EQ(w, 1);
  // The same seed gives the same weights; the weights of different layers differ.
  GPT2 again(c, 1);
  EXPECT_EQ(Vec(again.blocks[1]->mlp->c_fc->weight), Vec(model.blocks[1]->mlp->c_fc->weight));
  EXPECT_NE(Vec(model.blocks[0]->mlp->c_fc->weight), Vec(model.blocks[1]->mlp->c_fc->weight));
}

TEST(GPT2Config, PresetsAndJson) {
  GPT2Config s = GPT2Config::Preset("small");
  EXPECT_EQ(s.vocab_size, 512);  // the benchmark config of the compiler issue
  EXPECT_EQ(s.n_embd, 128);
  EXPECT_EQ(s.n_layer, 2);
  EXPECT_EQ(s.n_head, 4);
  GPT2Config b = GPT2Config::Preset("124m");
  EXPECT_EQ(b.vocab_size, 50257);
  EXPECT_EQ(b.head_dim(), 64);
  EXPECT_NE(ErrorOf([] { GPT2Config::Preset("huge"); }).find("tiny"), std::string::npos);

  nlohmann::json j = {{"model_type", "gpt2"},   {"vocab_size", 50257},  {"n_positions", 1024},
                      {"n_embd", 768},          {"n_layer", 12},        {"n_head", 12},
                      {"layer_norm_epsilon", 1e-5}, {"resid_pdrop", 0.1}, {"n_inner", nullptr},
                      {"activation_function", "gelu_new"}};
  GPT2Config c = GPT2Config::FromJson(j, "cfg.json");
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.dropout, 0.1);
  j.erase("n_head");
  std::string msg = ErrorOf([&] { GPT2Config::FromJson(j, "dir/config.json"); });
  EXPECT_NE(msg.find("\"n_head\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("dir/config.json"), std::string::npos) << msg;
  j["n_head"] = 7;
  msg = ErrorOf([&] { GPT2Config::FromJson(j, "c.json"); });
  EXPECT_NE(msg.find("not divisible"), std::string::npos) << msg;
}

// ---- A plain C++ GPT-2 forward in doubles -----------------------------------------------------

using Mat = std::vector<std::vector<double>>;

Mat MatMul(const Mat& a, const std::vector<float>& w, const std::vector<float>& b, int64_t n) {
  Mat out(a.size(), std::vector<double>(n));
  const size_t k = a[0].size();
  for (size_t i = 0; i < a.size(); ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b.empty() ? 0 : b[j];
      for (size_t p = 0; p < k; ++p) s += a[i][p] * w[p * n + j];
      out[i][j] = s;
    }
  }
  return out;
}

Mat LayerNormRef(const Mat& x, const std::vector<float>& w, const std::vector<float>& b,
                 double eps) {
  Mat out = x;
  for (auto& row : out) {
    double mean = 0, var = 0;
    for (double v : row) mean += v;
    mean /= row.size();
    for (double v : row) var += (v - mean) * (v - mean);
    var /= row.size();
    for (size_t j = 0; j < row.size(); ++j) row[j] = (row[j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
  }
  return out;
}

// Logits [T][V] of one sequence.
Mat ReferenceForward(const GPT2& model, const std::vector<int64_t>& idx) {
  const GPT2Config& c = model.config();
  std::map<std::string, std::vector<float>> p;
  for (const auto& [name, t] : model.state_dict()) p[name] = Vec(t);
  const int64_t T = idx.size(), C = c.n_embd, H = c.n_head, D = C / H;
  Mat x(T, std::vector<double>(C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < C; ++j) x[t][j] = p["wte.weight"][idx[t] * C + j] + p["wpe.weight"][t * C + j];
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    Mat a = LayerNormRef(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], c.layer_norm_epsilon);
    Mat qkv = MatMul(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"], 3 * C);
    Mat y(T, std::vector<double>(C));
    for (int64_t hd = 0; hd < H; ++hd) {
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double mx = -1e300, z = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qkv[t][hd * D + d] * qkv[u][C + hd * D + d];
          s[u] = dot / std::sqrt(double(D));
          mx = std::max(mx, s[u]);
        }
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t u = 0; u <= t; ++u) acc += s[u] / z * qkv[u][2 * C + hd * D + d];
          y[t][hd * D + d] = acc;
        }
      }
    }
    Mat o = MatMul(y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"], C);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < C; ++j) x[t][j] += o[t][j];
    a = LayerNormRef(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], c.layer_norm_epsilon);
    Mat f = MatMul(a, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"], 4 * C);
    for (auto& row : f)
      for (auto& v : row)
        v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    Mat m = MatMul(f, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"], C);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < C; ++j) x[t][j] += m[t][j];
  }
  x = LayerNormRef(x, p["ln_f.weight"], p["ln_f.bias"], c.layer_norm_epsilon);
  Mat logits(T, std::vector<double>(c.vocab_size));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      double s = 0;
      for (int64_t j = 0; j < C; ++j) s += x[t][j] * p["wte.weight"][v * C + j];
      logits[t][v] = s;
    }
  return logits;
}

GPT2Config Micro() {
  GPT2Config c;
  c.vocab_size = 11, c.n_positions = 8, c.n_embd = 8, c.n_layer = 2, c.n_head = 2;
  return c;
}

void CheckForwardAgainstReference() {
  GPT2 model(Micro(), 3);
  testing::Randomize(model, 11, 0.3f);
  const std::vector<int64_t> seq0 = {1, 5, 10, 0, 3}, seq1 = {7, 7, 2, 9, 4};
  std::vector<int64_t> both = seq0;
  both.insert(both.end(), seq1.begin(), seq1.end());
  Tensor idx = I64(both, {2, 5});
  Tensor logits = model(idx);
  EXPECT_EQ(logits.sizes(), (Dims{2, 5, 11}));
  std::vector<float> got = Vec(logits);
  std::vector<double> want;
  for (const auto* seq : {&seq0, &seq1})
    for (const auto& row : ReferenceForward(model, *seq)) want.insert(want.end(), row.begin(), row.end());
  testing::ExpectNear(got, want, 1e-4, 1e-4, "logits");

  // The loss is the mean cross-entropy of those logits.
  const std::vector<int64_t> targets = {5, 10, 0, 3, 1, 7, 2, 9, 4, 0};
  double loss = 0;
  for (size_t r = 0; r < 10; ++r) {
    double mx = -1e300, z = 0;
    for (int v = 0; v < 11; ++v) mx = std::max(mx, want[r * 11 + v]);
    for (int v = 0; v < 11; ++v) z += std::exp(want[r * 11 + v] - mx);
    loss += mx + std::log(z) - want[r * 11 + targets[r]];
  }
  EXPECT_NEAR(model.forward(idx, I64(targets, {2, 5})).item(), loss / 10, 1e-4);
}

TEST(GPT2, ForwardMatchesReference) { CheckForwardAgainstReference(); }

TEST(GPT2, ForwardMatchesReferenceOnTheInterpreter) {
  const std::string before = backend();
  set_backend("interpreter");
  try {
    CheckForwardAgainstReference();
  } catch (...) {
    set_backend(before);
    throw;
  }
  set_backend(before);
}

TEST(GPT2, GradientsMatchFiniteDifferences) {
  // The tied head, the residual stream and every projection get the loss's true gradient.
  GPT2 model(Micro(), 8);
  testing::Randomize(model, 13, 0.3f);
  Tensor idx = I64({1, 5, 10, 0, 3, 7, 7, 2}, {2, 4});
  Tensor targets = I64({5, 10, 0, 3, 7, 2, 9, 4}, {2, 4});
  model.forward(idx, targets).backward();
  sync();
  std::map<std::string, Tensor> params;
  for (const auto& [name, t] : model.named_parameters()) params[name] = t;
  const std::vector<std::pair<std::string, int64_t>> probes = {
      {"wte.weight", 5 * 8 + 3},      {"wte.weight", 9 * 8 + 1},  // 9: only in the head
      {"wpe.weight", 2 * 8 + 6},      {"h.0.ln_1.weight", 4},
      {"h.0.attn.c_attn.weight", 17}, {"h.0.attn.c_attn.weight", 8 * 24 - 1},
      {"h.1.attn.c_proj.bias", 2},    {"h.1.mlp.c_fc.weight", 100},
      {"h.1.mlp.c_proj.weight", 33},  {"ln_f.bias", 7}};
  for (const auto& [name, i] : probes) {
    Tensor p = params.at(name);
    const std::vector<float> grad = Vec(p.grad()), orig = Vec(p);
    auto loss_at = [&](float delta) {
      std::vector<float> v = orig;
      v[i] += delta;
      {
        NoGradGuard no_grad;
        p.copy_(testing::F32(v, p.sizes()));
      }
      NoGradGuard no_grad;
      return model.forward(idx, targets).item();
    };
    const float h = 1e-2f;
    const double fd = (loss_at(h) - loss_at(-h)) / (2.0 * h);
    loss_at(0);
    EXPECT_NEAR(grad[i], fd, 1e-4 + 0.01 * std::abs(fd)) << name << "[" << i << "]";
  }
}

TEST(GPT2, Causal) {
  GPT2 model(Micro(), 4);
  testing::Randomize(model, 5, 0.3f);
  std::vector<float> a = Vec(model(I64({1, 2, 3, 4}, {1, 4})));
  std::vector<float> b = Vec(model(I64({1, 2, 3, 9}, {1, 4})));
  for (int i = 0; i < 3 * 11; ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  bool last_differs = false;
  for (int i = 3 * 11; i < 4 * 11; ++i) last_differs |= std::abs(a[i] - b[i]) > 1e-4;
  EXPECT_TRUE(last_differs);
}

TEST(GPT2, DropoutPathMatchesEvalAtTinyP) {
  // In training mode with dropout > 0 attention takes the explicit softmax path (dropout on the
  // probabilities); with p = 1e-9 nothing is dropped, so it must agree with the fused path.
  GPT2Config c = Micro();
  c.dropout = 1e-9;
  GPT2 model(c, 2);
  testing::Randomize(model, 9, 0.3f);
  Tensor idx = I64({3, 1, 4, 1, 5, 9}, {1, 6});
  model.eval();
  std::vector<float> eval = Vec(model(idx));
  model.train();
  std::vector<float> train = Vec(model(idx));
  ASSERT_EQ(eval.size(), train.size());
  for (size_t i = 0; i < eval.size(); ++i) EXPECT_NEAR(eval[i], train[i], 1e-4) << i;
}

TEST(GPT2, ForwardErrors) {
  GPT2 model(Micro());
  EXPECT_NE(ErrorOf([&] { model(I64({1, 2}, {2})); }).find("[B, T]"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { model(zeros({1, 9}, DType::kI64)); }).find("n_positions 8"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { model.forward(I64({1, 2}, {1, 2}), I64({1}, {1, 1})); }).find("targets"),
            std::string::npos);
}

// ---- Loading Hugging Face checkpoints ---------------------------------------------------------

// Writes `model` as Hugging Face's save_pretrained would for GPT2LMHeadModel: "transformer."
// keys, the tied lm_head.weight and (old checkpoints) the attn.bias / attn.masked_bias buffers.
checkpoint::TensorMap HfTensors(const GPT2& model, bool prefix, bool lm_head, bool buffers) {
  checkpoint::TensorMap out;
  const std::string pre = prefix ? "transformer." : "";
  for (const auto& [name, t] : model.state_dict()) out.emplace_back(pre + name, t.to_literal());
  if (lm_head) out.emplace_back("lm_head.weight", model.wte->weight.to_literal());
  if (buffers) {
    const int64_t P = model.config().n_positions;
    for (int64_t l = 0; l < model.config().n_layer; ++l) {
      const std::string h = pre + "h." + std::to_string(l) + ".attn.";
      out.emplace_back(h + "bias", ir::Literal(ir::TensorType(DType::kBool, Shape{1, 1, P, P})));
      out.emplace_back(h + "masked_bias", ir::Literal::FromDoubles(DType::kF32, Shape{}, {-1e4}));
    }
  }
  return out;
}

void WriteConfig(const std::filesystem::path& dir, const GPT2Config& c) {
  nlohmann::json j = {{"model_type", "gpt2"},
                      {"architectures", {"GPT2LMHeadModel"}},
                      {"vocab_size", c.vocab_size},
                      {"n_positions", c.n_positions},
                      {"n_ctx", c.n_positions},
                      {"n_embd", c.n_embd},
                      {"n_layer", c.n_layer},
                      {"n_head", c.n_head},
                      {"layer_norm_epsilon", c.layer_norm_epsilon},
                      {"activation_function", "gelu_new"},
                      {"resid_pdrop", 0.0},
                      {"embd_pdrop", 0.0},
                      {"attn_pdrop", 0.0}};
  std::ofstream(dir / "config.json") << j.dump(2);
}

void ExpectSameWeights(const GPT2& a, const GPT2& b) {
  const StateDict sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(Vec(sa[i].second), Vec(sb[i].second)) << sa[i].first;
  }
}

TEST(LoadGPT2, HuggingFaceDirectory) {
  GPT2 src(Micro(), 21);
  const auto dir = testing::TempDir("hf_dir");
  WriteConfig(dir, src.config());
  checkpoint::SaveSafetensors((dir / "model.safetensors").string(),
                              HfTensors(src, true, true, true), {{"format", "pt"}});
  std::shared_ptr<GPT2> loaded = LoadGPT2(dir.string());
  EXPECT_EQ(loaded->config().n_head, 2);
  EXPECT_EQ(loaded->config().dropout, 0.0);
  EXPECT_EQ(loaded->config().n_layer, 2);
  ExpectSameWeights(src, *loaded);
  Tensor idx = I64({1, 2, 3}, {1, 3});
  EXPECT_EQ(Vec(src(idx)), Vec((*loaded)(idx)));
}

TEST(LoadGPT2, ShardedDirectory) {
  GPT2 src(Micro(), 22);
  const auto dir = testing::TempDir("hf_sharded");
  WriteConfig(dir, src.config());
  checkpoint::TensorMap all = HfTensors(src, false, false, false), a, b;
  nlohmann::json map;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool first = i < all.size() / 2;
    (first ? a : b).push_back(all[i]);
    map[all[i].first] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  checkpoint::SaveSafetensors((dir / "model-00001-of-00002.safetensors").string(), a);
  checkpoint::SaveSafetensors((dir / "model-00002-of-00002.safetensors").string(), b);
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  ExpectSameWeights(src, *LoadGPT2(dir.string()));
  LoadGPT2Options options;
  options.dropout = 0.25;
  std::shared_ptr<GPT2> with_dropout = LoadGPT2(dir.string(), options);
  EXPECT_EQ(with_dropout->config().dropout, 0.25);
  EXPECT_EQ(with_dropout->blocks[1]->attn->attn_dropout->p, 0.25);
}

TEST(LoadGPT2, SingleFileInfersConfig) {
  GPT2 src(Micro(), 23);
  const auto dir = testing::TempDir("hf_file");
  const std::string file = (dir / "gpt2.safetensors").string();
  checkpoint::SaveSafetensors(file, HfTensors(src, false, true, false));
  // n_embd 8 is not a multiple of 64: the head count must be given.
  EXPECT_NE(ErrorOf([&] { LoadGPT2(file); }).find("n_head"), std::string::npos);
  LoadGPT2Options options;
  options.n_head = 2;
  std::shared_ptr<GPT2> loaded = LoadGPT2(file, options);
  EXPECT_EQ(loaded->config().vocab_size, 11);
  EXPECT_EQ(loaded->config().n_positions, 8);
  EXPECT_EQ(loaded->config().n_layer, 2);
  ExpectSameWeights(src, *loaded);
}

TEST(LoadGPT2, Errors) {
  GPT2 src(Micro(), 24);
  const auto dir = testing::TempDir("hf_errors");
  WriteConfig(dir, src.config());
  const std::string file = (dir / "model.safetensors").string();

  // Untied head.
  checkpoint::TensorMap t = HfTensors(src, true, false, false);
  t.emplace_back("lm_head.weight", ir::Literal(ir::TensorType(DType::kF32, Shape{11, 8})));
  checkpoint::SaveSafetensors(file, t);
  std::string msg = ErrorOf([&] { LoadGPT2(dir.string()); });
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;

  // A missing and an extra tensor: both named.
  t = HfTensors(src, false, false, false);
  t.erase(t.begin() + 3);  // h.0.ln_1.bias
  t.emplace_back("h.0.attn.rotary", ir::Literal());
  checkpoint::SaveSafetensors(file, t);
  msg = ErrorOf([&] { LoadGPT2(dir.string()); });
  EXPECT_NE(msg.find("h.0.ln_1.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("h.0.attn.rotary"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;

  // F16 weights for the f32 model: an error naming a key, or converted on request.
  t = HfTensors(src, false, false, false);
  for (auto& [name, lit] : t) {
    std::vector<double> v(lit.NumElements());
    for (int64_t i = 0; i < lit.NumElements(); ++i) v[i] = lit.GetDouble(i);
    lit = ir::Literal::FromDoubles(DType::kF16, lit.shape(), v);
  }
  checkpoint::SaveSafetensors(file, t);
  msg = ErrorOf([&] { LoadGPT2(dir.string()); });
  EXPECT_NE(msg.find("wte.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("convert_dtype"), std::string::npos) << msg;
  LoadGPT2Options convert;
  convert.convert_dtype = true;
  std::shared_ptr<GPT2> loaded = LoadGPT2(dir.string(), convert);
  std::vector<float> a = Vec(src.wte->weight), b = Vec(loaded->wte->weight);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3 * std::abs(a[i]) + 1e-7);

  // A config that lacks a key.
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "vocab_size": 11})";
  msg = ErrorOf([&] { LoadGPT2(dir.string()); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n_positions"), std::string::npos) << msg;
}

}  // namespace
}  // namespace axle::nn
