// Automatic mixed precision (include/axle/autocast.h, docs/precision.md): a per-thread stack of
// scopes, each with its dtype and its policy overrides, and the cast every listed op applies to
// its inputs before it is traced.
#include "axle/autocast.h"

#include <fmt/format.h>

#include <array>
#include <map>

#include "core/error.h"
#include "frontend/lazy.h"
#include "frontend/ops_internal.h"

namespace axle {
namespace {

struct OpPolicy {
  const char* op;
  CastPolicy policy;
};
// PyTorch's CUDA autocast lists, restricted to Axle's ops (the header lists them too).
constexpr std::array<OpPolicy, 13> kDefaultPolicies = {{
    {"matmul", CastPolicy::kLowerPrecision},
    {"einsum", CastPolicy::kLowerPrecision},
    {"linear", CastPolicy::kLowerPrecision},
    {"attention", CastPolicy::kLowerPrecision},
    {"softmax", CastPolicy::kFloat32},
    {"log_softmax", CastPolicy::kFloat32},
    {"layer_norm", CastPolicy::kFloat32},
    {"rms_norm", CastPolicy::kFloat32},
    {"cross_entropy", CastPolicy::kFloat32},
    {"sum", CastPolicy::kFloat32},
    {"mean", CastPolicy::kFloat32},
    {"var", CastPolicy::kFloat32},
    {"prod", CastPolicy::kFloat32},
}};

struct Scope {
  bool enabled = true;
  DType dtype = kBFloat16;
  std::map<std::string, CastPolicy, std::less<>> overrides;
};
thread_local std::vector<Scope> tls_scopes;

const OpPolicy* FindDefault(std::string_view op) {
  for (const OpPolicy& p : kDefaultPolicies)
    if (op == p.op) return &p;
  return nullptr;
}

std::string KnownOps() {
  std::vector<std::string> names;
  for (const OpPolicy& p : kDefaultPolicies) names.emplace_back(p.op);
  return fmt::format("{}", fmt::join(names, ", "));
}

CastPolicy PolicyOf(std::string_view op) {
  if (!autocast_enabled()) return CastPolicy::kNone;
  for (auto s = tls_scopes.rbegin(); s != tls_scopes.rend(); ++s) {
    if (auto it = s->overrides.find(op); it != s->overrides.end()) return it->second;
    if (!s->enabled) break;  // an f32 region inside autocast: outer overrides do not reach in
  }
  const OpPolicy* p = FindDefault(op);
  AXLE_CHECK(p != nullptr, "autocast: op '{}' has no policy", op);
  return p->policy;
}

bool IsHalf(DType t) { return t == DType::kBF16 || t == DType::kF16; }

}  // namespace

autocast::autocast(DType dtype, bool enabled) : depth_(tls_scopes.size()) {
  if (enabled && !IsHalf(dtype))
    Fail("autocast: dtype {} is not a lower precision; use axle::kBFloat16 or axle::kFloat16 (or "
         "enabled = false for an f32 region)",
         DTypeName(dtype));
  tls_scopes.push_back(Scope{enabled, enabled ? dtype : kFloat32, {}});
}

autocast::~autocast() { tls_scopes.resize(depth_); }

autocast& autocast::set_policy(const std::string& op, CastPolicy policy) {
  if (FindDefault(op) == nullptr)
    Fail("autocast::set_policy: '{}' is not an op autocast knows; the ops are {}", op, KnownOps());
  tls_scopes.at(depth_).overrides[op] = policy;
  return *this;
}

bool autocast_enabled() { return !tls_scopes.empty() && tls_scopes.back().enabled; }

DType autocast_dtype() { return autocast_enabled() ? tls_scopes.back().dtype : kFloat32; }

CastPolicy autocast_policy(const std::string& op) {
  if (FindDefault(op) == nullptr)
    Fail("autocast_policy: '{}' is not an op autocast knows; the ops are {}", op, KnownOps());
  return PolicyOf(op);
}

std::vector<std::string> autocast_ops(CastPolicy policy) {
  std::vector<std::string> ops;
  for (const OpPolicy& p : kDefaultPolicies)
    if (policy == CastPolicy::kNone || p.policy == policy) ops.emplace_back(p.op);
  return ops;
}

namespace detail {

AutocastOff::AutocastOff() : scope(std::make_unique<autocast>(kFloat32, false)) {}
AutocastOff::~AutocastOff() = default;

Tensor Autocast(const Tensor& t, std::string_view op) {
  if (tls_scopes.empty() || !t.defined() || !IsFloat(t.dtype())) return t;
  const CastPolicy p = PolicyOf(op);
  DType to = t.dtype();
  if (p == CastPolicy::kLowerPrecision && (t.dtype() == kFloat32 || IsHalf(t.dtype()))) to = autocast_dtype();
  if (p == CastPolicy::kFloat32 && IsHalf(t.dtype())) to = kFloat32;
  if (to == t.dtype()) return t;
  // Note [Precision in recompilation reports] (lazy.cc): the trace remembers it was cast.
  CurrentTrace().precision = fmt::format("under autocast({})", DTypeName(autocast_dtype()));
  return t.to(to);
}

}  // namespace detail
}  // namespace axle
