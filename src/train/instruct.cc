// Instruction data (instruct.h).
#include "train/instruct.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"

namespace axle::train {
namespace {

std::optional<int32_t> FirstToken(const text::Tokenizer& tok, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::optional<int32_t> id = tok.TokenId(n)) return id;
  return std::nullopt;
}

std::string Keys(const nlohmann::json& j) {
  std::string keys;
  for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
  return keys.empty() ? "none" : keys;
}

}  // namespace

ChatFormat LoadChatFormat(const std::string& model_dir) {
  namespace fs = std::filesystem;
  ChatFormat f;
  const fs::path file = fs::path(model_dir) / "tokenizer_config.json";
  if (!fs::is_directory(model_dir) || !fs::exists(file)) return f;
  std::ifstream in(file);
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) Fail("{}: not a JSON object", file.string());
  // A special token is a string or an AddedToken object {"content": ...}.
  auto token = [&](const char* key) -> std::string {
    auto it = config.find(key);
    if (it == config.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
    return "";
  };
  f.bos_token = token("bos_token");
  f.eos_token = token("eos_token");
  auto t = config.find("chat_template");
  if (t == config.end() || t->is_null()) return f;
  std::string source;
  if (t->is_string()) {
    source = t->get<std::string>();
  } else if (t->is_array()) {  // named templates: [{"name": "default", "template": ...}, ...]
    for (const auto& named : *t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string())
        source = named["template"].get<std::string>();
    if (source.empty()) Fail("{}: chat_template is a list without a \"default\" template", file.string());
  } else {
    Fail("{}: chat_template must be a string, not {}", file.string(), t->dump().substr(0, 80));
  }
  f.chat_template = text::ChatTemplate::Parse(source, file.string() + " (chat_template)");
  return f;
}

std::vector<Example> LoadInstructions(const std::string& path, const text::Tokenizer& tok, const ChatFormat& format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("{}: cannot open the instruction data; pass --data an existing .jsonl file", path);
  const std::optional<int32_t> bos = FirstToken(tok, {"<|begin_of_text|>", "<s>"});
  const std::optional<int32_t> eos = FirstToken(tok, {"<|eot_id|>", "<|im_end|>", "</s>", "<|endoftext|>", "<|end_of_text|>"});
  if (!eos && !format.chat_template)
    Fail("{}: the tokenizer {} has none of the end-of-sequence tokens Axle's chat template ends a message with "
         "(<|eot_id|>, <|im_end|>, </s>, <|endoftext|>, <|end_of_text|>)",
         path, tok.path());
  std::vector<Example> out;
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      Fail("{}: the line is not a JSON object; instruction data holds one {{\"prompt\": ..., \"response\": ...}} or "
           "{{\"messages\": [...]}} object per line",
           where);
    // The messages: given, or a user prompt and the assistant's response.
    std::vector<std::pair<std::string, std::string>> messages;
    if (j.contains("messages")) {
      const nlohmann::json& m = j["messages"];
      if (!m.is_array()) Fail("{}: \"messages\" must be an array of {{\"role\", \"content\"}} objects", where);
      for (size_t i = 0; i < m.size(); ++i) {
        if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string() || !m[i].contains("content") ||
            !m[i]["content"].is_string())
          Fail("{}: messages[{}] must be an object with string \"role\" and \"content\", not {}", where, i,
               m[i].dump().substr(0, 120));
        const std::string role = m[i]["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant")
          Fail("{}: messages[{}] has role \"{}\"; the roles are system, user and assistant", where, i, role);
        messages.emplace_back(role, m[i]["content"].get<std::string>());
      }
    } else if (j.contains("prompt") || j.contains("response")) {
      for (const char* key : {"prompt", "response"})
        if (!j.contains(key) || !j[key].is_string())
          Fail("{}: \"{}\" must be a string (the record's keys: {})", where, key, Keys(j));
      messages = {{"user", j["prompt"].get<std::string>()}, {"assistant", j["response"].get<std::string>()}};
    } else {
      Fail("{}: the record has neither \"prompt\" and \"response\" nor \"messages\" (its keys: {})", where, Keys(j));
    }
    Example ex;
    auto piece = [&](std::string_view text, bool trained) {
      // The template's special-token texts (its bos_token / eos_token) by their ids, the rest
      // through the tokenizer (which matches its own added tokens).
      std::vector<int32_t> ids;
      try {
        while (!text.empty()) {
          size_t at = std::string_view::npos, len = 0;
          std::optional<int32_t> id;
          for (const std::string* sp : {&format.bos_token, &format.eos_token}) {
            if (sp->empty()) continue;
            const size_t p = text.find(*sp);
            if (p < at) {
              if (std::optional<int32_t> i = tok.TokenId(*sp)) at = p, len = sp->size(), id = i;
            }
          }
          const std::vector<int32_t> part = tok.Encode(text.substr(0, at));
          ids.insert(ids.end(), part.begin(), part.end());
          if (!id) break;
          ids.push_back(*id);
          text.remove_prefix(at + len);
        }
      } catch (const Error& e) {
        Fail("{}: {}", where, e.message());
      }
      ex.tokens.insert(ex.tokens.end(), ids.begin(), ids.end());
      ex.trained.insert(ex.trained.end(), ids.size(), trained ? 1 : 0);
    };
    auto token = [&](int32_t id, bool trained) {
      ex.tokens.push_back(id);
      ex.trained.push_back(trained ? 1 : 0);
    };
    bool any_assistant = false;
    for (const auto& m : messages) any_assistant = any_assistant || m.first == "assistant";
    if (!any_assistant) Fail("{}: the record has no assistant message: nothing to train on", where);
    if (format.chat_template) {
      // The directory's template: the text of the whole conversation, cut where each assistant
      // turn starts (the rendering up to it with the generation prompt) and ends (the rendering
      // up to and including it).
      auto render = [&](size_t n, bool generation_prompt) {
        nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
        for (size_t k = 0; k < n; ++k) msgs.push_back({{"role", messages[k].first}, {"content", messages[k].second}});
        try {
          return format.chat_template->Render({{"messages", msgs},
                                               {"add_generation_prompt", generation_prompt},
                                               {"bos_token", format.bos_token},
                                               {"eos_token", format.eos_token}});
        } catch (const Error& e) {
          Fail("{}: {}", where, e.message());
        }
      };
      const std::string full = render(messages.size(), false);
      size_t done = 0;
      for (size_t k = 0; k < messages.size(); ++k) {
        if (messages[k].first != "assistant") continue;
        const std::string before = render(k, true), through = render(k + 1, false);
        if (through.compare(0, before.size(), before) != 0 || full.compare(0, through.size(), through) != 0 ||
            before.size() < done)
          Fail("{}: the chat template's rendering of the first {} messages (with the generation prompt) is not the "
               "beginning of its rendering of the conversation, so the response of message {} cannot be located; "
               "Axle needs templates whose renderings extend each other",
               where, k, k);
        piece(std::string_view(full).substr(done, before.size() - done), false);
        piece(std::string_view(full).substr(before.size(), through.size() - before.size()), true);
        done = through.size();
      }
      piece(std::string_view(full).substr(done), false);
      out.push_back(std::move(ex));
      continue;
    }
    if (bos) token(*bos, false);
    for (const auto& [role, content] : messages) {
      const bool assistant = role == "assistant";
      piece("<|" + role + "|>\n", false);
      piece(content, assistant);
      token(*eos, assistant);
      piece("\n", false);
    }
    out.push_back(std::move(ex));
  }
  if (out.empty()) Fail("{}: no records", path);
  return out;
}

InstructionLoader::InstructionLoader(const std::vector<Example>& examples, int64_t batch, int64_t seq, bool pack,
                                     int32_t pad_id, std::string source)
    : batch_(batch), seq_(seq), pack_(pack) {
  if (batch <= 0 || seq <= 0) Fail("batch size {} and sequence length {} must both be positive", batch, seq);
  const auto width = static_cast<size_t>(seq + 1);
  auto new_row = [&] {
    rows_.emplace_back();
    rows_.back().tokens.reserve(width);
  };
  auto finish = [&](Row& r) {  // padding to the row's width: a segment of its own, never trained
    const int32_t seg = r.segments.empty() ? 0 : r.segments.back() + 1;
    for (int32_t p = 0; r.tokens.size() < width; ++p) {
      r.tokens.push_back(pad_id);
      r.trained.push_back(0);
      r.positions.push_back(p);
      r.segments.push_back(seg);
    }
  };
  for (const Example& ex : examples) {
    const size_t len = std::min(ex.tokens.size(), width);
    if (rows_.empty() || !pack || rows_.back().tokens.size() + len > width) {
      if (!rows_.empty()) finish(rows_.back());
      new_row();
    }
    Row& r = rows_.back();
    const int32_t seg = r.segments.empty() ? 0 : r.segments.back() + 1;
    for (size_t i = 0; i < len; ++i) {
      r.tokens.push_back(ex.tokens[i]);
      r.trained.push_back(ex.trained[i]);
      r.positions.push_back(static_cast<int32_t>(i));
      r.segments.push_back(seg);
    }
  }
  finish(rows_.back());
  for (const Row& r : rows_)
    for (size_t j = 1; j < width; ++j) trained_tokens_ += r.trained[j] && r.segments[j] == r.segments[j - 1];
  if (trained_tokens_ == 0)
    Fail("{}: no response token falls within --seq {}: every trained token was cut off; raise --seq", source, seq);
}

int64_t InstructionLoader::StepsPerEpoch() const {
  return std::max<int64_t>(1, static_cast<int64_t>(rows_.size()) / batch_);
}

Batch InstructionLoader::GetRows(int64_t step, int64_t first_row, int64_t rows) const {
  AXLE_CHECK(step >= 0 && first_row >= 0 && rows >= 0 && first_row + rows <= batch_,
             "rows [{}, {}) of step {} are not in a batch of {} rows", first_row, first_row + rows, step, batch_);
  const auto n = static_cast<int64_t>(rows_.size());
  Batch b;
  for (int64_t i = 0; i < rows; ++i) {
    const Row& r = rows_[static_cast<size_t>(((step % n) * (batch_ % n) + first_row + i) % n)];
    for (int64_t j = 0; j < seq_; ++j) {
      const auto k = static_cast<size_t>(j);
      b.inputs.push_back(r.tokens[k]);
      // The target is the next token, trained only when it is a response token of the same document.
      const bool trained = r.trained[k + 1] && r.segments[k + 1] == r.segments[k];
      b.targets.push_back(trained ? r.tokens[k + 1] : -100);
      if (pack_) {
        b.positions.push_back(r.positions[k]);
        b.segments.push_back(r.segments[k]);
      }
    }
  }
  return b;
}

}  // namespace axle::train
