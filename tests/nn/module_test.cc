// nn::Module and the basic layers: registration, names, state dicts, modes.
#include <cmath>

#include "nn_test_util.h"

namespace axle::nn {
namespace {

using testing::ErrorOf;
using testing::F32;
using testing::Vec;

class Net : public Module {
 public:
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<Linear>(3, 4, true, 1));
    norm = register_module("norm", std::make_shared<LayerNorm>(4));
    fc2 = register_module("fc2", std::make_shared<Linear>(4, 2, false, 2));
    scale = register_parameter("scale", ones({2}));
    register_buffer("count", zeros({1}));
    register_buffer("scratch", zeros({3}), /*persistent=*/false);
    drop = register_module("drop", std::make_shared<Dropout>(0.5));
  }
  Tensor forward(const Tensor& x) const {
    return (*drop)((*fc2)((*norm)((*fc1)(x)))) * scale;
  }
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Dropout> drop;
  Tensor scale;
};

std::vector<std::string> Names(const StateDict& s) {
  std::vector<std::string> out;
  for (const auto& [n, t] : s) out.push_back(n);
  return out;
}

TEST(Module, NamesInRegistrationOrder) {
  Net net;
  std::vector<std::string> params;
  for (const auto& [n, t] : net.named_parameters()) params.push_back(n);
  EXPECT_EQ(params, (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "norm.weight",
                                               "norm.bias", "fc2.weight"}));
  EXPECT_EQ(Names(net.state_dict()),
            (std::vector<std::string>{"scale", "count", "fc1.weight", "fc1.bias", "norm.weight",
                                      "norm.bias", "fc2.weight"}));
  std::vector<std::string> buffers;
  for (const auto& [n, t] : net.named_buffers()) buffers.push_back(n);
  EXPECT_EQ(buffers, (std::vector<std::string>{"count", "scratch"}));
  EXPECT_EQ(net.parameters().size(), 6u);
  EXPECT_EQ(net.num_parameters(), 2 + 12 + 4 + 4 + 4 + 8);
  EXPECT_EQ(net.fc1->path(), "fc1");
  EXPECT_EQ(net.path(), "");
  EXPECT_EQ(net.scope_name(), "Net");
  EXPECT_EQ(net.fc1->scope_name(), "fc1");
  for (const auto& p : net.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  for (const auto& b : net.buffers()) EXPECT_FALSE(b.requires_grad());
}

TEST(Module, NestedPathsFollowReparenting) {
  auto inner = std::make_shared<Module>("Inner");
  inner->register_module("lin", std::make_shared<Linear>(2, 2));
  Module outer("Outer");
  outer.register_module("block", inner);
  EXPECT_EQ(outer.named_modules().size(), 3u);
  EXPECT_EQ(outer.named_modules()[2].first, "block.lin");
  EXPECT_EQ(outer.named_modules()[2].second->path(), "block.lin");
}

TEST(Module, RegistrationErrors) {
  Module m("M");
  m.register_parameter("w", zeros({2}));
  EXPECT_NE(ErrorOf([&] { m.register_parameter("w", zeros({2})); }).find("'w'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { m.register_buffer("a.b", zeros({2})); }).find("contains '.'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { m.register_parameter("", zeros({2})); }).find("empty name"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { m.register_parameter("u", Tensor()); }).find("undefined"),
            std::string::npos);
}

TEST(Module, TrainEvalPropagates) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.drop->is_training());
  EXPECT_FALSE(net.fc1->is_training());
  net.train();
  EXPECT_TRUE(net.drop->is_training());
}

TEST(Module, LoadStateDictCopiesValues) {
  Net a, b;
  sync();
  testing::Randomize(a, 7);
  b.load_state_dict(a.state_dict());
  sync();
  const StateDict sa = a.state_dict(), sb = b.state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(Vec(sa[i].second), Vec(sb[i].second)) << sa[i].first;
  }
  // The layers' member handles see the loaded values too.
  EXPECT_EQ(Vec(b.fc1->weight), Vec(a.fc1->weight));
  EXPECT_TRUE(b.fc1->weight.requires_grad());
}

TEST(Module, LoadStateDictMissingAndUnexpected) {
  Net net;
  StateDict s = net.state_dict();
  s.erase(s.begin() + 2);  // fc1.weight
  s.emplace_back("fc3.weight", zeros({2, 2}));
  const std::string msg = ErrorOf([&] { net.load_state_dict(s); });
  EXPECT_NE(msg.find("missing key(s) in state_dict: 'fc1.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected key(s) in state_dict: 'fc3.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Net"), std::string::npos) << msg;
  // Non-strict loading ignores both.
  net.load_state_dict(s, /*strict=*/false);
  sync();
}

TEST(Module, LoadStateDictShapeAndDTypeMismatch) {
  Net net;
  StateDict s = net.state_dict();
  s[2].second = zeros({3, 4});  // fc1.weight is [4,3]
  std::string msg = ErrorOf([&] { net.load_state_dict(s); });
  EXPECT_NE(msg.find("size mismatch for 'fc1.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3,4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4,3]"), std::string::npos) << msg;
  // Not even strict=false accepts a wrong shape.
  EXPECT_NE(ErrorOf([&] { net.load_state_dict(s, false); }).find("size mismatch"),
            std::string::npos);

  s = net.state_dict();
  s[0].second = ones({2}, DType::kF16);  // scale is f32
  msg = ErrorOf([&] { net.load_state_dict(s); });
  EXPECT_NE(msg.find("dtype mismatch for 'scale'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f16[2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("convert_dtype"), std::string::npos) << msg;
  net.load_state_dict(s, true, /*convert_dtype=*/true);
  sync();
  EXPECT_EQ(net.scale.dtype(), DType::kF32);
  EXPECT_EQ(Vec(net.scale), (std::vector<float>{1, 1}));
}

// Module::to(dtype), as PyTorch's module.to: every floating parameter and persistent buffer, and
// the layer's own handle with it (Tensor::convert_); the values rounded once; leaves stay
// trainable leaves; a non-persistent (derived) buffer keeps its dtype.
TEST(Module, ToConvertsFloatingParametersAndBuffersInPlace) {
  Net net;
  net.register_buffer("steps", zeros({1}, DType::kI32));
  const std::vector<float> w = Vec(net.fc1->weight);
  const Tensor held = net.fc1->weight;  // another copy of the handle
  net.to(DType::kBF16);
  for (const auto& [name, p] : net.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::kBF16) << name;
    EXPECT_TRUE(p.requires_grad() && p.is_leaf()) << name;
  }
  for (const auto& [name, b] : net.named_buffers())  // an integer one and a derived table stay
    EXPECT_EQ(b.dtype(), name == "steps" ? DType::kI32 : name == "scratch" ? DType::kF32 : DType::kBF16) << name;
  EXPECT_EQ(held.dtype(), DType::kBF16);
  EXPECT_EQ(Vec(net.fc1->weight.to(DType::kF32)), Vec(F32(w, {4, 3}).to(DType::kBF16).to(DType::kF32)));
  // It trains: a backward gives bf16 gradients to the bf16 parameters.
  net.forward(F32({1, 2, 3}, {1, 3}).to(DType::kBF16)).sum().backward();
  EXPECT_EQ(net.fc1->weight.grad().dtype(), DType::kBF16);
  net.to(DType::kF32);
  EXPECT_EQ(net.scale.dtype(), DType::kF32);
  EXPECT_FALSE(net.fc1->weight.grad().defined());  // a conversion drops the gradient
  EXPECT_NE(ErrorOf([&] { net.to(DType::kI32); }).find("floating-point"), std::string::npos);
}

TEST(Module, ZeroGradSetsNone) {
  Linear lin(3, 2, true, 5);
  sync();
  Tensor x = F32({1, 2, 3}, {1, 3});
  lin(x).sum().backward();
  sync();
  ASSERT_TRUE(lin.weight.grad().defined());
  EXPECT_EQ(Vec(lin.weight.grad()), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(Vec(lin.bias.grad()), (std::vector<float>{1, 1}));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
}

TEST(Layers, LinearLayoutAndInit) {
  Linear lin(16, 8, true, 3);
  EXPECT_EQ(lin.weight.sizes(), (Dims{8, 16}));
  EXPECT_EQ(lin.bias.sizes(), (Dims{8}));
  const double bound = 1.0 / 4.0;
  for (float w : Vec(lin.weight)) {
    EXPECT_GE(w, -bound);
    EXPECT_LT(w, bound);
  }
  // Deterministic per seed; different seeds differ.
  Linear same(16, 8, true, 3), other(16, 8, true, 4);
  EXPECT_EQ(Vec(lin.weight), Vec(same.weight));
  EXPECT_NE(Vec(lin.weight), Vec(other.weight));
  // y = x W^T + b.
  Tensor x = F32({1, -1, 0.5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {1, 16});
  std::vector<float> w = Vec(lin.weight), b = Vec(lin.bias), xv = Vec(x), y = Vec(lin(x));
  ASSERT_EQ(y.size(), 8u);
  for (int o = 0; o < 8; ++o) {
    double want = b[o];
    for (int i = 0; i < 16; ++i) want += double(xv[i]) * w[o * 16 + i];
    EXPECT_NEAR(y[o], want, 1e-5);
  }
  EXPECT_NE(ErrorOf([&] { lin(zeros({2, 5})); }).find("in_features"), std::string::npos);
}

TEST(Layers, EmbeddingNormsDropout) {
  Embedding emb(10, 4, 1);
  Tensor idx = testing::I64({3, 0, 3}, {3});
  std::vector<float> w = Vec(emb.weight), e = Vec(emb(idx));
  ASSERT_EQ(e.size(), 12u);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(e[j], w[3 * 4 + j]);
    EXPECT_EQ(e[4 + j], w[j]);
    EXPECT_EQ(e[8 + j], w[3 * 4 + j]);
  }
  EXPECT_NE(ErrorOf([&] { emb(F32({1}, {1})); }).find("integer"), std::string::npos);

  LayerNorm ln(4);
  std::vector<float> y = Vec(ln(F32({1, 2, 3, 4}, {1, 4})));
  const double sd = std::sqrt(1.25 + 1e-5);
  testing::ExpectNear(y, {-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd}, 1e-5, 1e-5, "layer_norm");

  RMSNorm rms(2, 1e-6);
  y = Vec(rms(F32({3, 4}, {1, 2})));
  const double r = std::sqrt(12.5 + 1e-6);
  testing::ExpectNear(y, {3 / r, 4 / r}, 1e-5, 1e-6, "rms_norm");

  Dropout drop(0.5);
  drop.eval();
  EXPECT_EQ(Vec(drop(F32({1, 2}, {2}))), (std::vector<float>{1, 2}));
  drop.train();
  manual_seed(1);
  std::vector<float> d = Vec(drop(ones({1000})));
  int kept = 0;
  for (float v : d) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 2.0f) < 1e-6) << v;
    kept += v != 0;
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
}

}  // namespace
}  // namespace axle::nn
