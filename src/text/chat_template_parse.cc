// Chat templates, parsing (chat_template.h): a template lexer with jinja2's whitespace rules
// (trim_blocks, lstrip_blocks, "-" markers) and a recursive-descent parser to the tree of
// chat_template_internal.h.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "text/chat_template_internal.h"

namespace axle::text::jinja {
namespace {

// ---- Expressions ---------------------------------------------------------------------------------

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


// ---- Statements ------------------------------------------------------------------------------------

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

}  // namespace

std::shared_ptr<const ChatTemplate::Node> ParseTemplate(const std::string& source, const std::string& where) {
  return Parser(where).Parse(source);
}

}  // namespace axle::text::jinja
