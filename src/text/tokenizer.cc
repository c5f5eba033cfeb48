// LoadTokenizer (tokenizer.h): which file a directory's tokenizer is, and the checks every kind shares.
#include "text/tokenizer.h"

#include <utf8proc.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "text/text_internal.h"

namespace axle::text {

void CheckUtf8(std::string_view text, const std::string& source) {
  size_t at = 0;
  while (at < text.size()) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                                    static_cast<utf8proc_ssize_t>(text.size() - at), &cp);
    if (n <= 0) Fail("{}: the text is not valid UTF-8 at byte {}; tokenizers take UTF-8 text", source, at);
    at += static_cast<size_t>(n);
  }
}

std::optional<std::string> FindTokenizerFile(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir_or_file)) return dir_or_file;
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (fs::exists(fs::path(dir_or_file) / name)) return (fs::path(dir_or_file) / name).string();
  return std::nullopt;
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) Fail("the tokenizer '{}' does not exist; pass a tokenizer.json, a tokenizer.model or a model directory", path);
  const std::optional<std::string> file = FindTokenizerFile(path);
  if (!file)
    Fail("{}: the directory has no tokenizer.json or tokenizer.model; copy the model's tokenizer files into it", path);
  // SentencePiece models are protobufs; tokenizer.json is JSON: the first byte tells them apart.
  std::ifstream in(*file, std::ios::binary);
  if (!in) Fail("cannot open the tokenizer '{}'", *file);
  char first = 0;
  while (in.get(first) && (first == ' ' || first == '\n' || first == '\r' || first == '\t')) {
  }
  if (first == '{') return LoadTokenizerJson(*file);
  if (file->size() >= 5 && file->substr(file->size() - 5) == ".json")
    Fail("{}: not a tokenizer.json: the file is not a JSON object", *file);
  return LoadSentencePiece(*file);
}

}  // namespace axle::text
