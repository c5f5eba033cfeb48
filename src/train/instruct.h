// Instruction data: JSONL records of {"prompt", "response"} or {"messages": [...]}, rendered with a
// chat template, tokenized, and batched (padded or packed) with the loss on the responses only.
//
//   std::vector<Example> ex = LoadInstructions("chat.jsonl", *tokenizer);
//   InstructionLoader loader(ex, /*batch=*/4, /*seq=*/256, /*pack=*/true, pad_id);
//
// The template is Axle's fixed one (docs/models.md, "Instruction data"), the format of Zephyr and
// TinyLlama-Chat: for every message, "<|role|>\n", its content and the end-of-sequence token, then
// "\n"; a begin-of-sequence token first when the tokenizer has one. The trained tokens are each
// assistant message's content and its end-of-sequence token (so the model learns to stop): a
// target whose token is anything else is -100. Each piece of the template is tokenized on its
// own, so a piece never merges with its neighbour and the boundaries are exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"
#include "train/data.h"

namespace axle::train {

struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> trained;  // per token: 1 when predicting it counts in the loss
};

// Reads `path` (JSONL). Throws axle::Error naming the file and line for: a line that is not a
// JSON object, a record with neither "prompt" + "response" nor "messages", a field of the wrong
// type, a message role other than system, user or assistant, a record with no assistant message.
std::vector<Example> LoadInstructions(const std::string& path, const text::Tokenizer& tok);

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
