// Instruction data: JSONL records of {"prompt", "response"} or {"messages": [...]}, rendered with a
// chat template, tokenized, and batched (padded or packed) with the loss on the responses only.
//
//   std::vector<Example> ex = LoadInstructions("chat.jsonl", *tokenizer);
//   InstructionLoader loader(ex, /*batch=*/4, /*seq=*/256, /*pack=*/true, pad_id);
//
// The template is the model directory's own chat_template (tokenizer_config.json, rendered by
// text::ChatTemplate as transformers renders it) or, when it has none, Axle's fixed one
// (docs/models.md, "Instruction data"), the format of Zephyr and TinyLlama-Chat: for every
// message, "<|role|>\n", its content and the end-of-sequence token, then "\n"; a
// begin-of-sequence token first when the tokenizer has one. The trained tokens are each assistant
// turn: with Axle's template its content and end-of-sequence token; with a directory's, what the
// rendering of the conversation up to and including that message adds to the rendering up to it
// with the generation prompt (the content and the template's end-of-turn text). Every other
// target is -100. Each piece is tokenized on its own (special tokens by their ids), so a piece
// never merges with its neighbour and the boundaries are exact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "train/data.h"

namespace axle::train {

struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> trained;  // per token: 1 when predicting it counts in the loss
};

// A model directory's chat template and the special tokens it names (tokenizer_config.json).
struct ChatFormat {
  std::optional<text::ChatTemplate> chat_template;  // none: Axle's fixed template
  std::string bos_token, eos_token;                 // the texts the template's bos_token / eos_token hold
};

// Reads the chat template and special tokens of a model directory's tokenizer_config.json (no
// template when the file or its "chat_template" is missing). Throws axle::Error naming the file
// when it is not JSON or the template does not parse.
ChatFormat LoadChatFormat(const std::string& model_dir);

// Reads `path` (JSONL). Throws axle::Error naming the file and line for: a line that is not a
// JSON object, a record with neither "prompt" + "response" nor "messages", a field of the wrong
// type, a message role other than system, user or assistant, a record with no assistant message,
// a template that raises or whose rendering of a conversation's beginning is not the beginning
// of its rendering of the whole (then the response tokens cannot be told apart).
std::vector<Example> LoadInstructions(const std::string& path, const text::Tokenizer& tok,
                                      const ChatFormat& format = {});

// Rows of seq + 1 tokens (inputs, then targets shifted by one). Padded (pack false): one example a
// row, cut at seq + 1 tokens, the rest `pad_id` with target -100. Packed: as many whole examples
// as fit go into a row, each its own segment (positions restarting), the tail padding a segment
// of its own; an example longer than a row is cut. Step s reads rows [s B, s B + B), wrapping
// around, in file order.
class InstructionLoader : public BatchSource {
 public:
  InstructionLoader(const std::vector<Example>& examples, int64_t batch, int64_t seq, bool pack, int32_t pad_id,
                    std::string source);
  Batch GetRows(int64_t step, int64_t first_row, int64_t rows) const override;
  int64_t batch() const override { return batch_; }
  int64_t seq() const override { return seq_; }
  int64_t StepsPerEpoch() const override;
  bool packed() const override { return pack_; }
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  // Tokens whose prediction is trained, over all rows.
  int64_t trained_tokens() const { return trained_tokens_; }

 private:
  struct Row {
    std::vector<int32_t> tokens, positions, segments;  // seq + 1 each
    std::vector<uint8_t> trained;
  };
  int64_t batch_, seq_;
  bool pack_;
  std::vector<Row> rows_;
  int64_t trained_tokens_ = 0;
};

}  // namespace axle::train
