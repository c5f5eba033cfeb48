#include "ir/printer.h"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "ir/lexer.h"

namespace axle::ir {
namespace {

// Gives each name a unique text: the name itself, else the name with ".1", ".2", ... appended.
class UniqueNames {
 public:
  // Reserves `name` and returns it, or a suffixed variant when it is taken.
  std::string Claim(const std::string& name) {
    if (used_.insert(name).second) return name;
    int64_t& next = next_suffix_[name];
    while (true) {
      std::string candidate = fmt::format("{}.{}", name, ++next);
      if (used_.insert(candidate).second) return candidate;
    }
  }
  bool Taken(const std::string& name) const { return used_.count(name) != 0; }

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, int64_t> next_suffix_;
};

// A stored name as the grammar allows it: [A-Za-z0-9_.]+.
std::string SanitizeName(const std::string& name) {
  if (name.empty()) return "_";
  std::string out = name;
  for (char& c : out)
    if (!IsNameChar(c)) c = '_';
  return out;
}

using NameMap = std::unordered_map<const Value*, std::string>;

// The printed name (without '%') of every value defined in `f`. See Note [Value names].
//
// Note [Value names]
// Named values come first, in definition order, so that a stored name keeps its text and only
// a later repeat gets a suffix; then unnamed values take %0, %1, ... skipping taken texts. After
// one print/parse cycle every value is named, uniquely, so a second print is identical.
NameMap NameValues(const Function& f) {
  NameMap names;
  UniqueNames unique;
  for (const auto& n : f.nodes())
    for (Value* r : n->results())
      if (!r->name().empty()) names[r] = unique.Claim(SanitizeName(r->name()));
  int64_t counter = 0;
  for (const auto& n : f.nodes()) {
    for (Value* r : n->results()) {
      if (!r->name().empty()) continue;
      while (unique.Taken(std::to_string(counter))) ++counter;
      names[r] = unique.Claim(std::to_string(counter++));
    }
  }
  return names;
}

std::string ValueRef(const Value* v, const NameMap& names) {
  if (v == nullptr) return "%<null>";
  auto it = names.find(v);
  if (it != names.end()) return "%" + it->second;
  // Not defined in this function: the module is invalid; say so rather than invent a name.
  return v->name().empty() ? "%<undefined>" : "%<undefined:" + SanitizeName(v->name()) + ">";
}

std::string QuoteString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string FormatAxes(const std::vector<std::string>& axes) {
  std::string out = "[";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) out += ",";
    out += IsIdentifier(axes[i]) ? axes[i] : QuoteString(axes[i]);
  }
  return out + "]";
}

std::string FormatSharding(const Sharding& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (i) out += ", ";
    out += FormatAxes(s.dims[i]);
  }
  if (!s.partial.empty()) out += (s.dims.empty() ? "partial=" : ", partial=") + FormatAxes(s.partial);
  return out + "}";
}

std::string FormatType(const Value& v) {
  std::string out = std::string(DTypeName(v.dtype())) + "[";
  const auto& dims = v.shape().dims();
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  out += "]";
  if (v.sharding()) out += FormatSharding(*v.sharding());
  return out;
}

std::string FormatInts(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// True when every element prints as the same text (always so when bitwise identical; NaNs with
// different payloads and bools stored as 2 also count, since the text cannot tell them apart).
bool AllElementsPrintAlike(const Literal& lit) {
  const auto bytes = lit.bytes();
  const size_t width = static_cast<size_t>(DTypeSize(lit.dtype()));
  // Bitwise: the bytes repeat with period `width` exactly when every element equals element 0.
  if (std::memcmp(bytes.data(), bytes.data() + width, bytes.size() - width) == 0) return true;
  const std::string first = FormatElement(lit, 0);
  for (int64_t i = 1; i < lit.NumElements(); ++i)
    if (FormatElement(lit, i) != first) return false;
  return true;
}

std::string FormatLiteral(const Literal& lit) {
  const int64_t n = lit.NumElements();
  if (n < 0 || lit.bytes().size() != static_cast<size_t>(n) * DTypeSize(lit.dtype()))
    return "<invalid literal>";
  if (n == 0) return "[]";
  if (n == 1 || AllElementsPrintAlike(lit)) return FormatElement(lit, 0);
  std::string out = "[";
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += FormatElement(lit, i);
  }
  return out + "]";
}

template <typename E>
std::string FormatEnum(E e) {
  const size_t i = static_cast<size_t>(e);
  return i < EnumNames<E>::kNames.size() ? std::string(EnumNames<E>::kNames[i]) : "<invalid>";
}

std::string FormatField(const FieldRef& ref) {
  return std::visit(
      [](const auto* p) -> std::string {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(*p);
        } else if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return QuoteString(*p);
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(DTypeName(*p));
        } else if constexpr (std::is_same_v<T, CompareDir> || std::is_same_v<T, ReduceKind>) {
          return FormatEnum(*p);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return FormatInts(*p);
        } else if constexpr (std::is_same_v<T, ReplicaGroups>) {
          std::string out = "[";
          for (size_t i = 0; i < p->size(); ++i) out += (i ? ", " : "") + FormatInts((*p)[i]);
          return out + "]";
        } else {
          static_assert(std::is_same_v<T, Literal>, "a field type the printer does not know");
          return FormatLiteral(*p);
        }
      },
      ref);
}

std::string FormatNode(const Node& n, const NameMap& names) {
  std::string out;
  for (size_t i = 0; i < n.num_results(); ++i) out += (i ? ", " : "") + ValueRef(n.result(i), names);
  if (n.num_results() > 0) out += " = ";
  out += std::string(n.name()) + "(";
  for (size_t i = 0; i < n.num_operands(); ++i)
    out += (i ? ", " : "") + ValueRef(n.operand(i), names);
  out += ")";
  const std::vector<Field> fields = AttrFields(n.attrs());
  for (size_t i = 0; i < fields.size(); ++i)
    out += fmt::format("{}{}={}", i ? ", " : " {", fields[i].name, FormatField(fields[i].ref));
  if (!fields.empty()) out += "}";
  for (size_t i = 0; i < n.schedule().size(); ++i) {  // Note [The schedule in the IR]
    const ScheduleEntry& e = n.schedule()[i];
    const std::string value = !e.word.empty() ? e.word : e.ints.size() == 1 ? std::to_string(e.ints[0]) : FormatInts(e.ints);
    out += fmt::format("{}{}={}", i ? ", " : " sched{", e.key, value);
  }
  if (!n.schedule().empty()) out += "}";
  for (size_t i = 0; i < n.num_results(); ++i)
    out += (i ? ", " : " : ") + FormatType(*n.result(i));
  return out;
}

std::string FormatFunction(const Function& f, const std::string& name) {
  const NameMap names = NameValues(f);
  std::string out = fmt::format("  func @{} {{\n", name);
  for (const auto& n : f.nodes()) out += "    " + FormatNode(*n, names) + "\n";
  out += "    return";
  for (size_t i = 0; i < f.results().size(); ++i)
    out += (i ? ", " : " ") + ValueRef(f.results()[i], names);
  return out + "\n  }\n";
}

}  // namespace

std::string PrintModule(const Module& m) {
  std::string out = "module @" + SanitizeName(m.name());
  std::vector<std::string> attrs;
  if (m.num_replicas() != 1) attrs.push_back(fmt::format("num_replicas={}", m.num_replicas()));
  if (const auto& mesh = m.mesh()) {
    attrs.push_back(fmt::format("mesh_axes={}, mesh_shape=[{}]", FormatAxes(mesh->axis_names()),
                                fmt::join(mesh->shape(), ",")));
    if (!mesh->identity_order()) attrs.push_back(fmt::format("mesh_devices=[{}]", fmt::join(mesh->device_ids(), ",")));
  }
  if (!m.scheduled_for().empty()) attrs.push_back("schedule=" + QuoteString(m.scheduled_for()));
  if (!attrs.empty()) out += fmt::format(" {{{}}}", fmt::join(attrs, ", "));
  out += " {\n";
  UniqueNames function_names;
  for (size_t i = 0; i < m.functions().size(); ++i) {
    const Function& f = *m.functions()[i];
    if (i) out += "\n";
    out += FormatFunction(f, function_names.Claim(SanitizeName(f.name())));
  }
  return out + "}\n";
}

std::string PrintFunction(const Function& f) { return FormatFunction(f, SanitizeName(f.name())); }

std::string PrintNode(const Node& n) {
  return FormatNode(n, n.parent() ? NameValues(*n.parent()) : NameMap());
}

}  // namespace axle::ir
