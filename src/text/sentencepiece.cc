// SentencePiece tokenizer.model files through Debian's libsentencepiece (tokenizer.h).
#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "core/error.h"
#include "text/text_internal.h"

namespace axle::text {
namespace {

class SentencePiece final : public Tokenizer {
 public:
  explicit SentencePiece(const std::string& path) {
    path_ = path;
    const auto status = sp_.Load(path);
    if (!status.ok())
      Fail("{}: not a SentencePiece model ({}); a tokenizer.model is a SentencePiece protobuf, a tokenizer.json "
           "is JSON",
           path, status.ToString());
  }
  std::vector<int32_t> Encode(std::string_view text) const override {
    CheckUtf8(text, path_);
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) Fail("{}: encoding failed: {}", path_, status.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string Decode(std::span<const int32_t> ids) const override {
    std::vector<int> v(ids.begin(), ids.end());
    for (int id : v)
      if (id < 0 || id >= sp_.GetPieceSize())
        Fail("{}: cannot decode id {}: the vocabulary has {} ids", path_, id, sp_.GetPieceSize());
    std::string out;
    const auto status = sp_.Decode(v, &out);
    if (!status.ok()) Fail("{}: decoding failed: {}", path_, status.ToString());
    return out;
  }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  std::optional<int32_t> TokenId(std::string_view token) const override {
    const int id = sp_.PieceToId(token);
    if (id < 0 || sp_.IdToPiece(id) != token) return std::nullopt;
    return id;
  }
  std::string Describe() const override { return fmt::format("SentencePiece ({}, {} ids)", path_, vocab_size()); }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> LoadSentencePiece(const std::string& path) { return std::make_unique<SentencePiece>(path); }

}  // namespace axle::text
