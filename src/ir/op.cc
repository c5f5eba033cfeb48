#include "ir/op.h"

#include <type_traits>

namespace axle::ir {
namespace {

template <typename T, typename Variant>
struct VariantIndex;
template <typename T, typename... Ts>
struct VariantIndex<T, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    size_t i = 0;
    bool found = false;
    ((found = found || std::is_same_v<T, Ts>, i += found ? 0 : 1), ...);
    return i;
  }();
};

}  // namespace

const std::array<OpInfo, kNumOps>& AllOps() {
  static const std::array<OpInfo, kNumOps> table = {{
#define AXLE_OP(e, name, attrs, min_ops, max_ops, results, traits) \
  {OpKind::e, name, VariantIndex<attrs, Attrs>::value, min_ops, max_ops, results, traits},
#include "ir/ops.def"
#undef AXLE_OP
  }};
  return table;
}

std::optional<OpKind> ParseOpKind(std::string_view name) {
  for (const OpInfo& info : AllOps())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

Attrs DefaultAttrs(OpKind k) {
  switch (k) {
#define AXLE_OP(e, name, attrs, min_ops, max_ops, results, traits) \
  case OpKind::e:                                                  \
    return attrs{};
#include "ir/ops.def"
#undef AXLE_OP
  }
  return NoAttrs{};
}

}  // namespace axle::ir
