#include "ir/attrs.h"

namespace axle::ir {

std::vector<Field> AttrFields(const Attrs& attrs) {
  std::vector<Field> out;
  std::visit(
      [&](const auto& s) {
        s.VisitFields([&](std::string_view name, const auto& field) {
          out.push_back({name, FieldRef(&field)});
        });
      },
      attrs);
  return out;
}

std::vector<MutableField> MutableAttrFields(Attrs& attrs) {
  std::vector<MutableField> out;
  std::visit(
      [&](auto& s) {
        s.VisitFields([&](std::string_view name, auto& field) {
          out.push_back({name, MutableFieldRef(&field)});
        });
      },
      attrs);
  return out;
}

bool AttrsEqual(const Attrs& a, const Attrs& b) {
  if (a.index() != b.index()) return false;
  std::vector<Field> fa = AttrFields(a);
  std::vector<Field> fb = AttrFields(b);
  for (size_t i = 0; i < fa.size(); ++i) {
    bool same = std::visit(
        [&](const auto* pa) {
          using P = std::remove_cvref_t<decltype(pa)>;
          return *pa == *std::get<P>(fb[i].ref);
        },
        fa[i].ref);
    if (!same) return false;
  }
  return true;
}

}  // namespace axle::ir
