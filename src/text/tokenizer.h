// Tokenizers of Hugging Face model directories: tokenizer.json (byte-level BPE, as GPT-2, Llama 3
// and Qwen2 ship it) and SentencePiece's tokenizer.model (Llama 2; through Debian's
// libsentencepiece), with the ids of the reference implementations.
//
//   std::unique_ptr<axle::text::Tokenizer> tok = axle::text::LoadTokenizer("Llama-3.2-1B/");
//   std::vector<int32_t> ids = tok->Encode("Hello, world");   // no BOS/EOS added
//   std::string text = tok->Decode(ids);
//
// Encode gives what the reference's encode(text, add_special_tokens=False) gives: the added
// (special) tokens of tokenizer.json are matched in the text first, then each remaining piece is
// normalized, pre-tokenized by the file's regex and merged by BPE rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace axle::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
  // The number of ids (the largest id + 1, added tokens included).
  virtual int64_t vocab_size() const = 0;
  // The id of a token given by its text ("<|eot_id|>", "</s>"), if the vocabulary has it.
  virtual std::optional<int32_t> TokenId(std::string_view token) const = 0;
  // "byte-level BPE (tokenizer.json, 2000 ids)", for logs.
  virtual std::string Describe() const = 0;
  // The file it was read from.
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
};

// Loads `path`: a tokenizer.json or tokenizer.model file, or a directory holding one (tokenizer.json
// preferred, as transformers' fast tokenizers prefer it). Throws axle::Error naming the file for a
// directory without either, a file that is not a tokenizer (not JSON, no "model", a SentencePiece
// file that does not parse), and a tokenizer.json whose parts Axle does not implement (a model
// other than BPE, byte fallback, a normalizer other than NFC, a pre-tokenizer other than
// ByteLevel and Split), naming the part.
std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path);

// The tokenizer file LoadTokenizer would read for `dir_or_file`, or nullopt when a directory has none.
std::optional<std::string> FindTokenizerFile(const std::string& dir_or_file);

}  // namespace axle::text
