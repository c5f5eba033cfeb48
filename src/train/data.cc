#include "train/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"

namespace axle::train {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The whole file. Reading it at once keeps the checks below simple; shards are at most a few
// hundred MB (llm.c writes 100M tokens = 200 MB per shard).
std::vector<uint8_t> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    Fail("{}: no such file; pass --data an existing token shard (.bin) or text file", path);
  if (std::filesystem::is_directory(path, ec))
    Fail("{}: is a directory; pass --data a token shard (.bin) or a text file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    Fail("{}: cannot open for reading ({}); check the path and its permissions", path,
         std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) Fail("{}: read error ({})", path, std::strerror(errno));
  return bytes;
}

// Little-endian, whatever the host's byte order (the format fixes it).
int32_t ReadI32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 |
                              static_cast<uint32_t>(p[3]) << 24);
}

void PutI32(std::vector<uint8_t>& out, int32_t v) {
  auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

constexpr std::string_view kShardHelp =
    "an llm.c token shard is 256 little-endian int32 (magic 20240520, version 1, token count, "
    "then zeros) followed by the uint16 tokens, or with magic 20240801 and version 7 by uint32 "
    "tokens; write one with `axle tokenize`, llm.c's dev/data scripts or "
    "axle::train::WriteTokenShard";

TokenData LoadShard(const std::string& path) {
  std::vector<uint8_t> bytes = ReadFile(path);
  const auto size = static_cast<int64_t>(bytes.size());
  if (size < kShardHeaderBytes)
    Fail("{}: {} bytes is too short for an llm.c token shard's {}-byte header ({})", path, size,
         kShardHeaderBytes, kShardHelp);
  const int32_t magic = ReadI32(bytes.data());
  if (magic != kShardMagic && magic != kShardMagicU32)
    Fail("{}: bad magic number {} in the header; llm.c token shards start with {} or {} ({}). A text "
         "file must not end in .bin: rename it to train on its bytes",
         path, magic, kShardMagic, kShardMagicU32, kShardHelp);
  const bool u32 = magic == kShardMagicU32;
  const int32_t version = ReadI32(bytes.data() + 4);
  if (version != (u32 ? kShardVersionU32 : kShardVersion))
    Fail("{}: unsupported shard version {} for magic {}; llm.c writes version {} there ({})", path, version, magic,
         u32 ? kShardVersionU32 : kShardVersion, kShardHelp);
  const int64_t width = u32 ? 4 : 2;
  const int64_t count = ReadI32(bytes.data() + 8);
  if (count < 0)
    Fail("{}: negative token count {} in the header; the file is corrupt ({})", path, count,
         kShardHelp);
  const int64_t expected = kShardHeaderBytes + width * count;
  if (size < expected)
    Fail("{}: truncated: the header says {} tokens ({} bytes in all) but the file has {} bytes; "
         "re-create or re-download the shard",
         path, count, expected, size);
  if (size > expected)
    Fail("{}: {} trailing bytes: the header says {} tokens ({} bytes in all) but the file has {} "
         "bytes; the token count in the header is wrong or the file was appended to",
         path, size - expected, count, expected, size);
  if (count == 0) Fail("{}: the shard holds no tokens; train on a non-empty shard", path);
  TokenData data;
  data.source = path;
  data.vocab_hint = u32 ? int64_t{1} << 31 : 65536;
  data.tokens.resize(static_cast<size_t>(count));
  const uint8_t* p = bytes.data() + kShardHeaderBytes;
  for (int64_t i = 0; i < count; ++i) {
    data.tokens[i] = u32 ? ReadI32(p + 4 * i) : static_cast<int32_t>(p[2 * i] | p[2 * i + 1] << 8);
    if (data.tokens[i] < 0)
      Fail("{}: token {} at position {} is over 2^31 - 1; the file is corrupt ({})", path,
           static_cast<uint32_t>(data.tokens[i]), i, kShardHelp);
  }
  return data;
}

TokenData LoadText(const std::string& path) {
  std::vector<uint8_t> bytes = ReadFile(path);
  if (bytes.empty())
    Fail("{}: the text file is empty; train on a file with some text in it (or omit --data to "
         "use the built-in corpus)",
         path);
  TokenData data;
  data.source = path;
  data.vocab_hint = 256;
  // Bytes, not code points: a byte-level model needs no tokenizer and any UTF-8 text is bytes.
  data.tokens.assign(bytes.begin(), bytes.end());
  return data;
}

}  // namespace

TokenData LoadTokens(const std::string& path) {
  return EndsWith(path, ".bin") ? LoadShard(path) : LoadText(path);
}

void CheckVocab(std::span<const int32_t> tokens, int64_t vocab_size, const std::string& source) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0)
      Fail("{}: token {} at position {} is negative; token ids must be in [0, {})", source, t, i,
           vocab_size);
    if (t >= vocab_size)
      Fail("{}: token {} at position {} is not below the model's vocab_size {}; use a tokenizer "
           "matching the model or --init a model with a larger vocabulary",
           source, t, i, vocab_size);
  }
}

void WriteTokenShard(const std::string& path, std::span<const int32_t> tokens, bool uint32) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    Fail("{}: {} tokens do not fit an llm.c shard (the count is an int32); split them", path,
         tokens.size());
  std::vector<uint8_t> out;
  out.reserve(kShardHeaderBytes + (uint32 ? 4 : 2) * tokens.size());
  PutI32(out, uint32 ? kShardMagicU32 : kShardMagic);
  PutI32(out, uint32 ? kShardVersionU32 : kShardVersion);
  PutI32(out, static_cast<int32_t>(tokens.size()));
  for (int i = 3; i < kShardHeaderInts; ++i) PutI32(out, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0) Fail("{}: token {} at position {} is negative", path, t, i);
    if (uint32) {
      PutI32(out, t);
      continue;
    }
    if (t > 65535)
      Fail("{}: token {} at position {} does not fit a GPT-2 shard's uint16; write a uint32 (Llama 3) shard", path,
           t, i);
    out.push_back(static_cast<uint8_t>(t & 0xff));
    out.push_back(static_cast<uint8_t>(t >> 8));
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) Fail("{}: cannot open for writing ({})", path, std::strerror(errno));
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  f.close();
  if (!f) Fail("{}: write failed ({})", path, std::strerror(errno));
}

BatchLoader::BatchLoader(const std::vector<int32_t>& tokens, int64_t batch, int64_t seq,
                         std::string source)
    : tokens_(tokens), batch_(batch), seq_(seq), source_(std::move(source)) {
  if (batch <= 0 || seq <= 0)
    Fail("batch size {} and sequence length {} must both be positive", batch, seq);
  if (tokens.size() < 2)
    Fail("{}: {} token(s) are too few to train on; a batch needs at least 2 (an input and the "
         "token after it)",
         source_, tokens.size());
}

int64_t BatchLoader::StepsPerEpoch() const {
  const auto n = static_cast<int64_t>(tokens_.size());
  return std::max<int64_t>(1, n / (batch_ * seq_));
}

Batch BatchLoader::GetRows(int64_t step, int64_t first_row, int64_t rows) const {
  AXLE_CHECK(step >= 0, "step {} is negative", step);
  AXLE_CHECK(first_row >= 0 && rows >= 0 && first_row + rows <= batch_,
             "rows [{}, {}) are not in a batch of {} rows", first_row, first_row + rows, batch_);
  const auto n = static_cast<int64_t>(tokens_.size());
  const int64_t bt = batch_ * seq_;
  // The start modulo n first, so step * bt cannot overflow for any step a run reaches... and
  // (step % n) * (bt % n) < n^2 stays in range for any stream that fits in memory.
  const int64_t start = (((step % n) * (bt % n)) % n + (first_row * seq_) % n) % n;
  const int64_t count = rows * seq_;
  Batch b;
  b.inputs.resize(static_cast<size_t>(count));
  b.targets.resize(static_cast<size_t>(count));
  int64_t pos = start;
  int32_t cur = tokens_[pos];
  for (int64_t j = 0; j < count; ++j) {
    pos = pos + 1 == n ? 0 : pos + 1;
    const int32_t next = tokens_[pos];
    b.inputs[j] = cur;
    b.targets[j] = next;
    cur = next;
  }
  return b;
}

}  // namespace axle::train
