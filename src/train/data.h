// Training data: token streams read from llm.c token shards or from plain text, and the batch
// order `axle train` feeds them to the model in.
//
// The shard format is llm.c's (karpathy/llm.c, dev/data/data_common.py write_datafile and
// llmc/dataloader.h): a header of 256 little-endian int32 values, header[0] = the magic,
// header[1] = the version, header[2] = the token count; then `count` little-endian token ids and
// nothing else. Two kinds: GPT-2's (magic 20240520, version 1, uint16 ids) and Llama 3's (magic
// 20240801, version 7, uint32 ids, for vocabularies over 65536). Using that format means shards
// prepared for llm.c (e.g. TinyShakespeare, FineWeb) train here unchanged.
//
// Any other file is text: its bytes are the tokens (vocab 256). That is what `axle train` uses for
// a byte-level model, which needs no tokenizer.
//
// The batch order is llm.c's too, so a loss curve can be compared step by step with a reference
// trainer (scripts/gpt2_reference.py) that reads the same tokens in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace axle::train {

// llm.c's shard header constants: GPT-2's uint16 shards and Llama 3's uint32 ones.
inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr int kShardHeaderInts = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

// A token stream and where it came from.
struct TokenData {
  std::vector<int32_t> tokens;
  // The vocabulary size the source implies: 256 for text (bytes), 65536 for a uint16 shard (the
  // largest uint16 + 1; the real vocabulary, e.g. GPT-2's 50257, is the model's, checked by
  // CheckVocab), 2^31 for a uint32 one.
  int64_t vocab_hint = 0;
  // The path it was read from, for error messages.
  std::string source;
};

// Reads `path`: an llm.c token shard when the name ends in ".bin", else a text file whose bytes
// are the tokens. Throws axle::Error naming the path and saying what to do for: a missing or
// unreadable file; a shard shorter than its header, with a wrong magic or version, whose token
// count disagrees with the file size (truncated, or trailing bytes) or that holds no tokens; an
// empty text file.
TokenData LoadTokens(const std::string& path);

// Throws axle::Error for the first token id that is not in [0, vocab_size), naming `source`, the
// token's position and value and the vocab size.
void CheckVocab(std::span<const int32_t> tokens, int64_t vocab_size, const std::string& source);

// Writes `tokens` to `path` as an llm.c shard (see the top of this file): uint16 (GPT-2's header)
// unless `uint32` (Llama 3's). Throws axle::Error for a negative token, one over 65535 in a
// uint16 shard, and when the file cannot be written.
void WriteTokenShard(const std::string& path, std::span<const int32_t> tokens, bool uint32 = false);

// One training batch, row-major [batch, seq]: targets[i] is the token after inputs[i], or -100
// where the loss leaves it out (instruction data's prompts, padding). Packed rows (several
// documents to a row) also carry each token's position in its document and its document's
// number (CausalLM::forward_packed); other batches leave them empty.
struct Batch {
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
  std::vector<int32_t> positions;
  std::vector<int32_t> segments;
};

// What the trainer reads batches from: a token stream (BatchLoader) or instruction examples
// (InstructionLoader, instruct.h). A step's batch depends on the step number alone.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The batch of step `step` (>= 0).
  Batch Get(int64_t step) const { return GetRows(step, 0, batch()); }
  // Rows [first_row, first_row + rows) of that batch: the slice one device of a batch-sharded
  // mesh loads (sharded data loading). Throws axle::Error when the rows are not in the batch.
  virtual Batch GetRows(int64_t step, int64_t first_row, int64_t rows) const = 0;
  virtual int64_t batch() const = 0;
  virtual int64_t seq() const = 0;
  // The number of steps that read all the data once (at least 1).
  virtual int64_t StepsPerEpoch() const = 0;
  // Whether batches are packed rows (positions and segments filled).
  virtual bool packed() const { return false; }
};

// llm.c's batch order: step s reads the batch*seq + 1 tokens starting at s*batch*seq. Unlike
// llm.c (which moves to the next shard or back to 0 when a batch would run past the end), reads
// wrap around the stream: token j of step s is tokens[(s*batch*seq + j) % n]. So every step's
// data is determined by the step number alone (a resumed run sees the same batches) and a stream
// shorter than one batch still trains. The reference trainer reads the same way.
class BatchLoader : public BatchSource {
 public:
  // Throws axle::Error when batch or seq is not positive or the stream has fewer than 2 tokens
  // (a single token has no next token to predict). Keeps a reference to `tokens`.
  BatchLoader(const std::vector<int32_t>& tokens, int64_t batch, int64_t seq,
              std::string source = "<tokens>");

  Batch GetRows(int64_t step, int64_t first_row, int64_t rows) const override;
  int64_t batch() const override { return batch_; }
  int64_t seq() const override { return seq_; }
  // The number of steps that read each token once (at least 1).
  int64_t StepsPerEpoch() const override;

 private:
  const std::vector<int32_t>& tokens_;
  int64_t batch_;
  int64_t seq_;
  std::string source_;
};

}  // namespace axle::train
