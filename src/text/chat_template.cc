// Chat templates, evaluation (chat_template.h): the parsed tree (chat_template_parse.cc) run over
// JSON values with Python's semantics.
#include "text/chat_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "text/chat_template_internal.h"

namespace axle::text {
namespace {

using jinja::Expr;
using jinja::ExprPtr;
using jinja::json;
using Node = ChatTemplate::Node;

// A value: JSON, or Jinja's undefined (a missing variable or key: falsy, prints as nothing).
struct Value {
  json v;
  bool undefined = false;
  static Value Undefined() { return {json(), true}; }
};

bool Truthy(const Value& x) {
  if (x.undefined || x.v.is_null()) return false;
  if (x.v.is_boolean()) return x.v.get<bool>();
  if (x.v.is_number_integer()) return x.v.get<int64_t>() != 0;
  if (x.v.is_number()) return x.v.get<double>() != 0;
  if (x.v.is_string()) return !x.v.get_ref<const std::string&>().empty();  // json::empty() is false for strings
  if (x.v.is_array() || x.v.is_object()) return !x.v.empty();
  return true;
}

std::string Repr(const json& v);

// What {{ }} prints: Python's str().
std::string Str(const Value& x) {
  if (x.undefined || x.v.is_null()) return x.undefined ? "" : "None";
  const json& v = x.v;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 1e16) return fmt::format("{:.1f}", d);
    return fmt::format("{}", d);
  }
  return Repr(v);
}

std::string Repr(const json& v) {
  if (v.is_string()) {
    std::string s = "'";
    for (char c : v.get<std::string>()) {
      if (c == '\'' || c == '\\') s += '\\';
      if (c == '\n') {
        s += "\\n";
        continue;
      }
      s += c;
    }
    return s + "'";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Repr(v[i]);
    return s + "]";
  }
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      s += (first ? "" : ", ") + Repr(json(k)) + ": " + Repr(x);
      first = false;
    }
    return s + "}";
  }
  return Str({v});
}

// transformers' tojson: json.dumps(x, ensure_ascii=False) with its default separators.
std::string ToJson(const json& v) {
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + ToJson(v[i]);
    return s + "]";
  }
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      s += (first ? "" : ", ") + json(k).dump() + ": " + ToJson(x);
      first = false;
    }
    return s + "}";
  }
  return v.dump(-1, ' ', /*ensure_ascii=*/false);
}


// ---- Evaluation ------------------------------------------------------------------------------------

class Renderer {
 public:
  Renderer(const std::string& where, const json& context) : where_(where) {
    scopes_.emplace_back();
    for (const auto& [k, v] : context.items()) scopes_.back()[k] = Value{v};
  }

  void Run(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::kBlock:
        for (const auto& c : n.body) Run(*c, out);
        return;
      case Node::kText:
        out += n.text;
        return;
      case Node::kOutput:
        line_ = n.line;
        out += Str(Eval(*n.expr));
        return;
      case Node::kIf:
        line_ = n.line;
        for (const auto& [cond, body] : n.branches)
          if (!cond || Truthy(Eval(*cond))) {
            Run(*body, out);
            return;
          }
        return;
      case Node::kSet: {
        line_ = n.line;
        Value v = Eval(*n.expr);
        if (n.targets.size() == 1) {
          scopes_.back()[n.targets[0]] = v;
          return;
        }
        Value* ns = Lookup(n.targets[0]);
        if (!ns || !ns->v.is_object()) Raise(fmt::format("'{}' is not a namespace", n.targets[0]));
        ns->v[n.targets[1]] = v.v;
        return;
      }
      case Node::kFor: {
        line_ = n.line;
        const Value seq = Eval(*n.expr);
        std::vector<json> items;
        if (seq.v.is_array()) {
          items.assign(seq.v.begin(), seq.v.end());
        } else if (seq.v.is_object()) {
          for (const auto& [k, v] : seq.v.items()) items.push_back(k);
        } else if (seq.v.is_string()) {
          for (char c : seq.v.get<std::string>()) items.push_back(std::string(1, c));
        } else if (!seq.undefined && !seq.v.is_null()) {
          Raise(fmt::format("cannot loop over {}", Repr(seq.v)));
        }
        auto bind = [&](const json& item) {
          if (n.targets.size() == 1) {
            scopes_.back()[n.targets[0]] = Value{item};
          } else {
            if (!item.is_array() || item.size() != n.targets.size())
              Raise(fmt::format("cannot unpack {} into {} names", Repr(item), n.targets.size()));
            for (size_t k = 0; k < n.targets.size(); ++k) scopes_.back()[n.targets[k]] = Value{item[k]};
          }
        };
        if (n.filter) {  // the filter sees the loop variable, and loop.* counts only what passes
          std::vector<json> kept;
          scopes_.emplace_back();
          for (const json& item : items) {
            bind(item);
            if (Truthy(Eval(*n.filter))) kept.push_back(item);
          }
          scopes_.pop_back();
          items = std::move(kept);
        }
        if (items.empty()) {
          Run(*n.body[1], out);
          return;
        }
        for (size_t k = 0; k < items.size(); ++k) {
          scopes_.emplace_back();
          bind(items[k]);
          const auto len = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(k);
          scopes_.back()["loop"] = Value{json{{"index", i + 1}, {"index0", i}, {"first", k == 0}, {"last", i == len - 1},
                                              {"length", len}, {"revindex", len - i}, {"revindex0", len - i - 1},
                                              {"previtem", k > 0 ? items[k - 1] : json()},
                                              {"nextitem", i + 1 < len ? items[k + 1] : json()}}};
          Run(*n.body[0], out);
          scopes_.pop_back();
        }
        return;
      }
    }
  }

 private:
  [[noreturn]] void Raise(const std::string& m) const { Fail("{}: line {}: {}", where_, line_, m); }

  Value* Lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &f->second;
    return nullptr;
  }

  std::string S(const Value& v, const char* what) {
    if (!v.v.is_string()) Raise(fmt::format("{} needs a string, not {}", what, v.undefined ? "undefined" : Repr(v.v)));
    return v.v.get<std::string>();
  }

  static std::string Strip(std::string s, const std::string& chars, bool left, bool right) {
    if (right) s.erase(s.find_last_not_of(chars) == std::string::npos ? 0 : s.find_last_not_of(chars) + 1);
    if (left) s.erase(0, std::min(s.size(), s.find_first_not_of(chars)));
    return s;
  }

  Value Attr(const Value& obj, const std::string& name) {
    if (obj.v.is_object()) {
      auto it = obj.v.find(name);
      return it == obj.v.end() ? Value::Undefined() : Value{*it};
    }
    return Value::Undefined();
  }

  Value Index(const Value& obj, const Value& key) {
    if (obj.v.is_object() && key.v.is_string()) return Attr(obj, key.v.get<std::string>());
    if ((obj.v.is_array() || obj.v.is_string()) && key.v.is_number_integer()) {
      const auto n = static_cast<int64_t>(obj.v.is_array() ? obj.v.size() : obj.v.get<std::string>().size());
      int64_t i = key.v.get<int64_t>();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined();
      return obj.v.is_array() ? Value{obj.v[static_cast<size_t>(i)]}
                              : Value{std::string(1, obj.v.get<std::string>()[static_cast<size_t>(i)])};
    }
    return Value::Undefined();
  }

  Value Call(const Expr& e) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) args.push_back(Eval(*e.args[k]));
    auto arg = [&](size_t k) { return k < args.size() ? args[k] : Value::Undefined(); };
    if (callee.kind == Expr::kName) {
      if (callee.name == "raise_exception") Raise(fmt::format("the template raised: {}", Str(arg(0))));
      if (callee.name == "range") {
        int64_t lo = 0, hi = 0, step = 1;
        if (args.size() == 1) hi = arg(0).v.get<int64_t>();
        if (args.size() >= 2) lo = arg(0).v.get<int64_t>(), hi = arg(1).v.get<int64_t>();
        if (args.size() == 3) step = arg(2).v.get<int64_t>();
        if (step == 0) Raise("range() step must not be zero");
        json r = json::array();
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) r.push_back(i);
        return {r};
      }
      if (callee.name == "namespace") {
        json ns = json::object();
        for (const auto& [k, v] : e.kwargs) ns[k] = Eval(*v).v;
        return {ns};
      }
      Raise(fmt::format("the function '{}' is not supported", callee.name));
    }
    if (callee.kind != Expr::kAttr) Raise("only functions and methods can be called");
    const Value self = Eval(*callee.args[0]);
    const std::string& m = callee.name;
    if (self.v.is_string()) {
      const std::string s = self.v.get<std::string>();
      const std::string chars = args.empty() || arg(0).v.is_null() ? std::string(" \t\n\r\f\v") : S(arg(0), m.c_str());
      if (m == "strip") return {Strip(s, chars, true, true)};
      if (m == "lstrip") return {Strip(s, chars, true, false)};
      if (m == "rstrip") return {Strip(s, chars, false, true)};
      if (m == "upper" || m == "lower") {
        std::string r = s;
        for (char& c : r) c = static_cast<char>(m == "upper" ? toupper(c) : tolower(c));
        return {r};
      }
      if (m == "title") return Filter("title", self, {});
      if (m == "startswith") return {json(s.rfind(S(arg(0), "startswith"), 0) == 0)};
      if (m == "endswith") {
        const std::string x = S(arg(0), "endswith");
        return {json(s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)};
      }
      if (m == "replace") return Filter("replace", self, args);
      if (m == "split") {
        json r = json::array();
        if (args.empty()) {
          size_t k = 0;
          while (k < s.size()) {
            k = s.find_first_not_of(" \t\n\r", k);
            if (k == std::string::npos) break;
            const size_t e2 = std::min(s.size(), s.find_first_of(" \t\n\r", k));
            r.push_back(s.substr(k, e2 - k));
            k = e2;
          }
        } else {
          const std::string sep = S(arg(0), "split");
          size_t k = 0;
          for (size_t f; (f = s.find(sep, k)) != std::string::npos; k = f + sep.size()) r.push_back(s.substr(k, f - k));
          r.push_back(s.substr(k));
        }
        return {r};
      }
    }
    if (self.v.is_object()) {
      if (m == "get") {
        Value v = Attr(self, S(arg(0), "get"));
        return v.undefined ? (args.size() > 1 ? arg(1) : Value{json()}) : v;
      }
      if (m == "items") return Filter("items", self, {});
      if (m == "keys" || m == "values") {
        json r = json::array();
        for (const auto& [k, v] : self.v.items()) r.push_back(m == "keys" ? json(k) : v);
        return {r};
      }
    }
    Raise(fmt::format("the method '{}' of {} is not supported", m, self.undefined ? "undefined" : Repr(self.v)));
  }

  Value Filter(const std::string& f, const Value& x, const std::vector<Value>& args) {
    auto arg = [&](size_t k) { return k < args.size() ? args[k] : Value::Undefined(); };
    if (f == "default" || f == "d") return x.undefined || (Truthy(arg(1)) && !Truthy(x)) ? arg(0) : x;
    if (f == "trim") return {Strip(S(x, "trim"), " \t\n\r\f\v", true, true)};
    if (f == "length" || f == "count") {
      if (x.v.is_string()) return {json(static_cast<int64_t>(x.v.get<std::string>().size()))};
      if (x.v.is_array() || x.v.is_object()) return {json(static_cast<int64_t>(x.v.size()))};
      Raise(fmt::format("length of {}", x.undefined ? "undefined" : Repr(x.v)));
    }
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title") {
      std::string s = S(x, f.c_str());
      bool start = true;
      for (char& c : s) {
        if (f == "upper") c = static_cast<char>(toupper(c));
        else if (f == "lower") c = static_cast<char>(tolower(c));
        else if (f == "capitalize") c = static_cast<char>(&c == &s[0] ? toupper(c) : tolower(c));
        else c = static_cast<char>(start ? toupper(c) : tolower(c));
        start = !isalnum(static_cast<unsigned char>(c));
      }
      return {s};
    }
    if (f == "first" || f == "last") {
      if (!x.v.is_array() || x.v.empty()) return Value::Undefined();
      return {f == "first" ? x.v.front() : x.v.back()};
    }
    if (f == "join") {
      std::string r;
      const std::string sep = args.empty() ? "" : S(arg(0), "join");
      if (x.v.is_array())
        for (size_t k = 0; k < x.v.size(); ++k) r += (k ? sep : "") + Str({x.v[k]});
      return {r};
    }
    if (f == "reverse") {
      if (x.v.is_string()) return {std::string(x.v.get<std::string>().rbegin(), x.v.get<std::string>().rend())};
      json r = x.v;
      if (r.is_array()) std::reverse(r.begin(), r.end());
      return {r};
    }
    if (f == "list") {
      if (x.v.is_array()) return x;
      json r = json::array();
      if (x.v.is_string())
        for (char c : x.v.get<std::string>()) r.push_back(std::string(1, c));
      if (x.v.is_object())
        for (const auto& [k, v] : x.v.items()) r.push_back(k);
      return {r};
    }
    if (f == "items") {
      json r = json::array();
      if (x.v.is_object())
        for (const auto& [k, v] : x.v.items()) r.push_back(json::array({k, v}));
      return {r};
    }
    if (f == "tojson") return {ToJson(x.v)};
    if (f == "string") return {Str(x)};
    if (f == "int") {
      if (x.v.is_number()) return {json(static_cast<int64_t>(x.v.get<double>()))};
      if (x.v.is_string()) try {
          return {json(std::stoll(x.v.get<std::string>()))};
        } catch (const std::exception&) {
        }
      return {json(0)};
    }
    if (f == "float") return {json(x.v.is_number() ? x.v.get<double>() : 0.0)};
    if (f == "replace") {
      std::string s = S(x, "replace");
      const std::string from = S(arg(0), "replace"), to = S(arg(1), "replace");
      if (from.empty()) return {s};
      std::string r;
      size_t k = 0;
      for (size_t p; (p = s.find(from, k)) != std::string::npos; k = p + from.size()) r += s.substr(k, p - k) + to;
      return {r + s.substr(k)};
    }
    if (f == "selectattr" || f == "rejectattr") {
      json r = json::array();
      const std::string attr = S(arg(0), f.c_str());
      for (const json& item : x.v.is_array() ? x.v : json::array()) {
        const Value a = Attr({item}, attr);
        bool ok;
        if (args.size() >= 2) {
          const std::string test = S(arg(1), f.c_str());
          if (test == "equalto" || test == "eq" || test == "==") ok = !a.undefined && a.v == arg(2).v;
          else if (test == "defined") ok = !a.undefined;
          else if (test == "undefined") ok = a.undefined;
          else if (test == "none") ok = !a.undefined && a.v.is_null();
          else Raise(fmt::format("{}'s test '{}' is not supported", f, test));
        } else {
          ok = Truthy(a);
        }
        if (ok == (f == "selectattr")) r.push_back(item);
      }
      return {r};
    }
    Raise(fmt::format("the filter '{}' is not supported", f));
  }

  bool Test(const std::string& t, const Value& x, const std::vector<Value>& args) {
    if (t == "defined") return !x.undefined;
    if (t == "undefined") return x.undefined;
    if (t == "none") return !x.undefined && x.v.is_null();
    if (t == "string") return x.v.is_string();
    if (t == "number") return x.v.is_number() && !x.v.is_boolean();
    if (t == "integer") return x.v.is_number_integer() && !x.v.is_boolean();
    if (t == "boolean") return x.v.is_boolean();
    if (t == "true") return x.v.is_boolean() && x.v.get<bool>();
    if (t == "false") return x.v.is_boolean() && !x.v.get<bool>();
    if (t == "mapping") return x.v.is_object();
    if (t == "sequence" || t == "iterable") return x.v.is_array() || x.v.is_string() || (t == "iterable" && x.v.is_object());
    if (t == "even" || t == "odd") return x.v.is_number_integer() && (x.v.get<int64_t>() % 2 == 0) == (t == "even");
    if (t == "equalto" || t == "sameas" || t == "eq") return !args.empty() && x.v == args[0].v;
    Raise(fmt::format("the test '{}' is not supported", t));
  }

  static bool Less(const json& a, const json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() < b.get<double>();
    if (a.is_string() && b.is_string()) return a.get<std::string>() < b.get<std::string>();
    return false;
  }

  Value Binary(const std::string& op, const Expr& e) {
    if (op == "and") {
      Value a = Eval(*e.args[0]);
      return Truthy(a) ? Eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = Eval(*e.args[0]);
      return Truthy(a) ? a : Eval(*e.args[1]);
    }
    const Value a = Eval(*e.args[0]), b = Eval(*e.args[1]);
    if (op == "==") return {json(a.undefined == b.undefined && (a.undefined || Equal(a.v, b.v)))};
    if (op == "!=") return {json(!(a.undefined == b.undefined && (a.undefined || Equal(a.v, b.v))))};
    if (op == "<") return {json(Less(a.v, b.v))};
    if (op == ">") return {json(Less(b.v, a.v))};
    if (op == "<=") return {json(!Less(b.v, a.v))};
    if (op == ">=") return {json(!Less(a.v, b.v))};
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.v.is_string() && a.v.is_string()) found = b.v.get<std::string>().find(a.v.get<std::string>()) != std::string::npos;
      if (b.v.is_array()) found = std::any_of(b.v.begin(), b.v.end(), [&](const json& x) { return Equal(x, a.v); });
      if (b.v.is_object() && a.v.is_string()) found = b.v.contains(a.v.get<std::string>());
      return {json(found == (op == "in"))};
    }
    if (op == "~") return {Str(a) + Str(b)};
    if (op == "+") {
      if (a.v.is_string() && b.v.is_string()) return {a.v.get<std::string>() + b.v.get<std::string>()};
      if (a.v.is_array() && b.v.is_array()) {
        json r = a.v;
        r.insert(r.end(), b.v.begin(), b.v.end());
        return {r};
      }
    }
    if (a.v.is_number() && b.v.is_number() && !a.v.is_boolean() && !b.v.is_boolean()) {
      const bool ints = a.v.is_number_integer() && b.v.is_number_integer();
      if (ints && op != "/") {
        const int64_t x = a.v.get<int64_t>(), y = b.v.get<int64_t>();
        if ((op == "%" || op == "//") && y == 0) Raise("division by zero");
        if (op == "+") return {json(x + y)};
        if (op == "-") return {json(x - y)};
        if (op == "*") return {json(x * y)};
        const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));  // Python's floor division
        if (op == "//") return {json(q)};
        if (op == "%") return {json(x - q * y)};
      }
      const double x = a.v.get<double>(), y = b.v.get<double>();
      if (op == "+") return {json(x + y)};
      if (op == "-") return {json(x - y)};
      if (op == "*") return {json(x * y)};
      if (op == "/") return {json(x / y)};
      if (op == "//") return {json(std::floor(x / y))};
      if (op == "%") return {json(x - std::floor(x / y) * y)};
    }
    if (op == "*" && a.v.is_string() && b.v.is_number_integer()) {
      std::string r;
      for (int64_t k = 0; k < b.v.get<int64_t>(); ++k) r += a.v.get<std::string>();
      return {r};
    }
    Raise(fmt::format("cannot apply '{}' to {} and {}", op, a.undefined ? "undefined" : Repr(a.v),
                      b.undefined ? "undefined" : Repr(b.v)));
  }

  static bool Equal(const json& a, const json& b) {
    if (a.is_number() && b.is_number() && !a.is_boolean() && !b.is_boolean()) return a.get<double>() == b.get<double>();
    return a == b;
  }

 public:
  Value Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral:
        return {e.literal};
      case Expr::kName: {
        Value* v = Lookup(e.name);
        return v ? *v : Value::Undefined();
      }
      case Expr::kList: {
        json r = json::array();
        for (const auto& a : e.args) r.push_back(Eval(*a).v);
        return {r};
      }
      case Expr::kDict: {
        json r = json::object();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) r[S(Eval(*e.args[k]), "a dict key")] = Eval(*e.args[k + 1]).v;
        return {r};
      }
      case Expr::kAttr:
        return Attr(Eval(*e.args[0]), e.name);
      case Expr::kIndex:
        return Index(Eval(*e.args[0]), Eval(*e.args[1]));
      case Expr::kSlice: {
        const Value x = Eval(*e.args[0]);
        const bool str = x.v.is_string();
        if (!str && !x.v.is_array()) Raise("only lists and strings can be sliced");
        const auto n = static_cast<int64_t>(str ? x.v.get<std::string>().size() : x.v.size());
        auto bound = [&](const ExprPtr& p, int64_t dflt) {
          if (!p) return dflt;
          int64_t i = Eval(*p).v.get<int64_t>();
          if (i < 0) i += n;
          return std::clamp<int64_t>(i, 0, n);
        };
        const int64_t lo = bound(e.args[1], 0), hi = bound(e.args[2], n);
        if (str) return {x.v.get<std::string>().substr(static_cast<size_t>(lo), static_cast<size_t>(std::max<int64_t>(0, hi - lo)))};
        json r = json::array();
        for (int64_t k = lo; k < hi; ++k) r.push_back(x.v[static_cast<size_t>(k)]);
        return {r};
      }
      case Expr::kCall:
        return Call(e);
      case Expr::kFilter: {
        std::vector<Value> args;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(Eval(*e.args[k]));
        for (const auto& [k, v] : e.kwargs) args.push_back(Eval(*v));
        return Filter(e.name, Eval(*e.args[0]), args);
      }
      case Expr::kTest: {
        std::vector<Value> args;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(Eval(*e.args[k]));
        return {json(Test(e.name, Eval(*e.args[0]), args) != e.negate)};
      }
      case Expr::kUnary: {
        const Value x = Eval(*e.args[0]);
        if (e.name == "not") return {json(!Truthy(x))};
        if (x.v.is_number_integer()) return {json(-x.v.get<int64_t>())};
        if (x.v.is_number()) return {json(-x.v.get<double>())};
        Raise(fmt::format("cannot negate {}", Repr(x.v)));
      }
      case Expr::kBinary:
        return Binary(e.name, e);
      case Expr::kCond:
        if (Truthy(Eval(*e.args[0]))) return Eval(*e.args[1]);
        return e.negate ? Value::Undefined() : Eval(*e.args[2]);
    }
    return Value::Undefined();
  }

 private:
  std::string where_;
  int line_ = 0;
  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

ChatTemplate ChatTemplate::Parse(const std::string& source, const std::string& where) {
  ChatTemplate t;
  // jinja2 drops one newline at the very end of a template (keep_trailing_newline off).
  std::string src = source;
  if (!src.empty() && src.back() == '\n') src.pop_back();
  t.root_ = jinja::ParseTemplate(src, where);
  t.where_ = where;
  return t;
}

std::string ChatTemplate::Render(const json& context) const {
  std::string out;
  Renderer(where_, context).Run(*root_, out);
  return out;
}

}  // namespace axle::text
