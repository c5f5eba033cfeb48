// A small FileCheck: checks a text (usually printed IR) against `// CHECK:` lines, like LLVM's.
//
// Pass tests in Axle are IR text in, CHECK lines out (see docs/test_hlo_passes.md in XLA for the
// idea). A test feeds the output of a pass and the text of its .axir file to FileCheck():
//
//   // CHECK-LABEL: func @main
//   // CHECK:       [[SUM:%[0-9]+]] = add(%x, %y)
//   // CHECK-NOT:   mul
//   // CHECK-NEXT:  return [[SUM]]
//
// Directives (PREFIX is "CHECK" by default; anything before it on the line, such as `//`, is
// ignored; the prefix must not be preceded by a letter, digit, '_' or '-'):
//   PREFIX:        the pattern matches at or after the end of the previous match.
//   PREFIX-NEXT:   ... and on the line right after the line of the previous match.
//   PREFIX-SAME:   ... and on the same line as the previous match (after it).
//   PREFIX-NOT:    the pattern must not occur between the previous match and the next positive
//                  match (or the end of the block when no positive directive follows).
//   PREFIX-LABEL:  like PREFIX, but labels are found first and split the input into blocks: the
//                  directives between two labels only match between those labels' matches.
// Patterns (the text after the colon, leading and trailing whitespace trimmed):
//   literal text     matched exactly, except that a run of whitespace matches any run of spaces
//                    and tabs;
//   {{regex}}        an ECMAScript regex (std::regex); `.` does not match a newline;
//   [[NAME:regex]]   matches regex and binds the text to NAME (visible to later directives and to
//                    the rest of this pattern);
//   [[NAME]]         matches the text NAME was bound to, literally. NAME must be bound by an
//                    earlier positive directive or earlier in the same pattern.
// `[[` that does not start `NAME]]` or `NAME:` (e.g. a nested literal `[[1, 2]]`) is literal text.
// A match never spans lines. LABEL patterns may not use or bind variables. NOT patterns see the
// variables as bound before the positive directive that follows them. Patterns with a regex or a
// variable are run only on input lines of up to 32 KiB (a longer line is reported as a failure
// when it contains the pattern's literal text); plain literal patterns have no such limit.
#pragma once

#include <string>
#include <string_view>

namespace axle::testing {

struct FileCheckResult {
  bool ok = false;
  // Empty when ok; otherwise a readable diagnostic: the failing directive (its line in the check
  // text and its text), what was expected, and the input around where the search started.
  std::string message;
};

// Checks `input` against the directives with `prefix` found in `check_text`. Never throws:
// malformed check text (bad regex, unknown variable, empty pattern, misspelled directive such as
// `CHECK-NXT:`) and check text without any directive are reported as failures too.
FileCheckResult FileCheck(std::string_view input, std::string_view check_text,
                          std::string_view prefix = "CHECK");

}  // namespace axle::testing
