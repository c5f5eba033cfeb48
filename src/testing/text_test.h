// IR-text-in / CHECK-out tests (tests/passes, tests/spmd): each .axir file names its passes on a
// `// RUN: --passes=a,b` line, holds a module, and CHECK lines (filecheck.h) state what the printed
// result must contain. Reproduce one by hand with `axle opt --passes=a,b FILE.axir`.
#pragma once

#include <string>
#include <vector>

#include "testing/filecheck.h"

namespace axle::testing {

// The .axir files under `dir` (with `recursive`, its subfolders too), sorted.
std::vector<std::string> TextTestFiles(const std::string& dir, bool recursive);

// A gtest-safe name for `file`: its path relative to `dir` without the extension, every
// character other than a letter or digit replaced by '_'.
std::string TextTestName(const std::string& file, const std::string& dir);

// Parses `file`, runs the passes of its RUN line (verifying after each), prints the module and
// FileChecks the print against the file. On failure the message ends with the printed module.
FileCheckResult RunTextTest(const std::string& file);

}  // namespace axle::testing
