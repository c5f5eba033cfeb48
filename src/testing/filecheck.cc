#include "testing/filecheck.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"

namespace axle::testing {
namespace {

// Note [FileCheck matching]
// Every match lies within one input line, so a search walks the lines of its range and runs the
// pattern on each line (or on the part of it inside the range). That keeps std::regex, which is
// recursive and slow on long subjects, on short strings, and makes a search linear in the input
// it scans. A line that lacks the pattern's longest literal piece (its "anchor") is skipped
// without running the regex at all; a pattern that is one plain literal never builds a regex.
// Each directive searches forward from the end of the previous match, so a whole run scans the
// input about once (plus once per CHECK-NOT range).
//
// libstdc++'s std::regex matcher recurses at least once per character it consumes, so a regex on
// a 30,000-character line overflows an 8 MiB stack. FileCheck() therefore runs on a thread with a
// kStackBytes stack, and a regex is run only on lines of at most kMaxRegexLine characters (a
// longer line that contains the pattern's anchor is reported, not searched; plain literal
// patterns have no limit).
constexpr size_t kStackBytes = size_t{256} << 20;
constexpr size_t kMaxRegexLine = size_t{32} << 10;

enum class Kind { kCheck, kNext, kSame, kNot, kLabel };

struct Piece {
  enum Type { kLiteral, kRegex, kDefine, kUse };
  Type type = kLiteral;
  std::string text;  // literal text, regex source, or the variable name (kUse)
  std::string name;  // kDefine: the variable bound
  int groups = 0;    // capture groups inside the regex source (kRegex, kDefine)
};

struct Directive {
  Kind kind = Kind::kCheck;
  int line = 0;         // 1-based line in the check text
  std::string spelled;  // "CHECK-NEXT: foo", from the prefix to the end of the line
  std::vector<Piece> pieces;
  std::string anchor;  // a whitespace-free literal every match contains ("" = none)
  bool plain = false;  // the pattern is exactly `anchor`
};

struct Match {
  size_t begin = 0;
  size_t end = 0;
  std::vector<std::pair<std::string, std::string>> bindings;  // variables bound by the match
};

// A pattern ready to run: its regex and the capture group of each variable it binds.
struct BuiltPattern {
  std::regex re;
  std::vector<std::pair<std::string, int>> defines;
};

bool IsHSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsHSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsHSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Regex source matching `text` exactly; with `loose_space`, a whitespace run matches [ \t]+.
std::string EscapeLiteral(std::string_view text, bool loose_space) {
  static constexpr std::string_view kSpecial = "^$\\.*+?()[]{}|/";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (loose_space && IsHSpace(c)) {
      while (i + 1 < text.size() && IsHSpace(text[i + 1])) ++i;
      out += "[ \\t]+";
    } else {
      if (kSpecial.find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

// Checks `source` compiles on its own and returns its number of capture groups.
int ValidateRegex(const std::string& source) {
  try {
    return static_cast<int>(std::regex(source, std::regex::ECMAScript).mark_count());
  } catch (const std::regex_error& e) {
    Fail("invalid regex '{}': {}", source, e.what());
  }
}

// The index of the `]]` closing a capture's regex that starts at `from`; npos when missing.
// `]]` inside a bracket expression or after a backslash does not close it.
size_t FindCaptureEnd(std::string_view s, size_t from) {
  bool in_class = false;
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (in_class) {
      if (s[i] == ']') in_class = false;
    } else if (s[i] == '[') {
      in_class = true;
      if (i + 1 < s.size() && s[i + 1] == '^') ++i;
    } else if (s.compare(i, 2, "]]") == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Parses `[[NAME]]` or `[[NAME:regex]]` at s[at] (which starts with "[["). Returns the index after
// it, or nullopt when the text is not variable syntax (it is then literal text).
std::optional<size_t> ParseVariable(std::string_view s, size_t at, Piece* piece) {
  size_t i = at + 2;
  if (i < s.size() && (s[i] == '#' || s[i] == '$')) {
    Fail("'[[{}' variables (numeric or global) are not supported", s[i]);
  }
  if (i >= s.size() || !IsIdentStart(s[i])) return std::nullopt;
  size_t j = i;
  while (j < s.size() && IsIdentChar(s[j])) ++j;
  std::string name(s.substr(i, j - i));
  if (s.compare(j, 2, "]]") == 0) {
    *piece = Piece{Piece::kUse, name, "", 0};
    return j + 2;
  }
  if (j >= s.size() || s[j] != ':') return std::nullopt;
  size_t end = FindCaptureEnd(s, j + 1);
  if (end == std::string_view::npos) Fail("'[[{}:' has no closing ']]'", name);
  std::string source(s.substr(j + 1, end - j - 1));
  if (source.empty()) Fail("empty regex in '[[{}:]]'", name);
  *piece = Piece{Piece::kDefine, source, name, ValidateRegex(source)};
  return end + 2;
}

// Parses `{{regex}}` at s[at]; returns the index after it. Extra '}' right after the first "}}"
// belong to the regex, so `{{a{2}}}` is the regex `a{2}`.
size_t ParseRegex(std::string_view s, size_t at, Piece* piece) {
  size_t end = s.find("}}", at + 2);
  if (end == std::string_view::npos) Fail("'{{{{' has no closing '}}}}'");
  while (end + 2 < s.size() && s[end + 2] == '}') ++end;
  std::string source(s.substr(at + 2, end - at - 2));
  if (source.empty()) Fail("empty regex '{{{{}}}}'");
  *piece = Piece{Piece::kRegex, source, "", ValidateRegex(source)};
  return end + 2;
}

// The longest whitespace-free run of `text`.
std::string LongestWord(std::string_view text) {
  std::string_view best;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && !IsHSpace(text[j])) ++j;
    if (j - i > best.size()) best = text.substr(i, j - i);
    i = j + 1;
  }
  return std::string(best);
}

void ParsePattern(std::string_view text, Directive* d) {
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) d->pieces.push_back(Piece{Piece::kLiteral, std::move(literal), "", 0});
    literal.clear();
  };
  size_t i = 0;
  while (i < text.size()) {
    Piece piece;
    if (text.compare(i, 2, "{{") == 0) {
      flush();
      i = ParseRegex(text, i, &piece);
      d->pieces.push_back(std::move(piece));
    } else if (text.compare(i, 2, "[[") == 0) {
      if (std::optional<size_t> next = ParseVariable(text, i, &piece)) {
        flush();
        i = *next;
        d->pieces.push_back(std::move(piece));
      } else {
        literal += text[i++];  // only one '[': "[[[X]]" is '[' then [[X]]
      }
    } else {
      literal += text[i++];
    }
  }
  flush();
  for (const Piece& p : d->pieces) {
    if (p.type != Piece::kLiteral) continue;
    std::string word = LongestWord(p.text);
    if (word.size() > d->anchor.size()) d->anchor = std::move(word);
  }
  d->plain = d->pieces.size() == 1 && d->pieces[0].type == Piece::kLiteral &&
             d->pieces[0].text == d->anchor;
}

// Finds the directive on `line`, if any: returns its kind and where its pattern starts, and sets
// *prefix_at. Throws for a misspelled or unsupported directive such as `CHECK-NXT:`.
std::optional<std::pair<Kind, size_t>> FindDirective(std::string_view line, std::string_view prefix,
                                                     size_t* prefix_at) {
  for (size_t p = line.find(prefix); p != std::string_view::npos; p = line.find(prefix, p + 1)) {
    if (p > 0 && (IsIdentChar(line[p - 1]) || line[p - 1] == '-')) continue;
    *prefix_at = p;
    size_t q = p + prefix.size();
    if (q < line.size() && line[q] == ':') return std::pair{Kind::kCheck, q + 1};
    if (q >= line.size() || line[q] != '-') continue;
    size_t r = q + 1;
    while (r < line.size() && (IsIdentChar(line[r]) || line[r] == '-')) ++r;
    if (r >= line.size() || line[r] != ':') continue;
    std::string_view suffix = line.substr(q + 1, r - q - 1);
    if (suffix == "NEXT") return std::pair{Kind::kNext, r + 1};
    if (suffix == "SAME") return std::pair{Kind::kSame, r + 1};
    if (suffix == "NOT") return std::pair{Kind::kNot, r + 1};
    if (suffix == "LABEL") return std::pair{Kind::kLabel, r + 1};
    if (suffix == "DAG" || suffix == "EMPTY" || suffix.starts_with("COUNT")) {
      Fail("'{}-{}:' is not supported by Axle's FileCheck", prefix, suffix);
    }
    Fail(
        "unknown directive '{0}-{1}:' (expected {0}:, {0}-NEXT:, {0}-SAME:, {0}-NOT: or "
        "{0}-LABEL:)",
        prefix, suffix);
  }
  return std::nullopt;
}

// Rejects variable uses that no earlier positive directive (or earlier part of the same pattern)
// binds, bindings in CHECK-NOT, variables in CHECK-LABEL, and NEXT/SAME without a previous match.
void CheckVariables(const Directive& d, std::set<std::string>* bound, bool* seen_positive) {
  std::set<std::string> local = *bound;
  for (const Piece& p : d.pieces) {
    if (p.type != Piece::kUse && p.type != Piece::kDefine) continue;
    if (d.kind == Kind::kLabel) Fail("LABEL patterns cannot use or bind variables");
    if (p.type == Piece::kDefine && d.kind == Kind::kNot) {
      Fail("NOT patterns cannot bind variables ('[[{}:')", p.name);
    }
    if (p.type == Piece::kUse && !local.count(p.text)) {
      Fail("variable [[{}]] is used but not bound by an earlier directive", p.text);
    }
    if (p.type == Piece::kDefine) local.insert(p.name);
  }
  if ((d.kind == Kind::kNext || d.kind == Kind::kSame) && !*seen_positive) {
    Fail("'{}' has no previous match to follow", d.spelled);
  }
  if (d.kind != Kind::kNot) {
    *bound = std::move(local);
    *seen_positive = true;
  }
}

std::vector<Directive> ParseDirectives(std::string_view check_text, std::string_view prefix) {
  std::vector<Directive> out;
  std::set<std::string> bound;
  bool seen_positive = false;
  int line_no = 0;
  size_t start = 0;
  while (start <= check_text.size()) {
    size_t nl = check_text.find('\n', start);
    if (nl == std::string_view::npos) nl = check_text.size();
    std::string_view line = check_text.substr(start, nl - start);
    ++line_no;
    start = nl + 1;
    Directive d;
    d.line = line_no;
    try {
      size_t prefix_at = 0;
      std::optional<std::pair<Kind, size_t>> found = FindDirective(line, prefix, &prefix_at);
      if (!found) continue;
      d.kind = found->first;
      d.spelled = std::string(Trim(line.substr(prefix_at)));
      std::string_view pattern = Trim(line.substr(found->second));
      if (pattern.empty()) Fail("empty pattern");
      ParsePattern(pattern, &d);
      CheckVariables(d, &bound, &seen_positive);
    } catch (const Error& e) {
      Fail("check line {}: {}\n  {}", line_no, e.message(), Trim(line));
    }
    out.push_back(std::move(d));
  }
  return out;
}

// Runs parsed directives over the input, block by block (see Note [FileCheck matching]).
class Checker {
 public:
  Checker(std::string_view input, const std::vector<Directive>& directives)
      : input_(input), directives_(directives) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < input_.size(); ++i) {
      if (input_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  // True when every directive holds; otherwise failure() says why.
  bool Run();
  const std::string& failure() const { return failure_; }

 private:
  size_t LineOf(size_t pos) const {
    return static_cast<size_t>(std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) -
                               line_starts_.begin()) -
           1;
  }
  // The offset of the '\n' ending line `line` (or the input size).
  size_t LineEnd(size_t line) const {
    return line + 1 < line_starts_.size() ? line_starts_[line + 1] - 1 : input_.size();
  }

  bool RunBlock(size_t first, size_t last, size_t begin, size_t end);
  std::optional<Match> MatchPositive(const Directive& d, size_t pos, size_t end);
  bool CheckNots(const std::vector<const Directive*>& nots, size_t begin, size_t end);
  BuiltPattern Build(const Directive& d) const;
  std::optional<Match> Search(const Directive& d, const BuiltPattern& built, size_t begin,
                              size_t end) const;
  std::optional<Match> SearchLine(const Directive& d, const BuiltPattern& built, size_t line,
                                  size_t begin, size_t end) const;
  void SetFailure(const Directive& d, const std::string& what, size_t pos, size_t len,
                  std::string_view where);
  std::string ShowInput(size_t pos, size_t len) const;

  std::string_view input_;
  const std::vector<Directive>& directives_;
  std::vector<size_t> line_starts_;
  std::map<std::string, std::string> vars_;
  std::string failure_;
};

bool Checker::Run() {
  size_t i = 0;
  size_t buffer = 0;  // where the search for the next label starts
  const size_t n = directives_.size();
  while (i < n) {
    size_t j = i;
    while (j < n && directives_[j].kind != Kind::kLabel) ++j;
    size_t block_begin = buffer;
    size_t block_end = input_.size();
    if (j < n) {
      const Directive& label = directives_[j];
      std::optional<Match> m = Search(label, Build(label), buffer, input_.size());
      if (!m) {
        SetFailure(label, "label not found in input", buffer, 0, "where the search started");
        return false;
      }
      block_end = buffer = m->end;
      ++j;  // the block's directives end with the label, matched again inside the block
    }
    if (!RunBlock(i, j, block_begin, block_end)) return false;
    i = j;
  }
  return true;
}

// Runs directives [first, last) inside input [begin, end).
bool Checker::RunBlock(size_t first, size_t last, size_t begin, size_t end) {
  size_t pos = begin;
  std::vector<const Directive*> nots;
  for (size_t k = first; k < last; ++k) {
    const Directive& d = directives_[k];
    if (d.kind == Kind::kNot) {
      nots.push_back(&d);
      continue;
    }
    std::optional<Match> m = MatchPositive(d, pos, end);
    if (!m || !CheckNots(nots, pos, m->begin)) return false;
    nots.clear();
    // Bind only now, so the NOTs above saw the values from before this directive.
    for (auto& [name, value] : m->bindings) vars_[name] = std::move(value);
    pos = m->end;
  }
  return CheckNots(nots, pos, end);
}

std::optional<Match> Checker::MatchPositive(const Directive& d, size_t pos, size_t end) {
  const size_t line = LineOf(pos);
  size_t limit = end;
  if (d.kind == Kind::kSame) limit = std::min(end, LineEnd(line));
  if (d.kind == Kind::kNext) {
    limit = std::min(end, LineEnd(std::min(line + 1, line_starts_.size() - 1)));
  }
  BuiltPattern built = Build(d);
  std::optional<Match> m = Search(d, built, pos, limit);
  if (m && d.kind == Kind::kNext && LineOf(m->begin) == line) {
    SetFailure(d,
               fmt::format("matched on the same line as the previous match (input line {}), "
                           "expected the next line",
                           line + 1),
               m->begin, m->end - m->begin, "the match");
    return std::nullopt;
  }
  if (m) return m;
  std::string what = "expected pattern not found in input";
  if (d.kind == Kind::kNext || d.kind == Kind::kSame) {
    what = fmt::format("expected pattern not found on {} the previous match (input line {})",
                       d.kind == Kind::kNext ? "the line after" : "the same line as", line + 1);
    if (std::optional<Match> later = Search(d, built, limit, end)) {
      what += fmt::format("; it first matches later, at input line {}", LineOf(later->begin) + 1);
    }
  } else if (end < input_.size()) {
    what += fmt::format(" before the next LABEL match (input line {})", LineOf(end) + 1);
  }
  SetFailure(d, what, pos, 0, "where the search started");
  return std::nullopt;
}

bool Checker::CheckNots(const std::vector<const Directive*>& nots, size_t begin, size_t end) {
  for (const Directive* d : nots) {
    if (std::optional<Match> m = Search(*d, Build(*d), begin, end)) {
      SetFailure(*d, fmt::format("excluded pattern found at input line {}", LineOf(m->begin) + 1),
                 m->begin, m->end - m->begin, "the excluded match");
      return false;
    }
  }
  return true;
}

BuiltPattern Checker::Build(const Directive& d) const {
  BuiltPattern built;
  if (d.plain) return built;
  std::string source;
  int groups = 0;
  std::map<std::string, int> local;  // variables bound earlier in this pattern -> their group
  for (const Piece& p : d.pieces) {
    switch (p.type) {
      case Piece::kLiteral:
        source += EscapeLiteral(p.text, /*loose_space=*/true);
        break;
      case Piece::kRegex:
        source += "(?:" + p.text + ")";
        groups += p.groups;
        break;
      case Piece::kDefine:
        source += "(" + p.text + ")";
        local[p.name] = ++groups;
        built.defines.emplace_back(p.name, groups);
        groups += p.groups;
        break;
      case Piece::kUse:
        if (auto it = local.find(p.text); it != local.end()) {
          source += fmt::format("(?:\\{})", it->second);
        } else {
          source += "(?:" + EscapeLiteral(vars_.at(p.text), /*loose_space=*/false) + ")";
        }
        break;
    }
  }
  try {
    built.re = std::regex(source, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    Fail("check line {}: cannot compile the pattern as regex '{}': {}", d.line, source, e.what());
  }
  return built;
}

std::optional<Match> Checker::Search(const Directive& d, const BuiltPattern& built, size_t begin,
                                     size_t end) const {
  const size_t first = LineOf(begin);
  for (size_t line = first; line < line_starts_.size(); ++line) {
    const size_t start = line_starts_[line];
    if (start > end || (start == end && line != first)) break;
    if (std::optional<Match> m = SearchLine(d, built, line, std::max(start, begin), end)) return m;
    if (LineEnd(line) >= end) break;
  }
  return std::nullopt;
}

// Searches the part [begin, min(end, line end)) of input line `line`.
std::optional<Match> Checker::SearchLine(const Directive& d, const BuiltPattern& built, size_t line,
                                         size_t begin, size_t end) const {
  const size_t line_end = LineEnd(line);
  const size_t seg_end = std::min(end, line_end);
  std::string_view seg = input_.substr(begin, seg_end - begin);
  if (!d.anchor.empty()) {
    size_t at = seg.find(d.anchor);
    if (at == std::string_view::npos) return std::nullopt;
    if (d.plain) return Match{begin + at, begin + at + d.anchor.size(), {}};
  }
  if (seg.size() > kMaxRegexLine) {
    Fail(
        "check line {}: input line {} is {} characters long, too long for a regex pattern "
        "(limit {}); use a plain literal pattern for it",
        d.line, line + 1, seg.size(), kMaxRegexLine);
  }
  auto flags = std::regex_constants::match_default;
  if (begin > line_starts_[line]) flags |= std::regex_constants::match_prev_avail;
  if (seg_end < line_end) flags |= std::regex_constants::match_not_eol;
  std::cmatch m;
  try {
    if (!std::regex_search(seg.data(), seg.data() + seg.size(), m, built.re, flags)) {
      return std::nullopt;
    }
  } catch (const std::regex_error& e) {
    Fail("check line {}: regex search failed on input line {}: {}", d.line, line + 1, e.what());
  }
  Match match{begin + static_cast<size_t>(m.position(0)),
              begin + static_cast<size_t>(m.position(0) + m.length(0)),
              {}};
  for (const auto& [name, group] : built.defines) match.bindings.emplace_back(name, m.str(group));
  return match;
}

void Checker::SetFailure(const Directive& d, const std::string& what, size_t pos, size_t len,
                         std::string_view where) {
  failure_ = fmt::format("check line {}: {}\nerror: {}\n", d.line, d.spelled, what);
  std::set<std::string> shown;
  for (const Piece& p : d.pieces) {
    if (p.type != Piece::kUse || !vars_.count(p.text) || !shown.insert(p.text).second) continue;
    failure_ += fmt::format("  with [[{}]] = \"{}\"\n", p.text, vars_.at(p.text));
  }
  const size_t line = LineOf(pos);
  failure_ += fmt::format("input around line {}, column {} ({}):\n", line + 1,
                          pos - line_starts_[line] + 1, where);
  failure_ += ShowInput(pos, len);
}

// A few input lines around `pos`, the line of `pos` marked with '>' and a caret under it.
std::string Checker::ShowInput(size_t pos, size_t len) const {
  constexpr size_t kContext = 2;
  constexpr size_t kMaxWidth = 200;
  const size_t line = LineOf(pos);
  const size_t first = line >= kContext ? line - kContext : 0;
  const size_t last = std::min(line + kContext, line_starts_.size() - 1);
  std::string out;
  for (size_t l = first; l <= last; ++l) {
    std::string_view text = input_.substr(line_starts_[l], LineEnd(l) - line_starts_[l]);
    if (text.size() > kMaxWidth) text = text.substr(0, kMaxWidth);
    out += fmt::format("{} {:>6} | {}\n", l == line ? '>' : ' ', l + 1, text);
    if (l != line) continue;
    std::string caret;
    for (size_t i = line_starts_[l]; i < pos && i - line_starts_[l] < kMaxWidth; ++i) {
      caret += input_[i] == '\t' ? '\t' : ' ';
    }
    caret += '^';
    if (len > 1) caret += std::string(std::min(len, kMaxWidth) - 1, '~');
    out += fmt::format("  {:>6} | {}\n", "", caret);
  }
  return out;
}

bool IsValidPrefix(std::string_view prefix) {
  if (prefix.empty() || !std::isalpha(static_cast<unsigned char>(prefix[0]))) return false;
  return std::all_of(prefix.begin(), prefix.end(),
                     [](char c) { return IsIdentChar(c) || c == '-'; });
}

// FileCheck on the calling thread.
FileCheckResult RunFileCheck(std::string_view input, std::string_view check_text,
                             std::string_view prefix) {
  if (!IsValidPrefix(prefix)) {
    return {false,
            fmt::format("invalid check prefix '{}': use letters, digits, '_' and '-'", prefix)};
  }
  try {
    std::vector<Directive> directives = ParseDirectives(check_text, prefix);
    if (directives.empty()) {
      return {false, fmt::format("no {0} lines found in the check text (looked for '{0}:', "
                                 "'{0}-NEXT:', '{0}-SAME:', '{0}-NOT:' and '{0}-LABEL:')",
                                 prefix)};
    }
    Checker checker(input, directives);
    if (checker.Run()) return {true, ""};
    return {false, checker.failure()};
  } catch (const Error& e) {
    return {false, e.message()};
  } catch (const std::exception& e) {
    return {false, fmt::format("FileCheck failed: {}", e.what())};
  }
}

struct Job {
  std::string_view input, check_text, prefix;
  FileCheckResult result;
};

void* RunJob(void* arg) {
  Job* job = static_cast<Job*>(arg);
  job->result = RunFileCheck(job->input, job->check_text, job->prefix);
  return nullptr;
}

}  // namespace

// Runs on a thread with a large stack; see Note [FileCheck matching].
FileCheckResult FileCheck(std::string_view input, std::string_view check_text,
                          std::string_view prefix) {
  Job job{input, check_text, prefix, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, &RunJob, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) return RunFileCheck(input, check_text, prefix);  // fall back to this stack
  pthread_join(thread, nullptr);
  return job.result;
}

}  // namespace axle::testing
