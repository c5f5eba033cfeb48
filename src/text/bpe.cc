// Byte-level BPE from a Hugging Face tokenizer.json (tokenizer.h): added tokens, the NFC normalizer,
// the ByteLevel and Split pre-tokenizers (PCRE2 with Unicode properties for their regexes), and
// BPE merges by rank.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "text/text_internal.h"

namespace axle::text {
namespace {

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to code points from 256 up,
// so every byte is one visible character of a token's text.
std::array<std::string, 256> ByteToUnicode() {
  std::array<std::string, 256> out;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    uint8_t buf[4];
    const auto n = utf8proc_encode_char(cp, buf);
    out[static_cast<size_t>(b)] = std::string(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

// A compiled PCRE2 regex with Unicode properties (\p{L}) and UTF-8 subjects; JIT-compiled when the
// library can. Matches are [start, end) byte offsets.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      Fail("{}: the pre-tokenizer regex does not compile at offset {}: {} (pattern {})", where, offset,
           reinterpret_cast<char*>(message), pattern);
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // an interpreter fallback when JIT is unavailable
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match in `s` (valid UTF-8), in order; an empty match advances one character.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view s) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t at = 0;
    while (at <= s.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, PCRE2_NO_UTF_CHECK, md,
                                 nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] > ov[0]) {
        out.emplace_back(ov[0], ov[1]);
        at = ov[1];
      } else {  // empty: step over one UTF-8 character
        at = ov[0] + 1;
        while (at < s.size() && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) ++at;
      }
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
};

// One pre-tokenizer step of a Sequence: Split on a regex (Isolated: matches and the gaps between
// them are the pieces) or ByteLevel (its own regex when use_regex, then the byte mapping).
struct PreStep {
  std::unique_ptr<Regex> regex;  // null: no splitting
  bool byte_level = false;
  bool add_prefix_space = false;
};

class ByteLevelBpe final : public Tokenizer {
 public:
  ByteLevelBpe(const nlohmann::json& j, const std::string& path);

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int32_t> TokenId(std::string_view token) const override {
    auto it = vocab_.find(std::string(token));
    if (it != vocab_.end()) return it->second;
    for (const auto& a : added_)
      if (a.content == token) return a.id;
    return std::nullopt;
  }
  std::string Describe() const override {
    return fmt::format("byte-level BPE ({}, {} ids, {} merges, {} added tokens)", path_, vocab_size(), merges_.size(),
                       added_.size());
  }

 private:
  struct Added {
    std::string content;
    int32_t id;
  };
  void EncodePiece(std::string_view text, std::vector<int32_t>& out) const;
  void Bpe(const std::string& word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> is_added_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged)
  std::vector<Added> added_;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  std::vector<PreStep> pre_;
  std::array<std::string, 256> byte_to_unicode_ = ByteToUnicode();
  std::unordered_map<std::string, uint8_t> unicode_to_byte_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

uint64_t PairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

std::string Where(const std::string& path, const char* part) { return fmt::format("{} ({})", path, part); }

ByteLevelBpe::ByteLevelBpe(const nlohmann::json& j, const std::string& path) {
  path_ = path;
  for (int b = 0; b < 256; ++b) unicode_to_byte_[byte_to_unicode_[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
  const nlohmann::json& model = j["model"];
  for (const char* unsupported : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(unsupported) && !model[unsupported].is_null())
      Fail("{}: BPE \"{}\" {} is not supported (Axle reads byte-level BPE as GPT-2, Llama 3 and Qwen2 ship it)",
           path, unsupported, model[unsupported].dump());
  if (model.value("byte_fallback", false))
    Fail("{}: a BPE with byte_fallback (a SentencePiece conversion) is not supported; give the directory's "
         "tokenizer.model instead",
         path);
  ignore_merges_ = model.value("ignore_merges", false);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    Fail("{}: model.vocab must be an object of token -> id", path);
  int32_t max_id = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      Fail("{}: model.vocab[\"{}\"] is {}, not a token id", path, token, id.dump());
    vocab_[token] = id.get<int32_t>();
    max_id = std::max(max_id, id.get<int32_t>());
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) Fail("{}: added_tokens must be an array", path);
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a.contains("id") || !a["content"].is_string() ||
          !a["id"].is_number_integer())
        Fail("{}: an added_tokens entry needs a string \"content\" and an integer \"id\": {}", path, a.dump());
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (a.value(flag, false))
          Fail("{}: added token {} has {} true, which Axle does not implement", path, a["content"].dump(), flag);
      const std::string content = a["content"].get<std::string>();
      if (content.empty()) Fail("{}: an added token is empty", path);
      added_.push_back({content, a["id"].get<int32_t>()});
      max_id = std::max(max_id, added_.back().id);
    }
    // Longest first, so that at one position the longest added token wins.
    std::stable_sort(added_.begin(), added_.end(),
                     [](const Added& x, const Added& y) { return x.content.size() > y.content.size(); });
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), "");
  is_added_.assign(id_to_token_.size(), false);
  for (const auto& [token, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = token;
  for (const auto& a : added_) {
    id_to_token_[static_cast<size_t>(a.id)] = a.content;
    is_added_[static_cast<size_t>(a.id)] = true;
  }
  if (!model.contains("merges") || !model["merges"].is_array()) Fail("{}: model.merges must be an array", path);
  int32_t rank = 0;
  for (const auto& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {  // "a b" (tokenizers before 0.20)
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) Fail("{}: merge {} is not \"left right\"", path, m.dump());
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    } else {
      Fail("{}: merge {} is neither \"left right\" nor [left, right]", path, m.dump());
    }
    auto l = vocab_.find(left), r = vocab_.find(right), merged = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || merged == vocab_.end())
      Fail("{}: merge {} (rank {}) names a token the vocabulary lacks", path, m.dump(), rank);
    merges_.emplace(PairKey(l->second, r->second), std::make_pair(rank++, merged->second));
  }

  // The normalizer: none, or NFC (Qwen2's).
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const nlohmann::json& n = j["normalizer"];
    if (n.value("type", "") == "NFC") {
      nfc_ = true;
    } else if (!(n.value("type", "") == "Sequence" && n.contains("normalizers") && n["normalizers"].empty())) {
      Fail("{}: normalizer {} is not supported; Axle has none and NFC (byte-level BPE tokenizers use no other)",
           Where(path, "normalizer"), n.dump().substr(0, 200));
    }
  }
  // The pre-tokenizer: ByteLevel, or a Sequence of Splits and one ByteLevel.
  const nlohmann::json& pre = j.value("pre_tokenizer", nlohmann::json());
  std::vector<nlohmann::json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    for (const auto& s : pre.value("pretokenizers", nlohmann::json::array())) steps.push_back(s);
  } else if (pre.is_object()) {
    steps.push_back(pre);
  }
  bool byte_level = false;
  for (const auto& s : steps) {
    const std::string type = s.value("type", "");
    PreStep step;
    if (type == "ByteLevel") {
      step.byte_level = byte_level = true;
      step.add_prefix_space = s.value("add_prefix_space", false);
      if (s.value("use_regex", true)) step.regex = std::make_unique<Regex>(kGpt2Pattern, Where(path, "ByteLevel"));
    } else if (type == "Split") {
      if (s.value("behavior", "") != "Isolated" || s.value("invert", false))
        Fail("{}: a Split pre-tokenizer with behavior {} and invert {} is not supported (Axle has Isolated, "
             "not inverted)",
             Where(path, "pre_tokenizer"), s.value("behavior", nlohmann::json()).dump(),
             s.value("invert", nlohmann::json()).dump());
      const nlohmann::json& pattern = s.value("pattern", nlohmann::json());
      if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
        step.regex = std::make_unique<Regex>(pattern["Regex"].get<std::string>(), Where(path, "Split"));
      } else if (pattern.contains("String") && pattern["String"].is_string()) {
        std::string quoted = "\\Q" + pattern["String"].get<std::string>() + "\\E";
        step.regex = std::make_unique<Regex>(quoted, Where(path, "Split"));
      } else {
        Fail("{}: a Split pre-tokenizer needs a pattern {{\"Regex\": ...}} or {{\"String\": ...}}, not {}",
             Where(path, "pre_tokenizer"), pattern.dump());
      }
    } else {
      Fail("{}: pre-tokenizer type \"{}\" is not supported (Axle reads ByteLevel and Split: the byte-level BPE of "
           "GPT-2, Llama 3 and Qwen2; a Metaspace tokenizer.json is a SentencePiece conversion: give the "
           "directory's tokenizer.model instead)",
           Where(path, "pre_tokenizer"), type);
    }
    pre_.push_back(std::move(step));
  }
  if (!byte_level)
    Fail("{}: the tokenizer has no ByteLevel pre-tokenizer, so it is not a byte-level BPE; Axle reads byte-level BPE "
         "tokenizer.json files and SentencePiece tokenizer.model files",
         Where(path, "pre_tokenizer"));
}

void ByteLevelBpe::Bpe(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges_)
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // Symbols: the word's characters (each a vocabulary token: the byte alphabet), merged by lowest
  // rank, the leftmost pair on a tie, until no adjacent pair has a merge.
  std::vector<int32_t> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t n = 1;
    while (i + n < word.size() && (static_cast<uint8_t>(word[i + n]) & 0xC0) == 0x80) ++n;
    auto it = vocab_.find(word.substr(i, n));
    if (it == vocab_.end()) Fail("{}: the character '{}' has no token (the vocabulary lacks a byte)", path_, word.substr(i, n));
    symbols.push_back(it->second);
    i += n;
  }
  while (symbols.size() > 1) {
    int32_t best_rank = INT32_MAX, merged = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merges_.find(PairKey(symbols[i], symbols[i + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first, merged = it->second.second, at = i;
      }
    }
    if (merged < 0) break;
    symbols[at] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() > 100000) cache_.clear();
  cache_.emplace(word, std::move(symbols));
}

void ByteLevelBpe::EncodePiece(std::string_view raw, std::vector<int32_t>& out) const {
  std::string text(raw);
  if (nfc_) {
    utf8proc_uint8_t* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str()));
    if (!n) Fail("{}: NFC normalization failed", path_);
    text = reinterpret_cast<char*>(n);
    free(n);
  }
  // Pre-tokenize: each step splits every piece further.
  std::vector<std::string> pieces = {text};
  for (const PreStep& step : pre_) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.add_prefix_space && !piece.empty() && piece[0] != ' ') piece = " " + piece;
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      size_t last = 0;
      for (const auto& [b, e] : step.regex->FindAll(piece)) {
        if (b > last) next.push_back(piece.substr(last, b - last));
        next.push_back(piece.substr(b, e - b));
        last = e;
      }
      if (last < piece.size()) next.push_back(piece.substr(last));
    }
    pieces = std::move(next);
  }
  for (const std::string& piece : pieces) {
    std::string mapped;
    for (unsigned char c : piece) mapped += byte_to_unicode_[c];
    if (!mapped.empty()) Bpe(mapped, out);
  }
}

std::vector<int32_t> ByteLevelBpe::Encode(std::string_view text) const {
  CheckUtf8(text, path_);
  std::vector<int32_t> out;
  // Added tokens first: the leftmost occurrence of any, the longest at that position.
  size_t at = 0;
  while (at < text.size()) {
    size_t best = std::string_view::npos;
    const Added* hit = nullptr;
    for (const Added& a : added_) {
      const size_t p = text.find(a.content, at);
      if (p < best) best = p, hit = &a;  // longest first: a later, shorter one at the same p loses
    }
    if (!hit) break;
    if (best > at) EncodePiece(text.substr(at, best - at), out);
    out.push_back(hit->id);
    at = best + hit->content.size();
  }
  if (at < text.size()) EncodePiece(text.substr(at), out);
  return out;
}

std::string ByteLevelBpe::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) Fail("{}: cannot decode id {}: the vocabulary has {} ids", path_, id, vocab_size());
    const std::string& token = id_to_token_[static_cast<size_t>(id)];
    if (is_added_[static_cast<size_t>(id)]) {
      out += token;
      continue;
    }
    for (size_t i = 0; i < token.size();) {
      size_t n = 1;
      while (i + n < token.size() && (static_cast<uint8_t>(token[i + n]) & 0xC0) == 0x80) ++n;
      auto it = unicode_to_byte_.find(token.substr(i, n));
      out += it != unicode_to_byte_.end() ? static_cast<char>(it->second) : '?';
      i += n;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> LoadTokenizerJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open the tokenizer '{}'", path);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail("{}: not a tokenizer.json: the file is not JSON", path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    Fail("{}: not a tokenizer.json: it has no \"model\" object{}", path,
         j.is_object() && j.contains("model_type") ? " (it looks like a config.json)" : "");
  const std::string type = j["model"].value("type", "BPE");
  if (type != "BPE")
    Fail("{}: tokenizer model type \"{}\" is not supported; Axle reads byte-level BPE tokenizer.json files "
         "(GPT-2, Llama 3, Qwen2) and SentencePiece tokenizer.model files",
         path, type);
  return std::make_unique<ByteLevelBpe>(j, path);
}

}  // namespace axle::text
