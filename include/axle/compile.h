// A function of tensors whose step is traced once and then replayed: torch.compile with
// PyTorch/XLA's openxla backend, or jax.jit, for Axle's lazy tensors.
//
//   axle::CompiledFunction train_step([&](const std::vector<axle::Tensor>& batch) {
//     axle::Tensor loss = model.forward(batch[0], batch[1]);
//     loss.backward();
//     opt.step();
//     opt.zero_grad();           // gradients made inside must not outlive the call
//     return std::vector<axle::Tensor>{loss.detach()};
//   }, "train_step");
//   for (...) { opt.set_lr(lr); loss = train_step({x, y})[0]; }
//
// Every call of a lazy training loop traces the same graph again: the host rebuilds ~1,300 nodes
// and their gradients (~1 ms for GPT-2 small), on a core the step's kernels want. A
// CompiledFunction traces its first two calls as usual (each a sync() of its own); when both
// produced the same graph and every tensor the graph reads or writes can be found again, later
// calls skip the function: they read the same tensors' new buffers, launch the cached executable
// and rebind the same tensors to its results (Note [Replaying a step], compiled_function.cc).
//
// The contract, as for jax.jit: the function's graph depends only on its arguments' types and on
// the tensors it reads, not on host values that change between calls. What Axle checks:
//   * arguments: same count and types as when the plan was made (else the call is traced again);
//   * tensors read: each is an argument or the same tensor object on both traced calls; a tensor
//     made anew inside the function from host data (from_vector, a C++ scalar uploaded each call)
//     cannot be replayed, so the function is traced on every call and why() says which one;
//   * tensors written: each is the same tensor on both calls (parameters, optimizer state) or a
//     returned one; a new tensor kept alive past the call (a gradient left in .grad) prevents
//     replay, as does a sync() inside the function or a sharded step (a mesh);
//   * host work that must happen on every call registers itself with record_host_effect (the
//     optimizers' step counters and their uploaded scalars); replays run it again, in order.
// Results are detached tensors. AXLE_REPLAY=0 traces every call (results are the same bits).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axle/tensor.h"

namespace axle {

class CompiledFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  explicit CompiledFunction(Fn fn, std::string name = "compiled function");
  ~CompiledFunction();
  CompiledFunction(CompiledFunction&&) noexcept;
  CompiledFunction& operator=(CompiledFunction&&) noexcept;

  // Runs the function (traced, then replayed); its results' steps are launched, not awaited.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args);

  int64_t traced_calls() const;
  int64_t replayed_calls() const;
  // Empty while the function replays (or has not yet been called twice); otherwise why it is
  // traced on every call.
  std::string why_traced() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Host work of a traced function that a replay must repeat (an optimizer's step counters and the
// scalars it uploads): inside a CompiledFunction's traced call, `effect` is kept and run again,
// in order, before each replay. The caller has already done the work for this call. Outside a
// compiled function it is dropped. The effect must stay valid as long as the function is used
// (it captures what the function itself captures).
void record_host_effect(std::function<void()> effect);

// Makes `dst` refer to `src`'s value (PyTorch's Tensor.set_): no graph node, no copy. Both must
// have the same type. The optimizers refresh their uploaded scalars this way, so every step
// reads the same tensor objects.
void set_data(Tensor& dst, const Tensor& src);

}  // namespace axle
