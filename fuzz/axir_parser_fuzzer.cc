// libFuzzer target for the .axir parser and printer, and the verifier and hash behind them.
//
// Any input must parse or throw axle::Error, never crash, hang or leak (ASan/UBSan catch the
// rest). A module that parses must print to text that parses back and prints identically.
// Run it with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string first;
  try {
    auto module = axle::ir::ParseModule(text, "fuzz.axir");
    // The verifier and the hash see every parsed module: they may reject it, never crash.
    try {
      axle::ir::Verify(*module);
      (void)axle::ir::HashModule(*module);
    } catch (const axle::Error&) {
    }
    first = axle::ir::PrintModule(*module);
  } catch (const axle::Error&) {
    return 0;  // malformed input: an error is the right answer
  }
  std::string second;
  try {
    second = axle::ir::PrintModule(*axle::ir::ParseModule(first, "printed.axir"));
  } catch (const axle::Error&) {
    __builtin_trap();  // the printer wrote text the parser rejects
  }
  if (first != second) __builtin_trap();  // print(parse(print(m))) != print(m)
  return 0;
}
