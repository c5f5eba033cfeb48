// The parsed form of a chat template, shared by its parser (chat_template_parse.cc) and its
// evaluator (chat_template.cc); not public API.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "text/chat_template.h"

namespace axle::text {
namespace jinja {

// Insertion-ordered objects: a template that prints a dict (tojson, repr) prints its keys in the
// order they were written, as Python does.
using json = nlohmann::ordered_json;

// An expression: a literal, a name, or an operation on sub-expressions.
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

}  // namespace jinja

// A statement tree: text, {{ }} outputs, if / for / set.
struct ChatTemplate::Node {
  enum Kind { kBlock, kText, kOutput, kIf, kFor, kSet };
  Kind kind = kBlock;
  int line = 0;
  std::string text;                          // kText
  jinja::ExprPtr expr;                              // kOutput; kFor: the iterable; kSet: the value
  std::vector<std::pair<jinja::ExprPtr, std::shared_ptr<Node>>> branches;  // kIf: (condition or null, body)
  std::vector<std::string> targets;          // kFor: loop variables; kSet: name [, attribute]
  jinja::ExprPtr filter;                            // kFor: "if" condition
  std::vector<std::shared_ptr<Node>> body;   // kBlock; kFor: [body, else body]
};

namespace jinja {

// Parses a template (its trailing newline already dropped) into its tree; errors name `where`
// and the line.
std::shared_ptr<const ChatTemplate::Node> ParseTemplate(const std::string& source, const std::string& where);

}  // namespace jinja
}  // namespace axle::text
