// Loading Hugging Face model directories into the causal LMs (not public API; axle/nn.h has
// LoadCausalLM, LoadGPT2).
#pragma once

#include <memory>
#include <string>

#include "axle/nn.h"
#include "checkpoint/model_dir.h"

namespace axle::nn {

// Where a model directory's config came from, for errors: DIR/config.json, or the file's
// __metadata__.
std::string ConfigSource(const std::string& path);

std::shared_ptr<GPT2> LoadGPT2(checkpoint::ModelDir dir, const std::string& path, const LoadGPT2Options& options);
std::shared_ptr<Llama> LoadLlama(checkpoint::ModelDir dir, const std::string& path, bool convert_dtype);

// A tied head's lm_head.weight, when a file has one, must be the embedding's exact copy.
void CheckTiedHead(const ir::Literal& head, const ir::Literal& embedding, const std::string& embedding_name,
                   const std::string& path);

// Checks `tensors` against `model`'s state dict (every missing, unexpected or mistyped tensor
// named; with `convert_dtype`, any floating dtype in place of the model's), copies them in and
// sync()s.
void LoadCheckedWeights(Module& model, checkpoint::TensorMap tensors, const std::string& path, bool convert_dtype,
                        const char* convert_hint);

}  // namespace axle::nn
