// Helpers shared by the nn sources (not public API).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "axle/tensor.h"

namespace axle::nn {
struct KVCache;
}

namespace axle::nn {

// "[2,3]" and "f32[2,3]".
std::string ShapeString(const Dims& dims);
std::string TypeString(DType dtype, const Dims& dims);
// Attention of new queries over a KV cache (CausalLM::forward_cached): writes k_new, v_new
// [B, KV, T, D] at position `pos` (0-d i64) of k_cache, v_cache [B, KV, L, D], then q
// [B, KV, rep, T, D] (rep query heads per key/value head) attends to all L keys, `blocked`
// [T, L] masked out. Returns [B, KV, rep, T, D].
Tensor CachedAttention(const Tensor& q, const Tensor& k_new, const Tensor& v_new, Tensor& k_cache,
                       Tensor& v_cache, const Tensor& pos, const Tensor& blocked);
// The mask of `T` queries at positions pos .. pos + T - 1 over `L` cache positions: true where
// the key is later than the query or (window > 0) `window` or more positions earlier.
Tensor CacheMask(int64_t T, int64_t L, const Tensor& pos, int64_t window = 0);
// Checks that `cache` fits `model` and T more positions, naming both.
void CheckCache(const std::string& model, const KVCache& cache, int64_t batch, int64_t T, int64_t layers);

// "'a', 'b', ... and N more" (at most max_names names).
std::string QuotedList(const std::vector<std::string>& names, size_t max_names = 20);

}  // namespace axle::nn

namespace axle::nn {

class Module;

// Pushes the NameScope of a module's forward(): its path relative to the module whose forward
// encloses it (NameScopes nest, joined with "."), so a GPT2 root's regions read
// "GPT2.h.0.attn.c_attn"; a module called outside its parent's forward pushes its full path (its
// type name when it is a root).
class ModuleScope {
 public:
  explicit ModuleScope(const Module& module);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  std::optional<NameScope> scope_;
};

}  // namespace axle::nn
