// axle::Tensor: eager-looking tensors that are traced lazily into the Axle IR.
//
//   axle::Tensor x = axle::randn({4, 8}, /*seed=*/0);
//   axle::Tensor w = axle::zeros({8, 2}).requires_grad_();
//   axle::Tensor loss = (x.matmul(w) + 1.0).tanh().pow(2).mean();
//   loss.backward();          // records the backward graph (IR -> IR, src/autodiff)
//   axle::sync();             // compiles the step (or takes it from the cache) and runs it
//   double l = loss.item();   // waits for the step
//
// Every operation appends IR nodes to the current trace and returns at once; nothing runs until
// axle::sync(), item(), to_vector()/to_literal() or printing. Names, arguments and semantics follow
// PyTorch's (dims may be negative; broadcasting is NumPy's; reductions take dims and keepdim), so
// a PyTorch user reads Axle code at sight. Differences are written at the declaration.
//
// Tensors have value semantics over shared storage: copying a Tensor copies a handle, as in
// PyTorch. In-place methods (ending in `_`) rebind the handle's storage to a new value, which is
// how parameters and optimizer state are updated inside one traced step; their old buffers are
// donated to the step (no copy).
//
// Dtype promotion: binary ops between tensors of different dtypes promote as PyTorch does for the
// common cases (bool < integers < floating, wider wins); a C++ scalar takes the tensor's dtype.
//
// Threading: trace from one thread. sync() hands the step to a worker thread and returns.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ir/literal.h"

namespace axle {

namespace detail {
struct TensorImpl;
}

using Dims = std::vector<int64_t>;

class Tensor {
 public:
  Tensor() = default;  // undefined (like a default torch::Tensor); most calls on it throw
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const;
  // PyTorch's sizes(), also shape(): a view of the dims (like PyTorch's IntArrayRef), valid while
  // the tensor lives; converts to Dims.
  DimsView sizes() const;
  DimsView shape() const { return sizes(); }
  int64_t dim() const;              // rank
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t numel() const;
  std::string type_string() const;  // "f32[4,8]"

  // ---- Host access (each waits for the pending step that computes the tensor) -----------------
  double item() const;  // a one-element tensor's value
  template <typename T>
  std::vector<T> to_vector() const {
    ir::Literal lit = to_literal();
    const T* p = lit.data<T>();
    AXLE_CHECK(sizeof(T) == static_cast<size_t>(DTypeSize(lit.dtype())),
               "to_vector: element size {} does not match {}", sizeof(T), lit.type().ToString());
    return std::vector<T>(p, p + lit.NumElements());
  }
  ir::Literal to_literal() const;   // a host copy
  std::string ToString() const;     // "tensor(f32[2] [1, 2])"

  // ---- Autodiff ------------------------------------------------------------------------------
  // Marks a leaf as needing a gradient. backward() accumulates d(this)/d(leaf) into leaf.grad().
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;
  bool is_leaf() const;
  // The accumulated gradient (undefined before the first backward()).
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  // Reverse mode over the traced graph: `this` must be traced in the current step (not yet cut by
  // sync()). `gradient` defaults to 1 for a scalar.
  void backward(const Tensor& gradient = Tensor()) const;
  Tensor detach() const;  // the same value, with no gradient flowing back

  // ---- In place (rebinds this handle, and every copy of it, to the new value) --------------------
  Tensor& copy_(const Tensor& src);  // src broadcast and converted to this tensor's type
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other) { return add_(other, -1.0); }
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double s);
  Tensor& zero_();
  Tensor& fill_(double v);
  // Converts the tensor to `dtype` in place: this handle and every copy of it then hold the
  // converted value (PyTorch's `t.data = t.data.to(dtype)`, what Module::to does to parameters).
  // A gradient it had is dropped; a leaf stays a leaf.
  Tensor& convert_(DType dtype);

  // ---- Movement (views are copies in the IR; the compiler removes them) --------------------------
  Tensor reshape(Dims shape) const;  // one dim may be -1
  Tensor view(Dims shape) const { return reshape(std::move(shape)); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(Dims dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }  // rank 2 only
  Tensor mT() const { return transpose(-2, -1); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor expand(Dims shape) const;  // -1 keeps a dim; new leading dims allowed
  Tensor contiguous() const { return *this; }
  // x[start:end:step] along `dim` (PyTorch's narrow/slicing; negative and clamped bounds).
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // x[..., index, ...] (removes dim)
  Tensor index_select(int64_t dim, const Tensor& index) const;  // integer index tensor
  Tensor gather(int64_t dim, const Tensor& index) const;        // torch.gather
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const Dims& sizes, int64_t dim) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor masked_fill(const Tensor& mask, double value) const;  // mask: bool, broadcastable
  Tensor to(DType dtype) const;

  // ---- Elementwise ---------------------------------------------------------------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor sign() const;
  Tensor square() const;
  Tensor reciprocal() const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor logical_not() const;
  Tensor isfinite() const;

  // ---- Reductions (empty dims = all dims) ----------------------------------------------------
  Tensor sum(Dims dims = {}, bool keepdim = false) const;
  Tensor mean(Dims dims = {}, bool keepdim = false) const;
  Tensor amax(Dims dims = {}, bool keepdim = false) const;
  Tensor amin(Dims dims = {}, bool keepdim = false) const;
  Tensor prod(Dims dims = {}, bool keepdim = false) const;
  Tensor var(Dims dims = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;  // i64 indices
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor any() const;

  // ---- Linear algebra --------------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;  // torch.matmul: 1-D, 2-D and batched (broadcast)

  std::shared_ptr<detail::TensorImpl> impl() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

// ---- Creation (the location is recorded for recompilation reports) ------------------------------
Tensor zeros(Dims shape, DType dtype = DType::kF32,
             std::source_location loc = std::source_location::current());
Tensor ones(Dims shape, DType dtype = DType::kF32,
            std::source_location loc = std::source_location::current());
Tensor full(Dims shape, double value, DType dtype = DType::kF32,
            std::source_location loc = std::source_location::current());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// [start, end) with `step`; i64 unless `dtype` is given.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::kI64,
              std::source_location loc = std::source_location::current());
Tensor arange(int64_t end, DType dtype = DType::kI64,
              std::source_location loc = std::source_location::current());
// Uniform [0, 1) and standard normal from Philox-4x32-10 keyed by `seed`: the same seed gives
// the same bits on every backend (PyTorch's generator gives different numbers).
Tensor rand(Dims shape, uint64_t seed, DType dtype = DType::kF32,
            std::source_location loc = std::source_location::current());
Tensor randn(Dims shape, uint64_t seed, DType dtype = DType::kF32,
             std::source_location loc = std::source_location::current());
// A device tensor holding a copy of host data (a transfer; not part of any graph).
Tensor from_literal(ir::Literal value, std::source_location loc = std::source_location::current());
template <typename T>
Tensor from_vector(const std::vector<T>& values, Dims shape, DType dtype,
                   std::source_location loc = std::source_location::current()) {
  return from_literal(ir::Literal::FromVector<T>(dtype, Shape(shape), values), loc);
}
// A scalar constant (0-d) in the trace: use it for values that are the same every step. A value
// that changes per step (a learning rate) should be a device tensor (from_literal) instead, or
// each new value compiles a new graph.
Tensor scalar_tensor(double value, DType dtype = DType::kF32);

// ---- Operators (NumPy broadcasting; scalars take the tensor's dtype) ----------------------------
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
// Comparisons return bool tensors.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator&&(const Tensor& a, const Tensor& b);  // logical and/or of bool tensors
Tensor operator||(const Tensor& a, const Tensor& b);

Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor matmul(const Tensor& a, const Tensor& b);
// Einstein summation over explicit subscripts, e.g. "bij,bjk->bik", "bhqd,bhkd->bhqk"
// (letters only; no ellipsis; repeated output letters are an error; a letter missing from the
// output is summed).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// `operand` with `update` written at the offsets `start` (0-d integer tensors, one per dim; data,
// not constants: a step that writes at a different offset each call, as a KV cache's decode
// step, keeps one graph). Offsets are clamped so the update fits (XLA's dynamic_update_slice).
Tensor dynamic_update_slice(const Tensor& operand, const Tensor& update, const std::vector<Tensor>& start);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Broadcast shape of two shapes (NumPy rules); throws naming both shapes.
Dims broadcast_shapes(const Dims& a, const Dims& b);

// ---- Composite ops (decomposed into IR primitives; src/frontend/composite.cc) -------------------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Normalizes over the trailing dims given by normalized_shape (PyTorch's layer_norm).
Tensor layer_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight = Tensor(),
                double eps = 1e-6);
// approximate: "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor relu(const Tensor& x);
// Inverted dropout (PyTorch's): zeroes with probability p and scales the rest by 1/(1-p) when
// `training`; the mask comes from the global generator (axle::manual_seed), advanced per call.
Tensor dropout(const Tensor& x, double p, bool training = true);
// weight[indices]: indices of any integer dtype and shape S -> S + [embedding_dim].
Tensor embedding(const Tensor& indices, const Tensor& weight);
// Mean cross-entropy of logits [N, C] (or [N, C] after flattening leading dims, with targets of
// the leading shape) against integer class targets; targets equal to ignore_index are left out
// of the mean. reduction: "mean", "sum" or "none".
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     const std::string& reduction = "mean");
// Causal (or not) scaled dot-product attention over [..., T, D] q/k/v (PyTorch's
// scaled_dot_product_attention without dropout).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool is_causal = false);

// ---- Execution -------------------------------------------------------------------------------
// Cuts the trace over every live tensor that has a pending value, compiles it (or takes it from
// the cache), launches it on the execution thread and returns. Later reads wait for it.
void sync();
// Waits until every launched step has finished (rethrows the first error of a step).
void wait();
// Seeds the global generator used by dropout (and rand/randn without explicit seeds).
void manual_seed(uint64_t seed);
// The global generator's state, for checkpoints: the seed of the last manual_seed, and its
// counter, a u32[4] device tensor that each draw advances inside the traced step. rng_counter()
// is the same tensor object until the next manual_seed, so giving it a saved value (set_data, or
// checkpoint::Manager::restore) restores the generator exactly.
uint64_t rng_seed();
Tensor rng_counter();
// The backend that runs steps: "compiled" (the default: fusion + generated C++, docs/compiler.md),
// "cpu" (the per-op executor) or "interpreter" (the reference). AXLE_BACKEND sets the default.
void set_backend(const std::string& name);
std::string backend();

// While alive, new ops record no gradient (PyTorch's torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
bool grad_enabled();

// Names the graph region built while alive (nn::Module pushes its path, e.g. "h.0.attn"); cache
// miss reports point at it.
class NameScope {
 public:
  explicit NameScope(const std::string& name);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;
};

}  // namespace axle
