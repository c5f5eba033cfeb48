// Helpers shared by the nn sources (not public API).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "axle/tensor.h"

namespace axle::nn {

// "[2,3]" and "f32[2,3]".
std::string ShapeString(const Dims& dims);
std::string TypeString(DType dtype, const Dims& dims);
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
