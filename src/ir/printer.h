// The printer of the .axir text format (docs/ir.md, "Text format"); parser.h reads it back.
//
//   module @mlp {
//     func @main {
//       %x = parameter() {index=0} : f32[4,8]
//       %y = reduce(%x) {kind=sum, dims=[1]} : f32[4]{[data]}
//       return %y
//     }
//   }
//
// The output is canonical and re-parses: PrintModule(*ParseModule(PrintModule(m))) ==
// PrintModule(m) for every printable module, i.e. one whose types have non-negative dims with
// an int64 element count, whose shardings have one entry per dimension, whose nodes hold their
// op's attribute struct, whose constants' literals have the constant's result type and whose
// operands and results are defined earlier in their function. Names are printed as stored
// (bytes outside [A-Za-z0-9_.] become '_'); values without a name are numbered %0, %1, ...
// skipping numbers already used as names, and repeated names get a ".1", ".2", ... suffix.
#pragma once

#include <string>

#include "ir/module.h"

namespace axle::ir {

// The whole module, ending with a newline.
std::string PrintModule(const Module& m);
// One function exactly as PrintModule prints it inside its module: `  func @f {` ... `  }`,
// indented by 2, ending with a newline.
std::string PrintFunction(const Function& f);
// One node on one line, without indentation or newline, for error messages. Operands are named
// as PrintFunction would name them within the node's function.
std::string PrintNode(const Node& n);

}  // namespace axle::ir
