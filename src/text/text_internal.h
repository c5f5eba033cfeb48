// The tokenizer implementations behind LoadTokenizer (not public API).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace axle::text {

std::unique_ptr<Tokenizer> LoadTokenizerJson(const std::string& path);
std::unique_ptr<Tokenizer> LoadSentencePiece(const std::string& path);

// Throws axle::Error naming `source` and the byte offset when `text` is not valid UTF-8 (the
// reference tokenizers take Unicode strings only).
void CheckUtf8(std::string_view text, const std::string& source);

}  // namespace axle::text
