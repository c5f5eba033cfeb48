// Writing a file so that readers never see part of it.
#pragma once

#include <string>
#include <string_view>

namespace axle {

// Writes `bytes` to `path` atomically: to PATH.tmp.<pid> first, fsync'ed, then renamed over PATH,
// so a reader sees the old file or the whole new one, never a part. Concurrent writers of one
// path in one process must serialize. Throws axle::Error "cannot write <what> 'PATH': <step>
// 'TMP' failed: <OS error>" (the temporary file removed) when a step fails.
void WriteFileAtomically(const std::string& path, std::string_view bytes, std::string_view what);

}  // namespace axle
