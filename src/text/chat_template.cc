// A Jinja subset for chat templates (chat_template.h): a template lexer with jinja2's
// whitespace rules (trim_blocks, lstrip_blocks, "-" markers), a recursive-descent parser to a
// tree, and an evaluator over JSON values.
#include "text/chat_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "core/error.h"

namespace axle::text {

// Insertion-ordered objects: a template that prints a dict (tojson, repr) prints its keys in the
// order they were written, as Python does.
using json = nlohmann::ordered_json;

namespace {

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

// ---- Expressions ---------------------------------------------------------------------------------

struct Expr {
  enum Kind { kLiteral, kName, kList, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kCond };
  Kind kind;
  json literal;
  std::string name;  // kName, kAttr, kFilter, kTest, kUnary/kBinary operator, kCall method name
  std::vector<std::shared_ptr<Expr>> args;  // operands; kCall: [callee object or null, args...]
  std::vector<std::pair<std::string, std::shared_ptr<Expr>>> kwargs;
  bool negate = false;  // kTest: "is not"
};
using ExprPtr = std::shared_ptr<Expr>;

ExprPtr Make(Expr::Kind k) {
  auto e = std::make_shared<Expr>();
  e->kind = k;
  return e;
}

struct Tok {
  enum Kind { kName, kNumber, kString, kOp, kEnd } kind;
  std::string text;
  json value;
};

class ExprParser {
 public:
  ExprParser(const std::string& src, std::function<void(const std::string&)> fail) : fail_(std::move(fail)) {
    Lex(src);
  }

  ExprPtr ParseExpression() { return Conditional(); }
  bool AtEnd() const { return toks_[pos_].kind == Tok::kEnd; }
  const Tok& Peek() const { return toks_[pos_]; }
  bool IsName(const char* n) const { return Peek().kind == Tok::kName && Peek().text == n; }
  bool IsOp(const char* o) const { return Peek().kind == Tok::kOp && Peek().text == o; }
  void Expect(const char* o) {
    if (!IsOp(o)) fail_(fmt::format("expected '{}' but found '{}'", o, Peek().text));
    ++pos_;
  }
  std::string Name() {
    if (Peek().kind != Tok::kName) fail_(fmt::format("expected a name but found '{}'", Peek().text));
    return toks_[pos_++].text;
  }

 private:
  void Lex(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (isspace(static_cast<unsigned char>(c))) {
        ++i;
      } else if (isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < s.size() && (isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
        toks_.push_back({Tok::kName, s.substr(i, j - i), {}});
        i = j;
      } else if (isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        bool real = false;
        while (j < s.size() && (isdigit(static_cast<unsigned char>(s[j])) || (s[j] == '.' && !real && j + 1 < s.size() &&
                                                                              isdigit(static_cast<unsigned char>(s[j + 1]))))) {
          real = real || s[j] == '.';
          ++j;
        }
        const std::string t = s.substr(i, j - i);
        toks_.push_back({Tok::kNumber, t, real ? json(std::stod(t)) : json(std::stoll(t))});
        i = j;
      } else if (c == '\'' || c == '"') {
        std::string out;
        size_t j = i + 1;
        for (; j < s.size() && s[j] != c; ++j) {
          if (s[j] == '\\' && j + 1 < s.size()) {
            const char e = s[++j];
            out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
          } else {
            out += s[j];
          }
        }
        if (j >= s.size()) fail_("an unterminated string");
        toks_.push_back({Tok::kString, out, json(out)});
        i = j + 1;
      } else {
        static const char* ops[] = {"//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(",
                                    ")", "[", "]", "{", "}", ".", ",", ":", "|", "="};
        bool found = false;
        for (const char* op : ops) {
          const size_t n = std::strlen(op);
          if (s.compare(i, n, op) == 0) {
            toks_.push_back({Tok::kOp, op, {}});
            i += n;
            found = true;
            break;
          }
        }
        if (!found) fail_(fmt::format("unexpected character '{}'", c));
      }
    }
    toks_.push_back({Tok::kEnd, "<end>", {}});
  }

  ExprPtr Conditional() {
    ExprPtr e = Or();
    if (IsName("if")) {
      ++pos_;
      auto c = Make(Expr::kCond);
      ExprPtr cond = Or();
      ExprPtr other = Make(Expr::kLiteral);
      other->literal = json();
      bool has_else = false;
      if (IsName("else")) {
        ++pos_;
        other = Conditional();
        has_else = true;
      }
      c->args = {cond, e, other};
      c->negate = !has_else;  // no else: undefined
      return c;
    }
    return e;
  }
  ExprPtr Binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = Make(Expr::kBinary);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprPtr Or() {
    ExprPtr e = And();
    while (IsName("or")) {
      ++pos_;
      e = Binary("or", e, And());
    }
    return e;
  }
  ExprPtr And() {
    ExprPtr e = Not();
    while (IsName("and")) {
      ++pos_;
      e = Binary("and", e, Not());
    }
    return e;
  }
  ExprPtr Not() {
    if (IsName("not")) {
      ++pos_;
      auto e = Make(Expr::kUnary);
      e->name = "not";
      e->args = {Not()};
      return e;
    }
    return Compare();
  }
  ExprPtr Compare() {
    ExprPtr e = Additive();
    for (;;) {
      if (Peek().kind == Tok::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        const std::string op = toks_[pos_++].text;
        e = Binary(op, e, Additive());
      } else if (IsName("in")) {
        ++pos_;
        e = Binary("in", e, Additive());
      } else if (IsName("not") && toks_[pos_ + 1].kind == Tok::kName && toks_[pos_ + 1].text == "in") {
        pos_ += 2;
        e = Binary("not in", e, Additive());
      } else if (IsName("is")) {
        ++pos_;
        auto t = Make(Expr::kTest);
        if (IsName("not")) {
          ++pos_;
          t->negate = true;
        }
        t->name = Name();
        t->args = {e};
        if (IsOp("(")) {
          ++pos_;
          while (!IsOp(")")) {
            t->args.push_back(ParseExpression());
            if (IsOp(",")) ++pos_;
          }
          ++pos_;
        } else if (t->name == "equalto" || t->name == "sameas") {
          t->args.push_back(Additive());
        }
        e = t;
      } else {
        return e;
      }
    }
  }
  ExprPtr Additive() {
    ExprPtr e = Multiplicative();
    while (IsOp("+") || IsOp("-") || IsOp("~")) {
      const std::string op = toks_[pos_++].text;
      e = Binary(op, e, Multiplicative());
    }
    return e;
  }
  ExprPtr Multiplicative() {
    ExprPtr e = Unary();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = toks_[pos_++].text;
      e = Binary(op, e, Unary());
    }
    return e;
  }
  ExprPtr Unary() {
    if (IsOp("-")) {
      ++pos_;
      auto e = Make(Expr::kUnary);
      e->name = "-";
      e->args = {Unary()};
      return e;
    }
    return Postfix(Primary());
  }
  void Args(Expr& call) {
    Expect("(");
    while (!IsOp(")")) {
      if (Peek().kind == Tok::kName && toks_[pos_ + 1].kind == Tok::kOp && toks_[pos_ + 1].text == "=") {
        const std::string key = Name();
        ++pos_;
        call.kwargs.emplace_back(key, ParseExpression());
      } else {
        call.args.push_back(ParseExpression());
      }
      if (!IsOp(")")) Expect(",");
    }
    ++pos_;
  }
  ExprPtr Postfix(ExprPtr e) {
    for (;;) {
      if (IsOp(".")) {
        ++pos_;
        auto a = Make(Expr::kAttr);
        a->name = Name();
        a->args = {e};
        e = a;
      } else if (IsOp("[")) {
        ++pos_;
        ExprPtr lo, hi;
        if (!IsOp(":")) lo = ParseExpression();
        if (IsOp(":")) {
          ++pos_;
          if (!IsOp("]")) hi = ParseExpression();
          Expect("]");
          auto s = Make(Expr::kSlice);
          s->args = {e, lo, hi};
          e = s;
        } else {
          Expect("]");
          auto x = Make(Expr::kIndex);
          x->args = {e, lo};
          e = x;
        }
      } else if (IsOp("(")) {
        auto c = Make(Expr::kCall);
        c->args = {e};
        Args(*c);
        e = c;
      } else if (IsOp("|")) {
        ++pos_;
        auto f = Make(Expr::kFilter);
        f->name = Name();
        f->args = {e};
        if (IsOp("(")) Args(*f);
        e = f;
      } else {
        return e;
      }
    }
  }
  ExprPtr Primary() {
    const Tok t = Peek();
    if (t.kind == Tok::kNumber || t.kind == Tok::kString) {
      ++pos_;
      auto e = Make(Expr::kLiteral);
      e->literal = t.value;
      // Adjacent string literals concatenate, as in Python.
      while (t.kind == Tok::kString && Peek().kind == Tok::kString) e->literal = e->literal.get<std::string>() + toks_[pos_++].text;
      return e;
    }
    if (t.kind == Tok::kName) {
      ++pos_;
      auto e = Make(Expr::kLiteral);
      if (t.text == "true" || t.text == "True") return e->literal = true, e;
      if (t.text == "false" || t.text == "False") return e->literal = false, e;
      if (t.text == "none" || t.text == "None") return e->literal = nullptr, e;
      e->kind = Expr::kName;
      e->name = t.text;
      return e;
    }
    if (IsOp("(")) {
      ++pos_;
      ExprPtr e = ParseExpression();
      Expect(")");
      return e;
    }
    if (IsOp("[")) {
      ++pos_;
      auto e = Make(Expr::kList);
      while (!IsOp("]")) {
        e->args.push_back(ParseExpression());
        if (!IsOp("]")) Expect(",");
      }
      ++pos_;
      return e;
    }
    if (IsOp("{")) {
      ++pos_;
      auto e = Make(Expr::kDict);
      while (!IsOp("}")) {
        e->args.push_back(ParseExpression());
        Expect(":");
        e->args.push_back(ParseExpression());
        if (!IsOp("}")) Expect(",");
      }
      ++pos_;
      return e;
    }
    fail_(fmt::format("unexpected '{}'", t.text));
    return nullptr;
  }

  std::vector<Tok> toks_;
  size_t pos_ = 0;
  std::function<void(const std::string&)> fail_;
};

}  // namespace

// ---- Statements ------------------------------------------------------------------------------------

struct ChatTemplate::Node {
  enum Kind { kBlock, kText, kOutput, kIf, kFor, kSet };
  Kind kind = kBlock;
  int line = 0;
  std::string text;                          // kText
  ExprPtr expr;                              // kOutput; kFor: the iterable; kSet: the value
  std::vector<std::pair<ExprPtr, std::shared_ptr<Node>>> branches;  // kIf: (condition or null, body)
  std::vector<std::string> targets;          // kFor: loop variables; kSet: name [, attribute]
  ExprPtr filter;                            // kFor: "if" condition
  std::vector<std::shared_ptr<Node>> body;   // kBlock; kFor: [body, else body]
};

namespace {

using Node = ChatTemplate::Node;
using NodePtr = std::shared_ptr<Node>;

struct Piece {
  enum Kind { kText, kExpr, kStmt } kind;
  std::string text;
  int line;
};

// Splits the template into text, {{ }} and {% %} pieces with jinja2's whitespace handling as
// transformers configures it (trim_blocks and lstrip_blocks on) and the "-" markers.
std::vector<Piece> Split(const std::string& s, const std::function<void(int, const std::string&)>& fail) {
  std::vector<Piece> out;
  size_t i = 0;
  int line = 1;
  bool strip_next = false, trim_newline = false;
  auto line_at = [&](size_t upto) {
    for (size_t k = i; k < upto; ++k) line += s[k] == '\n';
  };
  while (i <= s.size()) {
    size_t open = s.find('{', i);
    while (open != std::string::npos && open + 1 < s.size() && s[open + 1] != '{' && s[open + 1] != '%' &&
           s[open + 1] != '#')
      open = s.find('{', open + 1);
    if (open + 1 >= s.size()) open = std::string::npos;
    std::string text = s.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (strip_next) {
      text.erase(0, text.find_first_not_of(" \t\r\n") == std::string::npos ? text.size() : text.find_first_not_of(" \t\r\n"));
    } else if (trim_newline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
    }
    strip_next = trim_newline = false;
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Piece::kText, text, line});
      break;
    }
    const char type = s[open + 1];
    const std::string close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    const size_t end = s.find(close, open + 2);
    if (end == std::string::npos) fail(line, fmt::format("'{}{}' is never closed", '{', type));
    std::string inner = s.substr(open + 2, end - open - 2);
    const bool minus_left = !inner.empty() && inner[0] == '-', plus_left = !inner.empty() && inner[0] == '+';
    const bool minus_right = !inner.empty() && inner.back() == '-';
    if (minus_left || plus_left) inner.erase(0, 1);
    if (minus_right) inner.pop_back();
    if (minus_left) {
      text.erase(text.find_last_not_of(" \t\r\n") == std::string::npos ? 0 : text.find_last_not_of(" \t\r\n") + 1);
    } else if (type != '{' && !plus_left) {
      // lstrip_blocks: spaces and tabs between a line's start and a block tag (or comment) go.
      size_t n = 0;
      while (n < text.size() && (text[text.size() - 1 - n] == ' ' || text[text.size() - 1 - n] == '\t')) ++n;
      if (open == n || s[open - n - 1] == '\n') text.erase(text.size() - n);
    }
    if (!text.empty()) out.push_back({Piece::kText, text, line});
    line_at(open);
    i = open;
    const int tag_line = line;
    line_at(end + 2);
    i = end + 2;
    if (type == '{') out.push_back({Piece::kExpr, inner, tag_line});
    if (type == '%') out.push_back({Piece::kStmt, inner, tag_line});
    strip_next = minus_right;
    trim_newline = type != '{';  // trim_blocks: the newline after a block tag (or comment) goes
  }
  return out;
}

class Parser {
 public:
  Parser(const std::string& where) : where_(where) {}

  NodePtr Parse(const std::string& source) {
    pieces_ = Split(source, [&](int line, const std::string& m) { Fail("{}: line {}: {}", where_, line, m); });
    auto root = std::make_shared<Node>();
    const std::string end = Block(*root, {});
    if (!end.empty()) FailAt(line_, fmt::format("'{}' without its opening statement", end));
    return root;
  }

 private:
  [[noreturn]] void FailAt(int line, const std::string& m) const { Fail("{}: line {}: {}", where_, line, m); }

  ExprPtr ParseExpr(const std::string& src, int line) {
    ExprParser p(src, [&](const std::string& m) { FailAt(line, fmt::format("{} in '{}'", m, src)); });
    ExprPtr e = p.ParseExpression();
    if (!p.AtEnd()) FailAt(line, fmt::format("unexpected '{}' in '{}'", p.Peek().text, src));
    return e;
  }

  // Reads nodes into `block` until a statement whose keyword is in `ends`; returns that
  // statement's keyword ("" at the end of the template) and leaves its text in stmt_.
  std::string Block(Node& block, const std::vector<std::string>& ends) {
    while (next_ < pieces_.size()) {
      const Piece& p = pieces_[next_++];
      line_ = p.line;
      if (p.kind == Piece::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kText;
        n->text = p.text;
        block.body.push_back(n);
        continue;
      }
      if (p.kind == Piece::kExpr) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kOutput;
        n->line = p.line;
        n->expr = ParseExpr(p.text, p.line);
        block.body.push_back(n);
        continue;
      }
      // A statement: its keyword first.
      const std::string src = p.text;
      size_t b = src.find_first_not_of(" \t\r\n");
      if (b == std::string::npos) FailAt(p.line, "an empty {% %} statement");
      size_t e = b;
      while (e < src.size() && (isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
      const std::string keyword = src.substr(b, e - b), rest = src.substr(e);
      if (std::find(ends.begin(), ends.end(), keyword) != ends.end()) {
        stmt_ = rest;
        return keyword;
      }
      if (keyword == "if") {
        auto n = std::make_shared<Node>();
        n->kind = Node::kIf;
        n->line = p.line;
        ExprPtr cond = ParseExpr(rest, p.line);
        for (;;) {
          auto body = std::make_shared<Node>();
          const std::string end = Block(*body, {"elif", "else", "endif"});
          if (end.empty()) FailAt(p.line, "'if' without 'endif'");
          n->branches.emplace_back(cond, body);
          if (end == "endif") break;
          if (end == "else") {
            auto other = std::make_shared<Node>();
            if (Block(*other, {"endif"}) != "endif") FailAt(p.line, "'else' without 'endif'");
            n->branches.emplace_back(nullptr, other);
            break;
          }
          cond = ParseExpr(stmt_, line_);
        }
        block.body.push_back(n);
      } else if (keyword == "for") {
        auto n = std::make_shared<Node>();
        n->kind = Node::kFor;
        n->line = p.line;
        const size_t in = rest.find(" in ");
        if (in == std::string::npos) FailAt(p.line, fmt::format("'for{}' is not 'for x in ...'", rest));
        std::string vars = rest.substr(0, in);
        for (size_t k = 0; k <= vars.size();) {
          size_t c = vars.find(',', k);
          if (c == std::string::npos) c = vars.size();
          std::string v = vars.substr(k, c - k);
          v.erase(0, v.find_first_not_of(" \t"));
          v.erase(v.find_last_not_of(" \t") + 1);
          if (!v.empty()) n->targets.push_back(v);
          k = c + 1;
        }
        std::string iter = rest.substr(in + 4);
        // "for x in xs if cond": the filter is the last top-level " if " (xs itself has none).
        if (const size_t f = iter.rfind(" if "); f != std::string::npos && iter.find(" else ", f) == std::string::npos) {
          n->filter = ParseExpr(iter.substr(f + 4), p.line);
          iter = iter.substr(0, f);
        }
        n->expr = ParseExpr(iter, p.line);
        auto body = std::make_shared<Node>(), other = std::make_shared<Node>();
        const std::string end = Block(*body, {"else", "endfor"});
        if (end.empty()) FailAt(p.line, "'for' without 'endfor'");
        if (end == "else" && Block(*other, {"endfor"}) != "endfor") FailAt(p.line, "'for' without 'endfor'");
        n->body = {body, other};
        block.body.push_back(n);
      } else if (keyword == "set") {
        auto n = std::make_shared<Node>();
        n->kind = Node::kSet;
        n->line = p.line;
        const size_t eq = rest.find('=');
        if (eq == std::string::npos) FailAt(p.line, "block assignments ({% set x %}...{% endset %}) are not supported");
        std::string target = rest.substr(0, eq);
        target.erase(0, target.find_first_not_of(" \t"));
        target.erase(target.find_last_not_of(" \t") + 1);
        const size_t dot = target.find('.');
        n->targets = {target.substr(0, dot)};
        if (dot != std::string::npos) n->targets.push_back(target.substr(dot + 1));
        n->expr = ParseExpr(rest.substr(eq + 1), p.line);
        block.body.push_back(n);
      } else if (keyword == "generation" || keyword == "endgeneration") {
        // transformers' assistant-mask markers: no output of their own.
      } else {
        FailAt(p.line, fmt::format("the statement '{}' is not supported by Axle's chat templates", keyword));
      }
    }
    return "";
  }

  std::string where_;
  std::vector<Piece> pieces_;
  size_t next_ = 0;
  int line_ = 0;
  std::string stmt_;
};

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
  t.root_ = Parser(where).Parse(src);
  t.where_ = where;
  return t;
}

std::string ChatTemplate::Render(const json& context) const {
  std::string out;
  Renderer(where_, context).Run(*root_, out);
  return out;
}

}  // namespace axle::text
