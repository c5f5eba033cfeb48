// The malformed .axir corpus: every file in tests/ir/parse_errors/ starts with
//   // ERROR: LINE:COL: <substring of the message>
// and must fail to parse with an axle::Error at exactly that place, naming that problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/parser.h"

namespace axle::ir {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(AXLE_SOURCE_DIR) / "tests/ir/parse_errors"))
    if (entry.path().extension() == ".axir") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The message `text` must produce: what() starts with `prefix` and contains `substring`.
struct Expectation {
  std::string prefix;
  std::string substring;
};

// Reads `// ERROR: LINE:COL: substring` from the first line.
std::optional<Expectation> ReadExpectation(const std::string& path, const std::string& text) {
  const std::string tag = "// ERROR: ";
  const std::string first = text.substr(0, text.find('\n'));
  if (first.rfind(tag, 0) != 0) return std::nullopt;
  const std::string rest = first.substr(tag.size());
  const size_t colon = rest.find(':');
  const size_t space = rest.find(": ", colon + 1);
  if (colon == std::string::npos || space == std::string::npos) return std::nullopt;
  std::string substring = rest.substr(space + 2);
  while (!substring.empty() && substring.back() == '\r') substring.pop_back();
  return Expectation{path + ":" + rest.substr(0, space) + ": error:", substring};
}

TEST(ParseErrorsTest, CorpusIsLargeEnough) { EXPECT_GE(CorpusFiles().size(), 35u); }

TEST(ParseErrorsTest, EveryFileFailsWhereItSays) {
  for (const fs::path& file : CorpusFiles()) {
    const std::string path = file.string();
    SCOPED_TRACE(path);
    const std::string text = ReadFile(file);
    std::optional<Expectation> want = ReadExpectation(path, text);
    ASSERT_TRUE(want) << "first line must be '// ERROR: LINE:COL: message'";
    try {
      ParseModule(text, path);
      ADD_FAILURE() << "parsed without error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(want->prefix, 0), 0u) << what << "\nwanted prefix " << want->prefix;
      EXPECT_NE(what.find(want->substring), std::string::npos)
          << what << "\nwanted substring " << want->substring;
    }
  }
}

// Errors that need bytes or sizes a small text file cannot hold comfortably.
std::string ErrorOf(std::string_view text) {
  try {
    ParseModule(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParseErrorsTest, EmbeddedNul) {
  const std::string text = std::string("module @m {\n  func @f {") + '\0' + " return }\n}\n";
  EXPECT_EQ(ErrorOf(text), "<string>:2:12: error: unexpected character '\\x00'");
}

TEST(ParseErrorsTest, NestingIsCapped) {
  std::string text = "module @m { func @f { %x = custom_call() {target=";
  text += std::string(100000, '[');
  EXPECT_NE(ErrorOf(text).find("lists nested too deeply"), std::string::npos);
}

TEST(ParseErrorsTest, EveryPrefixOfAValidModuleFailsCleanly) {
  const std::string valid = R"(module @m {num_replicas=2} {
  func @f {
    %x = parameter() {index=0} : f32[2]{[x]}
    %c = constant() {value=[1, -inf]} : f32[2]
    %s = custom_call(%x, %c) {target="a\x00b", config=""} : f32[2]
    return %s
  }
}
)";
  ASSERT_EQ(ErrorOf(valid), "no error");
  for (size_t n = 0; n + 1 < valid.size(); ++n) {
    const std::string prefix = valid.substr(0, n);
    EXPECT_NE(ErrorOf(prefix), "no error") << prefix;
  }
}

}  // namespace
}  // namespace axle::ir
