// The tokenizer of the .axir text format (see docs/ir.md, "Text format").
//
// Whitespace (space, tab, CR, LF) and `//` comments to the end of the line separate tokens.
// Lines are counted at LF; columns are 1-based byte columns. A leading UTF-8 byte order mark is
// skipped. A malformed token (an unexpected
// byte, a bad number, an unterminated string) throws axle::Error at the offending byte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"

namespace axle::ir {

enum class TokenKind {
  kEof,
  kIdent,        // [A-Za-z_][A-Za-z0-9_.]*: keywords, ops, dtypes, attribute and axis names
  kGlobalName,   // @name (text holds the name without '@')
  kLocalName,    // %name (text holds the name without '%')
  kNumber,       // -?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)? or -inf
  kString,       // "..." (text holds the decoded bytes)
  kLBrace,
  kRBrace,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kComma,
  kEqual,
  kColon,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // see TokenKind; empty for punctuation and end of input
  int line = 1;
  int col = 1;
};

// True for the bytes of @ and % names: [A-Za-z0-9_.].
bool IsNameChar(char c);
// True when `s` is a non-empty run of name bytes, printable after '@' or '%' as is.
bool IsValidName(std::string_view s);
// True when `s` lexes as one identifier token: [A-Za-z_][A-Za-z0-9_.]*.
bool IsIdentifier(std::string_view s);
// "'{'", "identifier 'foo'", "value %x", "end of input": how errors name a token.
std::string DescribeToken(const Token& t);

// Scans the text on demand. The text must outlive the lexer.
class Lexer {
 public:
  Lexer(std::string_view text, std::string_view filename);

  // The next token; kEof at the end of the text, and again on every later call.
  Token Next();
  // A location in this file.
  SourceLoc Loc(int line, int col) const { return SourceLoc{filename_, line, col}; }

 private:
  char Peek(size_t ahead = 0) const;
  int Col() const { return static_cast<int>(pos_ - line_start_) + 1; }
  void SkipSpaceAndComments();
  Token LexName(TokenKind kind);
  Token LexNumber();
  Token LexString();
  char LexEscape();
  [[noreturn]] void FailHere(const std::string& message) const;

  std::string_view text_;
  std::string filename_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
};

}  // namespace axle::ir
