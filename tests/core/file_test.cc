// WriteFileAtomically (core/file.h): the whole file or the old one, and errors that name the path.
#include "core/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace axle {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(WriteFileAtomicallyTest, WritesAndReplacesLeavingNoTemporaryFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("axle-file-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out.json").string();
  WriteFileAtomically(path, std::string("first\0bytes", 11), "a test file");
  EXPECT_EQ(Slurp(path), std::string("first\0bytes", 11));
  WriteFileAtomically(path, "second", "a test file");
  EXPECT_EQ(Slurp(path), "second");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}), 1);
  std::filesystem::remove_all(dir);
}

TEST(WriteFileAtomicallyTest, AFailedStepNamesTheFileAndTheStep) {
  const std::string path = "/nonexistent-axle-dir/out.json";
  try {
    WriteFileAtomically(path, "x", "a test file");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot write a test file '/nonexistent-axle-dir/out.json': creating"), std::string::npos) << m;
    EXPECT_NE(m.find("No such file or directory"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace axle
