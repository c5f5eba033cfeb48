// State dicts <-> safetensors files.
#include "axle/nn.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace axle::nn {

void save_safetensors(const StateDict& state, const std::string& path) {
  checkpoint::TensorMap tensors;
  tensors.reserve(state.size());
  for (const auto& [name, t] : state) {
    if (!t.defined()) Fail("save_safetensors '{}': tensor '{}' is undefined", path, name);
    tensors.emplace_back(name, t.to_literal());
  }
  checkpoint::SaveSafetensors(path, tensors, {{"format", "pt"}});
}

StateDict load_safetensors(const std::string& path) {
  checkpoint::TensorMap tensors = checkpoint::LoadSafetensors(path);
  StateDict state;
  state.reserve(tensors.size());
  for (auto& [name, lit] : tensors) state.emplace_back(name, from_literal(std::move(lit)));
  return state;
}

}  // namespace axle::nn
