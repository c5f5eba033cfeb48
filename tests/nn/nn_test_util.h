// Helpers for the nn tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "axle/nn.h"
#include "axle/tensor.h"
#include "core/error.h"

namespace axle::nn::testing {

inline std::vector<float> Vec(const Tensor& t) { return t.to_vector<float>(); }

inline Tensor F32(const std::vector<float>& v, Dims shape) {
  return from_vector<float>(v, std::move(shape), DType::kF32);
}

inline Tensor I64(const std::vector<int64_t>& v, Dims shape) {
  return from_vector<int64_t>(v, std::move(shape), DType::kI64);
}

// The message of the axle::Error `f` throws (fails the test when it throws none).
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an axle::Error";
  return "";
}

// A fresh empty directory under the test temp dir, removed when the test process exits.
inline std::filesystem::path TempDir(const std::string& name) {
  struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Cleanup cleanup;
  auto dir = std::filesystem::temp_directory_path() /
             ("axle_nn_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  cleanup.dirs.push_back(dir);
  return dir;
}

// Host-side N(0, std^2) values for every tensor of `module`'s state dict, loaded into it.
inline void Randomize(Module& module, uint32_t seed, float std = 0.5f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, std);
  StateDict state;
  for (const auto& [name, t] : module.state_dict()) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (auto& x : v) x = normal(rng);
    state.emplace_back(name, F32(v, t.sizes()));
  }
  module.load_state_dict(state);
  sync();
}

inline void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                       double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " element " << i;
  }
}

}  // namespace axle::nn::testing
