// `axle tokenize`: text or JSONL documents to an llm.c token shard with a model's tokenizer
// (src/text/tokenizer.h), for `axle train --data`.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace axle::train {

struct TokenizeOptions {
  std::string tokenizer;  // tokenizer.json, tokenizer.model, or a model directory holding one
  std::string input;      // a text file (one document) or .jsonl ({"text": ...} per line)
  std::string output;     // the .bin shard to write
  // The token put before every document, as llm.c's data scripts do ("auto": the tokenizer's
  // <|endoftext|>, <|begin_of_text|> or <s>, the first it has; "none": nothing).
  std::string doc_token = "auto";
  std::string format = "auto";  // uint16 (GPT-2's header) | uint32 (Llama 3's) | auto (by vocab size)
};

struct TokenizeResult {
  int64_t documents = 0;
  int64_t tokens = 0;
  bool uint32 = false;
};

// Throws axle::Error naming the file and line for: a JSONL line that is not a JSON object or has
// no "text" string, text that is not UTF-8, an unknown --doc-token, ids that do not fit uint16.
TokenizeResult TokenizeToShard(const TokenizeOptions& options, std::ostream& out);

}  // namespace axle::train
