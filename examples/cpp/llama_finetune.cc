// Fine-tuning a Hugging Face Llama-family directory from C++, then greedy decoding with a KV
// cache: the loop `axle train --init DIR` runs, written against the public API.
//
//   llama_finetune MODEL_DIR [STEPS]      (default 20; try tests/nn/goldens/llama_llama)
//
// The tokens here are a fixed synthetic stream below the vocabulary size; real text goes through
// `axle tokenize` into a shard first (README.md, "Fine-tuning a Hugging Face model").
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "axle/nn.h"
#include "axle/optim.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [STEPS]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  try {
    std::shared_ptr<axle::nn::CausalLM> model = axle::nn::LoadCausalLM(argv[1], {.convert_dtype = true});
    std::printf("loaded %s\n", model->config_string().c_str());
    const int64_t B = 2, T = 16, V = model->vocab_size();
    auto tokens = [&](int step, int shift) {
      std::vector<int32_t> v;
      for (int64_t i = 0; i < B * T; ++i) v.push_back(static_cast<int32_t>((step * 5 + i * 3 + shift * 3) % V));
      return axle::from_vector<int32_t>(v, {B, T}, axle::DType::kI32);
    };
    // AdamW with weight decay on matrices only, gradients clipped: as axle train.
    std::vector<axle::Tensor> decay, no_decay, all;
    for (const auto& [name, p] : model->named_parameters()) {
      (p.dim() >= 2 ? decay : no_decay).push_back(p);
      all.push_back(p);
    }
    axle::optim::AdamW opt({{decay, 0.1}, {no_decay, 0.0}}, 1e-3);
    double first = 0, last = 0;
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad();
      axle::Tensor loss = model->forward(tokens(step % 4, 0), tokens(step % 4, 1));
      loss.backward();
      axle::optim::clip_grad_norm_(all, 1.0);
      opt.step();
      axle::sync();
      last = loss.item();
      if (step == 0) first = last;
      std::printf("step %d loss %.4f\n", step, last);
    }
    // Greedy decoding: the prompt once, then one token at a time against the cache.
    axle::NoGradGuard no_grad;
    model->eval();
    axle::nn::KVCache cache = model->make_cache(1, 24);
    axle::Tensor logits = model->forward_cached(axle::from_vector<int32_t>({0, 3, 6, 9}, {1, 4}, axle::DType::kI32), cache);
    std::printf("greedy:");
    for (int k = 0; k < 8; ++k) {
      const auto next = static_cast<int32_t>(logits.select(1, logits.size(1) - 1).argmax(-1).item());
      std::printf(" %d", next);
      logits = model->forward_cached(axle::from_vector<int32_t>({next}, {1, 1}, axle::DType::kI32), cache);
    }
    std::printf("\n");
    return steps > 1 && !(last < first) ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_finetune: %s\n", e.what());
    return 1;
  }
}
