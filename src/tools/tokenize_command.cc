// axle tokenize --tokenizer DIR|FILE --input FILE.txt|FILE.jsonl --output FILE.bin
//               [--doc-token auto|none|TOKEN] [--format auto|uint16|uint32]
// Text to an llm.c token shard (src/train/tokenize.h).
#include <iostream>

#include "tools/commands.h"
#include "train/tokenize.h"

namespace axle::tools {

void AddTokenizeCommand(CLI::App& app, std::vector<std::pair<CLI::App*, CommandRunner>>& commands) {
  auto o = std::make_shared<train::TokenizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Tokenize text or JSONL with a model's tokenizer into an llm.c token shard (for train --data)");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json, tokenizer.model, or a model directory")->required();
  sub->add_option("--input", o->input, "A text file (one document) or .jsonl ({\"text\": ...} per line)")->required();
  sub->add_option("--output", o->output, "The .bin token shard to write")->required();
  sub->add_option("--doc-token", o->doc_token, "Token before each document: auto, none, or its text");
  sub->add_option("--format", o->format, "Shard ids: auto (uint32 above 65536 ids), uint16 or uint32")
      ->check(CLI::IsMember({"auto", "uint16", "uint32"}));
  commands.emplace_back(sub, [o] { train::TokenizeToShard(*o, std::cout); });
}

}  // namespace axle::tools
