#include "ir/lexer.h"

#include <climits>

namespace axle::ir {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// 'c' for a printable byte, '\xHH' otherwise: safe to put in a message.
std::string QuoteByte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("'\\x{:02x}'", u);
}

}  // namespace

bool IsNameChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '_' || c == '.'; }

bool IsValidName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsNameChar(c)) return false;
  return true;
}

bool IsIdentifier(std::string_view s) {
  return !s.empty() && (IsAlpha(s[0]) || s[0] == '_') && IsValidName(s);
}

std::string DescribeToken(const Token& t) {
  switch (t.kind) {
    case TokenKind::kEof: return "end of input";
    case TokenKind::kIdent: return fmt::format("'{}'", t.text);
    case TokenKind::kGlobalName: return fmt::format("'@{}'", t.text);
    case TokenKind::kLocalName: return fmt::format("'%{}'", t.text);
    case TokenKind::kNumber: return fmt::format("number {}", t.text);
    case TokenKind::kString: return "a string";
    case TokenKind::kLBrace: return "'{'";
    case TokenKind::kRBrace: return "'}'";
    case TokenKind::kLParen: return "'('";
    case TokenKind::kRParen: return "')'";
    case TokenKind::kLBracket: return "'['";
    case TokenKind::kRBracket: return "']'";
    case TokenKind::kComma: return "','";
    case TokenKind::kEqual: return "'='";
    case TokenKind::kColon: return "':'";
  }
  return "a token";
}

Lexer::Lexer(std::string_view text, std::string_view filename)
    : text_(text), filename_(filename) {
  if (text_.substr(0, 3) == "\xef\xbb\xbf") pos_ = 3;  // a UTF-8 byte order mark
}

char Lexer::Peek(size_t ahead) const {
  return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
}

void Lexer::FailHere(const std::string& message) const {
  throw Error(Loc(line_, Col()), message);
}

void Lexer::SkipSpaceAndComments() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') {
      ++pos_;
      line_start_ = pos_;
      if (line_ < INT_MAX) ++line_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '/' && Peek(1) == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      return;
    }
  }
}

Token Lexer::Next() {
  SkipSpaceAndComments();
  Token tok;
  tok.line = line_;
  tok.col = Col();
  if (pos_ >= text_.size()) return tok;
  const char c = text_[pos_];
  auto punct = [&](TokenKind k) {
    ++pos_;
    tok.kind = k;
    return tok;
  };
  switch (c) {
    case '{': return punct(TokenKind::kLBrace);
    case '}': return punct(TokenKind::kRBrace);
    case '(': return punct(TokenKind::kLParen);
    case ')': return punct(TokenKind::kRParen);
    case '[': return punct(TokenKind::kLBracket);
    case ']': return punct(TokenKind::kRBracket);
    case ',': return punct(TokenKind::kComma);
    case '=': return punct(TokenKind::kEqual);
    case ':': return punct(TokenKind::kColon);
    case '@': return LexName(TokenKind::kGlobalName);
    case '%': return LexName(TokenKind::kLocalName);
    case '"': return LexString();
    default: break;
  }
  if (c == '-' || IsDigit(c)) return LexNumber();
  if (IsAlpha(c) || c == '_') {
    size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    tok.kind = TokenKind::kIdent;
    tok.text = std::string(text_.substr(start, pos_ - start));
    return tok;
  }
  FailHere(fmt::format("unexpected character {}", QuoteByte(c)));
}

Token Lexer::LexName(TokenKind kind) {
  Token tok{kind, "", line_, Col()};
  const char sigil = text_[pos_++];
  size_t start = pos_;
  while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
  if (pos_ == start) {
    throw Error(Loc(tok.line, tok.col),
                fmt::format("expected a name after '{}' (letters, digits, '_' or '.'), got {}",
                            sigil, pos_ < text_.size() ? QuoteByte(text_[pos_]) : "end of input"));
  }
  tok.text = std::string(text_.substr(start, pos_ - start));
  return tok;
}

Token Lexer::LexNumber() {
  Token tok{TokenKind::kNumber, "", line_, Col()};
  const size_t start = pos_;
  if (Peek() == '-') ++pos_;
  if (text_.substr(pos_, 3) == "inf" && !IsNameChar(Peek(3))) {
    pos_ += 3;
    tok.text = "-inf";
    return tok;
  }
  auto digits = [&] {
    size_t from = pos_;
    while (IsDigit(Peek())) ++pos_;
    return pos_ > from;
  };
  bool ok = digits();
  if (ok && Peek() == '.') {
    ++pos_;
    ok = digits();
  }
  if (ok && (Peek() == 'e' || Peek() == 'E')) {
    ++pos_;
    if (Peek() == '+' || Peek() == '-') ++pos_;
    ok = digits();
  }
  if (!ok || IsNameChar(Peek())) {
    while (pos_ < text_.size() && (IsNameChar(text_[pos_]) || text_[pos_] == '-')) ++pos_;
    throw Error(Loc(tok.line, tok.col),
                fmt::format("malformed number '{}'", text_.substr(start, pos_ - start)));
  }
  tok.text = std::string(text_.substr(start, pos_ - start));
  return tok;
}

Token Lexer::LexString() {
  Token tok{TokenKind::kString, "", line_, Col()};
  ++pos_;  // the opening quote
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n')
      throw Error(Loc(tok.line, tok.col), "unterminated string");
    const char c = text_[pos_];
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"') break;
    if (c == '\\') {
      tok.text.push_back(LexEscape());
      continue;
    }
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      FailHere(fmt::format("control character {} in a string; write it as \\x{:02x}", QuoteByte(c), u));
    tok.text.push_back(c);
    ++pos_;
  }
  ++pos_;  // the closing quote
  return tok;
}

// Decodes the escape at pos_ (a backslash) and moves past it.
char Lexer::LexEscape() {
  const char e = Peek(1);
  switch (e) {
    case '"': pos_ += 2; return '"';
    case '\\': pos_ += 2; return '\\';
    case 'n': pos_ += 2; return '\n';
    case 't': pos_ += 2; return '\t';
    case 'x': {
      int hi = HexValue(Peek(2));
      int lo = HexValue(Peek(3));
      if (hi < 0 || lo < 0) FailHere("escape \\x needs two hex digits");
      pos_ += 4;
      return static_cast<char>(hi * 16 + lo);
    }
    default:
      if (pos_ + 1 >= text_.size()) FailHere("unterminated string");
      FailHere(fmt::format("unknown escape '\\{}' in a string (use \\\" \\\\ \\n \\t or \\xHH)",
                           QuoteByte(e).substr(1, QuoteByte(e).size() - 2)));
  }
}

}  // namespace axle::ir
