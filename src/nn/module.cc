// nn::Module: parameters, buffers, children, state dicts and modes (torch.nn.Module's semantics).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <unordered_map>

#include "axle/nn.h"
#include "core/error.h"
#include "nn/util.h"

namespace axle::nn {

uint64_t DeriveSeed(uint64_t seed, std::string_view name) {
  // FNV-1a over the name, mixed with the seed by SplitMix64's finalizer: stable across platforms.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (h | 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string ShapeString(const Dims& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::string TypeString(DType dtype, const Dims& dims) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeString(dims));
}

namespace {

std::string Join(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  if (name.empty()) return prefix;
  return prefix + "." + name;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty()) Fail("{}: cannot register a {} with an empty name", scope_name(), what);
  if (name.find('.') != std::string::npos) {
    Fail("{}: {} name '{}' contains '.'; register a child module instead of a dotted name",
         scope_name(), what, name);
  }
  bool taken = false;
  for (const auto& [n, t] : params_) taken |= n == name;
  for (const auto& b : buffers_) taken |= b.name == name;
  for (const auto& [n, m] : children_) taken |= n == name;
  if (taken) {
    Fail("{}: cannot register {} '{}': the module already has a parameter, buffer or child of "
         "that name",
         scope_name(), what, name);
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name, "parameter");
  if (!value.defined()) Fail("{}: parameter '{}' is an undefined tensor", scope_name(), name);
  Tensor leaf = value.detach();
  if (requires_grad) leaf.requires_grad_(true);
  params_.emplace_back(name, leaf);
  return leaf;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name, "buffer");
  if (!value.defined()) Fail("{}: buffer '{}' is an undefined tensor", scope_name(), name);
  Tensor b = value.detach();
  buffers_.push_back({name, b, persistent});
  return b;
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  if (!module) Fail("{}: child module '{}' is null", scope_name(), name);
  module->set_path(Join(path_, name));
  children_.emplace_back(name, std::move(module));
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(Join(path_, name));
}

std::string Module::scope_name() const { return path_.empty() ? type_name_ : path_; }

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  out.emplace_back("", this);
  for (const auto& [name, child] : children_) {
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(Join(name, sub), m);
  }
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (!recurse) return params_;
  for (const auto& [prefix, m] : named_modules()) {
    for (const auto& [name, t] : m->params_) out.emplace_back(Join(prefix, name), t);
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [prefix, m] : named_modules()) {
    if (!recurse && m != this) continue;
    for (const auto& b : m->buffers_) out.emplace_back(Join(prefix, b.name), b.value);
  }
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : parameters()) n += t.numel();
  return n;
}

StateDict Module::state_dict() const {
  // PyTorch's order: module by module (pre-order), its parameters then its persistent buffers.
  StateDict out;
  for (const auto& [prefix, m] : named_modules()) {
    for (const auto& [name, t] : m->params_) out.emplace_back(Join(prefix, name), t);
    for (const auto& b : m->buffers_) {
      if (b.persistent) out.emplace_back(Join(prefix, b.name), b.value);
    }
  }
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict, bool convert_dtype) {
  StateDict own = state_dict();
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < own.size(); ++i) index.emplace(own[i].first, i);

  std::vector<std::string> unexpected, problems;
  std::vector<bool> seen(own.size(), false);
  std::set<std::string> given;
  for (const auto& [name, value] : state) {
    if (!given.insert(name).second) {
      problems.push_back(fmt::format("key '{}' appears twice in the state dict", name));
      continue;
    }
    auto it = index.find(name);
    if (it == index.end()) {
      unexpected.push_back(name);
      continue;
    }
    seen[it->second] = true;
    const Tensor& target = own[it->second].second;
    if (!value.defined()) {
      problems.push_back(fmt::format("'{}' is an undefined tensor", name));
      continue;
    }
    if (value.sizes() != target.sizes()) {
      problems.push_back(fmt::format(
          "size mismatch for '{}': copying a param with shape {} from the state dict, the "
          "shape in the current model is {}",
          name, ShapeString(value.sizes()), ShapeString(target.sizes())));
    } else if (value.dtype() != target.dtype() && !convert_dtype) {
      problems.push_back(fmt::format(
          "dtype mismatch for '{}': the state dict holds {}, the model's parameter is {}; "
          "convert it first or pass convert_dtype=true",
          name, TypeString(value.dtype(), value.sizes()),
          TypeString(target.dtype(), target.sizes())));
    }
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < own.size(); ++i) {
    if (!seen[i]) missing.push_back(own[i].first);
  }
  std::string message;
  if (strict && !missing.empty()) {
    message += fmt::format("\n  missing key(s) in state_dict: {}", QuotedList(missing));
  }
  if (strict && !unexpected.empty()) {
    message += fmt::format("\n  unexpected key(s) in state_dict: {}", QuotedList(unexpected));
  }
  for (const auto& p : problems) message += "\n  " + p;
  if (!message.empty()) {
    Fail("error(s) in loading state_dict for {}:{}", scope_name(), message);
  }

  NoGradGuard no_grad;
  for (const auto& [name, value] : state) {
    auto it = index.find(name);
    if (it == index.end()) continue;
    own[it->second].second.copy_(value);
  }
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
  return *this;
}

Module& Module::to(DType dtype) {
  if (!IsFloat(dtype)) Fail("{}.to({}): modules convert to a floating-point dtype", scope_name(), DTypeName(dtype));
  NoGradGuard no_grad;
  for (auto& [name, t] : state_dict())  // the parameters and the persistent buffers
    if (IsFloat(t.dtype())) t.convert_(dtype);
  return *this;
}

void Module::zero_grad() {
  for (auto& t : parameters()) {
    if (t.grad().defined()) t.set_grad(Tensor());
  }
}

namespace {
// Full paths of the modules whose forward() is running, innermost last.
thread_local std::vector<std::string> g_module_stack;
}  // namespace

ModuleScope::ModuleScope(const Module& module) {
  const std::string& path = module.path();
  if (!g_module_stack.empty()) {
    const std::string& outer = g_module_stack.back();
    if (path == outer) {
      // The same module again (forward(idx, targets) calling forward(idx)): no new region.
    } else if (outer.empty() && !path.empty()) {
      scope_.emplace(path);
    } else if (path.size() > outer.size() && path.compare(0, outer.size(), outer) == 0 &&
               path[outer.size()] == '.') {
      scope_.emplace(path.substr(outer.size() + 1));
    } else {
      scope_.emplace(module.scope_name());
    }
  } else {
    scope_.emplace(module.scope_name());
  }
  g_module_stack.push_back(path);
}

ModuleScope::~ModuleScope() { g_module_stack.pop_back(); }

std::string QuotedList(const std::vector<std::string>& names, size_t max_names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_names; ++i) {
    if (i) out += ", ";
    out += "'" + names[i] + "'";
  }
  if (names.size() > max_names) out += fmt::format(", ... and {} more", names.size() - max_names);
  return out;
}

}  // namespace axle::nn
