// The README's training loop as a program: a tiny GPT-2 learns a repeating text, one compiled
// step per iteration (traced lazily, compiled once, then taken from the cache).
//
//   train_loop [STEPS]      (default 100)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "axle/metrics.h"
#include "axle/nn.h"
#include "axle/optim.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const std::string text = "the quick brown fox jumps over the lazy dog. ";
  const int64_t B = 4, T = 32;
  // Batches of byte tokens: row b of step s starts at byte (s * B + b) * 7 of the repeated text.
  auto batch = [&](int step, int shift) {
    std::vector<int32_t> v;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) v.push_back(static_cast<unsigned char>(text[((step * B + b) * 7 + t + shift) % text.size()]));
    return axle::from_vector<int32_t>(v, {B, T}, axle::DType::kI32);
  };

  auto model = std::make_shared<axle::nn::GPT2>(axle::nn::GPT2Config::Preset("tiny"), /*seed=*/0);
  axle::optim::AdamW opt(model->parameters(), 3e-3);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    axle::Tensor x = batch(step, 0), y = batch(step, 1);
    opt.zero_grad();
    axle::Tensor loss = model->forward(x, y);  // traced lazily, nothing runs yet
    loss.backward();                           // the backward graph, IR -> IR
    opt.step();                                // the update, in the same graph
    axle::sync();                              // compile once (then cached), run asynchronously
    last = loss.item();
    if (step == 0) first = last;
    if (step % 10 == 0 || step == steps - 1) std::printf("step %d loss %.4f\n", step, last);
  }
  std::printf("%s", axle::metrics_report().c_str());  // compiles, cache hits, transfers, graph sizes
  return steps > 1 && !(last < first) ? 1 : 0;        // the loss must fall
}
