#include "testing/filecheck.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace axle::testing {
namespace {

// Expects FileCheck to pass, printing its diagnostic otherwise.
void ExpectPass(std::string_view input, std::string_view checks) {
  FileCheckResult r = FileCheck(input, checks);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.message, "");
}

// Expects FileCheck to fail with a message containing every string in `needles`.
void ExpectFail(std::string_view input, std::string_view checks,
                std::initializer_list<std::string_view> needles) {
  FileCheckResult r = FileCheck(input, checks);
  EXPECT_FALSE(r.ok) << "input:\n" << input << "\nchecks:\n" << checks;
  for (std::string_view needle : needles) {
    EXPECT_NE(r.message.find(needle), std::string::npos) << "message lacks '" << needle << "':\n"
                                                         << r.message;
  }
}

constexpr std::string_view kIr =
    "func @main(%x: f32[4], %y: f32[4]) -> f32[4] {\n"
    "  %0 = add(%x, %y) : f32[4]\n"
    "  %1 = mul(%0, %y) : f32[4]\n"
    "  return %1\n"
    "}\n";

// --- CHECK ----------------------------------------------------------------------------------

TEST(FileCheckTest, CheckMatchesInOrder) {
  ExpectPass(kIr, "// CHECK: add\n// CHECK: mul\n// CHECK: return");
}

TEST(FileCheckTest, CheckOutOfOrderFails) {
  ExpectFail(kIr, "// CHECK: mul\n// CHECK: add",
             {"check line 2: CHECK: add", "expected pattern not found", "input around line 3"});
}

TEST(FileCheckTest, CheckMissingFails) {
  ExpectFail(kIr, "// CHECK: sub", {"check line 1: CHECK: sub", "not found"});
}

TEST(FileCheckTest, CheckStartsAfterThePreviousMatchOnTheSameLine) {
  ExpectPass("a b a\n", "CHECK: a\nCHECK: a");
  ExpectFail("a b\n", "CHECK: a\nCHECK: a", {"check line 2"});
}

TEST(FileCheckTest, DirectiveAnywhereInLineWithAnyCommentLeader) {
  ExpectPass(kIr, "# CHECK: add\n; CHECK: mul\n  CHECK: return");
}

TEST(FileCheckTest, PrefixMustStartAWord) {
  // MYCHECK is not a CHECK directive, so only `CHECK: add` counts.
  ExpectPass(kIr, "// MYCHECK: nothing-like-this\n// CHECK: add");
  // CHECKS: and CHECK-foo (no colon) are not directives either.
  ExpectFail(kIr, "// CHECKS: x\n// CHECK-foo bar", {"no CHECK lines found"});
}

TEST(FileCheckTest, CustomPrefix) {
  EXPECT_TRUE(FileCheck(kIr, "// OPT: add\n// CHECK: nothing-like-this", "OPT").ok);
  EXPECT_FALSE(FileCheck(kIr, "// OPT: sub", "OPT").ok);
  EXPECT_FALSE(FileCheck(kIr, "// OPT: add", "bad prefix").ok);
}

TEST(FileCheckTest, NoDirectivesIsAFailure) {
  ExpectFail(kIr, "", {"no CHECK lines found"});
  ExpectFail(kIr, "func @main() {}\n// just a comment\n", {"no CHECK lines found"});
}

TEST(FileCheckTest, EmptyPatternIsAnError) {
  ExpectFail(kIr, "// CHECK: add\n// CHECK:   \n", {"check line 2", "empty pattern"});
}

TEST(FileCheckTest, MisspelledDirectiveIsAnError) {
  ExpectFail(kIr, "// CHECK-NXET: add", {"check line 1", "unknown directive 'CHECK-NXET:'"});
  ExpectFail(kIr, "// CHECK-DAG: add", {"not supported"});
}

// --- CHECK-NEXT -----------------------------------------------------------------------------

TEST(FileCheckTest, NextPasses) {
  ExpectPass(kIr, "// CHECK: add\n// CHECK-NEXT: mul\n// CHECK-NEXT: return\n// CHECK-NEXT: }");
}

TEST(FileCheckTest, NextOnALaterLineFails) {
  ExpectFail(
      kIr, "// CHECK: add\n// CHECK-NEXT: return",
      {"check line 2: CHECK-NEXT: return", "the line after the previous match (input line 2)",
       "first matches later, at input line 4"});
}

TEST(FileCheckTest, NextOnTheSameLineFails) {
  ExpectFail("a b\nc\n", "CHECK: a\nCHECK-NEXT: b", {"same line as the previous match"});
}

TEST(FileCheckTest, NextAtEndOfInputFails) {
  ExpectFail("a\n", "CHECK: a\nCHECK-NEXT: b", {"CHECK-NEXT: b", "not found"});
}

TEST(FileCheckTest, NextWithoutPreviousMatchIsAnError) {
  ExpectFail(kIr, "// CHECK-NEXT: func", {"check line 1", "no previous match"});
}

// --- CHECK-SAME -----------------------------------------------------------------------------

TEST(FileCheckTest, SamePasses) {
  ExpectPass(kIr, "// CHECK: %0 = add\n// CHECK-SAME: %y\n// CHECK-SAME: f32[4]");
}

TEST(FileCheckTest, SameMustFollowThePreviousMatch) {
  // `%x` occurs on the line, but before the match of `%y`.
  ExpectFail(kIr, "// CHECK: %y)\n// CHECK-SAME: %x", {"CHECK-SAME: %x", "same line"});
}

TEST(FileCheckTest, SameOnALaterLineFails) {
  ExpectFail(kIr, "// CHECK: add\n// CHECK-SAME: mul",
             {"check line 2", "first matches later, at input line 3"});
}

// --- CHECK-NOT ------------------------------------------------------------------------------

TEST(FileCheckTest, NotBetweenMatchesPasses) {
  ExpectPass(kIr, "// CHECK: add\n// CHECK-NOT: sub\n// CHECK: return");
}

TEST(FileCheckTest, NotBetweenMatchesFails) {
  ExpectFail(kIr, "// CHECK: add\n// CHECK-NOT: mul\n// CHECK: return",
             {"check line 2: CHECK-NOT: mul", "excluded pattern found at input line 3",
              ">      3 |", "^~~"});
}

TEST(FileCheckTest, NotOnlyCoversTheRangeBetweenMatches) {
  // `add` occurs, but only before the range, which starts after the match of `add` itself.
  ExpectPass(kIr, "// CHECK: add\n// CHECK-NOT: add\n// CHECK: return");
}

TEST(FileCheckTest, NotAtTheEnd) {
  ExpectPass(kIr, "// CHECK: mul\n// CHECK-NOT: add");
  ExpectFail(kIr, "// CHECK: add\n// CHECK-NOT: return", {"CHECK-NOT: return", "input line 4"});
}

TEST(FileCheckTest, NotAlone) {
  ExpectPass(kIr, "// CHECK-NOT: sub");
  ExpectFail(kIr, "// CHECK-NOT: mul", {"excluded pattern found"});
}

TEST(FileCheckTest, NotBeforeNext) {
  ExpectPass("a\nb\nc\n", "CHECK: a\nCHECK-NOT: c\nCHECK-NEXT: b");
  ExpectFail("a x\nb\n", "CHECK: a\nCHECK-NOT: x\nCHECK-NEXT: b", {"CHECK-NOT: x"});
}

// --- CHECK-LABEL ----------------------------------------------------------------------------

constexpr std::string_view kTwoFuncs =
    "func @f() {\n"
    "  %0 = add\n"
    "}\n"
    "func @g() {\n"
    "  %0 = mul\n"
    "}\n";

TEST(FileCheckTest, LabelPasses) {
  ExpectPass(kTwoFuncs,
             "// CHECK-LABEL: func @f\n// CHECK: add\n// CHECK-LABEL: func @g\n// CHECK: mul");
}

TEST(FileCheckTest, LabelConfinesChecksToTheirBlock) {
  // Without labels `mul` would be found in @g; the label keeps the search inside @f.
  ExpectPass(kTwoFuncs, "// CHECK: func @f\n// CHECK: mul");
  ExpectFail(kTwoFuncs, "// CHECK-LABEL: func @f\n// CHECK: mul\n// CHECK-LABEL: func @g",
             {"check line 2: CHECK: mul", "before the next LABEL match (input line 4)"});
}

TEST(FileCheckTest, NotBeforeALabelCoversTheBlock) {
  ExpectPass(kTwoFuncs, "// CHECK-LABEL: @f\n// CHECK-NOT: mul\n// CHECK-LABEL: @g");
  ExpectFail(kTwoFuncs, "// CHECK-LABEL: @f\n// CHECK-NOT: mul\n", {"CHECK-NOT: mul"});
}

TEST(FileCheckTest, MissingLabelFails) {
  ExpectFail(kTwoFuncs, "// CHECK-LABEL: @f\n// CHECK-LABEL: @h\n",
             {"check line 2: CHECK-LABEL: @h", "label not found"});
}

TEST(FileCheckTest, LabelCannotUseVariables) {
  ExpectFail(kTwoFuncs, "// CHECK-LABEL: [[F:@[a-z]]]", {"LABEL patterns cannot"});
}

// --- Patterns -------------------------------------------------------------------------------

TEST(FileCheckTest, WhitespaceRunsMatchAnyHorizontalWhitespace) {
  ExpectPass("a    b\tc\n", "CHECK: a b c");
  ExpectPass("a b\n", "CHECK:     a   b    ");  // leading/trailing whitespace trimmed
  ExpectFail("ab\n", "CHECK: a b", {"not found"});
  ExpectFail("a\nb\n", "CHECK: a b", {"not found"});  // never across lines
}

TEST(FileCheckTest, RegexPasses) {
  ExpectPass(kIr, "// CHECK: %{{[0-9]+}} = add\n// CHECK: {{^}}  return %1{{$}}");
  ExpectPass("abc\n", "CHECK: a{{x|b}}c");  // alternation stays inside the braces
  ExpectPass("aac\n", "CHECK: {{a{2}}}c");  // '}' after '}}' belongs to the regex
}

TEST(FileCheckTest, RegexFails) {
  ExpectFail(kIr, "// CHECK: %{{[a-z]+}} = add", {"CHECK: %{{[a-z]+}} = add", "not found"});
  ExpectFail(kIr, "// CHECK: mul{{$}}", {"not found"});
}

TEST(FileCheckTest, RegexAnchorsRespectTheSearchStart) {
  // `^` does not match in the middle of a line where the previous match ended.
  ExpectFail("ab\n", "CHECK: a\nCHECK-SAME: {{^}}b", {"CHECK-SAME"});
  ExpectPass("ab\nb\n", "CHECK: a\nCHECK: {{^}}b");
}

TEST(FileCheckTest, SpecialCharactersInLiteralsAreLiteral) {
  ExpectPass("x = f(a.b*) [1] {c} $d ^e|f\n", "CHECK: f(a.b*) [1] {c} $d ^e|f");
  ExpectFail("x = faab\n", "CHECK: f(a.b*)", {"not found"});
}

TEST(FileCheckTest, NestedBracketsAreLiteral) {
  ExpectPass("%c = constant [[1, 2], [3, 4]]\n", "CHECK: constant [[1, 2], [3, 4]]");
}

TEST(FileCheckTest, BadRegexIsAnError) {
  ExpectFail(kIr, "// CHECK: add\n// CHECK: {{a(}}", {"check line 2", "invalid regex 'a('"});
  ExpectFail(kIr, "// CHECK: {{abc", {"no closing"});
  ExpectFail(kIr, "// CHECK: {{}}", {"empty regex"});
}

// --- Variables ------------------------------------------------------------------------------

TEST(FileCheckTest, CaptureAndUse) {
  ExpectPass(kIr,
             "// CHECK: [[SUM:%[0-9]+]] = add\n"
             "// CHECK: [[PROD:%[0-9]+]] = mul([[SUM]], %y)\n"
             "// CHECK: return [[PROD]]");
}

TEST(FileCheckTest, CaptureUseMismatchFails) {
  ExpectFail(kIr, "// CHECK: [[SUM:%[0-9]+]] = add\n// CHECK: return [[SUM]]",
             {"check line 2: CHECK: return [[SUM]]", "with [[SUM]] = \"%0\""});
}

TEST(FileCheckTest, CaptureUsedLaterInTheSamePattern) {
  ExpectPass("x = op(%a, %a)\n", "CHECK: op([[V:%[a-z]+]], [[V]])");
  ExpectFail("x = op(%a, %b)\n", "CHECK: op([[V:%[a-z]+]], [[V]])", {"not found"});
}

TEST(FileCheckTest, CaptureWithGroupsInsideAndBeforeIt) {
  // Groups inside user regexes must not shift the variable's capture group.
  ExpectPass("k=ab v=12 w=12\n", "CHECK: k={{(a)(b)}} v=[[N:([0-9])+]] w=[[N]]");
}

TEST(FileCheckTest, CaptureRegexMayContainBrackets) {
  ExpectPass("x[3] y[3]\n", "CHECK: x[[[I:[0-9]+]]] y[[[I]]]");
}

TEST(FileCheckTest, VariableValueIsMatchedLiterally) {
  ExpectPass("a.b\nxa.b\n", "CHECK: [[V:a.b]]\nCHECK: x[[V]]");
  ExpectFail("a.b\nxaxb\n", "CHECK: [[V:a.b]]\nCHECK: x[[V]]", {"not found"});
}

TEST(FileCheckTest, RedefinitionTakesTheNewValue) {
  ExpectPass("%1 %1 %2 %2\n", "CHECK: [[V:%[0-9]]] [[V]]\nCHECK: [[V:%[0-9]]] [[V]]");
}

TEST(FileCheckTest, NotUsesTheValueBeforeTheNextMatch) {
  ExpectPass("def %1\nuse %2\ndef %2\n",
             "CHECK: def [[V:%[0-9]]]\nCHECK-NOT: use [[V]]\nCHECK: def [[V:%[0-9]]]");
  ExpectFail("def %1\nuse %1\ndef %2\n",
             "CHECK: def [[V:%[0-9]]]\nCHECK-NOT: use [[V]]\nCHECK: def [[V:%[0-9]]]",
             {"CHECK-NOT: use [[V]]", "with [[V]] = \"%1\""});
}

TEST(FileCheckTest, UnknownVariableIsAnError) {
  ExpectFail(kIr, "// CHECK: add\n// CHECK: [[NOPE]]",
             {"check line 2", "[[NOPE]] is used but not bound"});
  // Bound only by a later directive: still an error.
  ExpectFail(kIr, "// CHECK: [[X]]\n// CHECK: [[X:add]]", {"check line 1", "[[X]]"});
}

TEST(FileCheckTest, UnsupportedVariableSyntaxIsAnError) {
  ExpectFail(kIr, "// CHECK: [[#N]]", {"not supported"});
  ExpectFail(kIr, "// CHECK: [[X:abc", {"no closing ']]'"});
  ExpectFail(kIr, "// CHECK-NOT: [[X:abc]]", {"NOT patterns cannot bind"});
}

// --- Diagnostics and scale ------------------------------------------------------------------

TEST(FileCheckTest, MessageShowsTheInputAroundTheSearchStart) {
  FileCheckResult r = FileCheck(kIr, "// CHECK: %1 = mul\n// CHECK-NEXT: retrun %1");
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.message.find("check line 2: CHECK-NEXT: retrun %1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("input around line 3, column 11"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(">      3 |   %1 = mul(%0, %y) : f32[4]"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("       4 |   return %1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("|           ^\n"), std::string::npos) << r.message;
}

TEST(FileCheckTest, LargeInputIsFast) {
  std::string input;
  for (int i = 0; i < 10000; ++i) input += "  %" + std::to_string(i) + " = add(%a, %b) : f32[4]\n";
  input += "  return %9999\n";
  const auto start = std::chrono::steady_clock::now();
  // Passing checks near the end, failing regex searches over the whole input, and NOT ranges.
  ExpectPass(input,
             "CHECK: %9998 = add\nCHECK-NEXT: [[V:%[0-9]+]] = add\nCHECK-NEXT: return [[V]]");
  ExpectFail(input, "CHECK: {{(a|b)*c+d}}", {"not found"});
  ExpectFail(input, "CHECK: %{{[0-9]+}} = sub", {"not found"});
  ExpectPass(input, "CHECK: %0 = add\nCHECK-NOT: {{mul|sub}}\nCHECK: return");
  ExpectFail(input, "CHECK: {{.*}}%5000 =\nCHECK-NOT: {{.* = .*}}", {"CHECK-NOT"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // generous: a few hundred ms in a release build
}

TEST(FileCheckTest, LongLinesDoNotCrash) {
  std::string input(30000, 'a');
  input += "b\n";
  ExpectPass(input, "CHECK: ab");
  ExpectPass(input, "CHECK: {{a+b}}");  // deep recursion inside std::regex
  ExpectPass(input, "CHECK: {{(a|b)+}}");
  std::string huge = std::string(300000, 'a') + "b\n";
  ExpectPass(huge, "CHECK: ab");  // plain literals have no length limit
  ExpectFail(huge, "CHECK: a{{b}}", {"input line 1 is 300001 characters long", "plain literal"});
}

}  // namespace
}  // namespace axle::testing
