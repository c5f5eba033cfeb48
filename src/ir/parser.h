// The parser of the .axir text format (docs/ir.md, "Text format"); printer.h writes it.
//
// The parser checks syntax, names and the text-level rules only: value names are defined once
// and before use, every result has a type, attributes name fields of the op's struct with values
// of the right kind, a constant's value fits its type. It does not check operand counts, types or
// attribute values against the op's rules: run the verifier (verifier.h) on the result for that.
#pragma once

#include <memory>
#include <string_view>

#include "ir/module.h"

namespace axle::ir {

// Parses one module. Every value keeps its text name (Value::name, without '%'); each node's
// loc is the position of its first result name (of its op name when it has no results) and each
// function's loc is the position of its `return`, all in `filename`.
// Throws axle::Error whose what() is "FILENAME:LINE:COL: error: MESSAGE" at the first error.
// Any input is safe: malformed, truncated or hostile text gives an Error, never a crash or an
// unbounded allocation (constants are capped at 2^24 elements each, 512 MiB per module).
std::unique_ptr<Module> ParseModule(std::string_view text, std::string_view filename = "<string>");

}  // namespace axle::ir
