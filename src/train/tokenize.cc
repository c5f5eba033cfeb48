// `axle tokenize` (tokenize.h).
#include "train/tokenize.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"
#include "train/data.h"

namespace axle::train {

TokenizeResult TokenizeToShard(const TokenizeOptions& o, std::ostream& out) {
  if (o.tokenizer.empty() || o.input.empty() || o.output.empty())
    Fail("axle tokenize: --tokenizer, --input and --output are all required");
  if (o.format != "auto" && o.format != "uint16" && o.format != "uint32")
    Fail("--format {}: expected auto, uint16 or uint32", o.format);
  const std::unique_ptr<text::Tokenizer> tok = text::LoadTokenizer(o.tokenizer);
  std::optional<int32_t> doc;
  if (o.doc_token == "auto") {
    for (const char* t : {"<|endoftext|>", "<|begin_of_text|>", "<s>"})
      if ((doc = tok->TokenId(t))) break;
  } else if (o.doc_token != "none") {
    doc = tok->TokenId(o.doc_token);
    if (!doc) Fail("--doc-token {}: {} has no such token; name one it has, or pass none", o.doc_token, tok->path());
  }
  std::ifstream in(o.input, std::ios::binary);
  if (!in) Fail("{}: cannot open the input; pass --input an existing text or .jsonl file", o.input);
  TokenizeResult r;
  std::vector<int32_t> tokens;
  auto add = [&](std::string_view text, const std::string& where) {
    if (doc) tokens.push_back(*doc);
    try {
      const std::vector<int32_t> ids = tok->Encode(text);
      tokens.insert(tokens.end(), ids.begin(), ids.end());
    } catch (const Error& e) {
      Fail("{}: {}", where, e.message());
    }
    ++r.documents;
  };
  const bool jsonl = o.input.size() >= 6 && o.input.substr(o.input.size() - 6) == ".jsonl";
  if (jsonl) {
    int64_t n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = fmt::format("{}:{}", o.input, n);
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object())
        Fail("{}: the line is not a JSON object; a .jsonl file holds one {{\"text\": ...}} object per line", where);
      auto it = j.find("text");
      if (it == j.end() || !it->is_string()) {
        std::string keys;
        for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
        Fail("{}: the object has no \"text\" string (its keys: {})", where, keys.empty() ? "none" : keys);
      }
      add(it->get<std::string>(), where);
    }
  } else {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (text.empty()) Fail("{}: the input is empty", o.input);
    add(text, o.input);
  }
  if (tokens.empty()) Fail("{}: no documents", o.input);
  r.tokens = static_cast<int64_t>(tokens.size());
  r.uint32 = o.format == "uint32" || (o.format == "auto" && tok->vocab_size() > 65536);
  WriteTokenShard(o.output, tokens, r.uint32);
  out << fmt::format("tokenized {} document{} of {} with {}: {} tokens{} -> {} ({} shard)\n", r.documents,
                     r.documents == 1 ? "" : "s", o.input, tok->Describe(), r.tokens,
                     doc ? fmt::format(" (each document after token {})", *doc) : "", o.output,
                     r.uint32 ? "uint32, Llama 3's header" : "uint16, GPT-2's header");
  return r;
}

}  // namespace axle::train
