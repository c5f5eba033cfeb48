// Instruction data: Axle's chat template and its loss mask, padded and packed rows, packing that
// computes each example as if alone (segment masks, restarting positions), and bad records.
#include "train/instruct.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "axle/nn.h"
#include "core/error.h"
#include "testing/error_of.h"

namespace axle::train {
namespace {

using ::testing::HasSubstr;

std::string Golden(const std::string& path) { return std::string(AXLE_SOURCE_DIR) + "/tests/" + path; }

using axle::testing::ErrorOf;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("axle_instruct_" + std::to_string(::getpid()) + "_" + name))
                               .string();
  std::ofstream(path) << text;
  return path;
}

TEST(Instructions, TheTemplateTrainsTheResponsesAndTheirEnd) {
  const auto tok = text::LoadTokenizer(Golden("text/goldens/bpe_llama3"));
  const std::string path = Write("a.jsonl", R"({"prompt": "2+2?", "response": "4"})" "\n");
  const std::vector<Example> ex = LoadInstructions(path, *tok);
  ASSERT_EQ(ex.size(), 1u);
  const int32_t bos = *tok->TokenId("<|begin_of_text|>"), eos = *tok->TokenId("<|eot_id|>");
  std::vector<int32_t> want = {bos};
  std::vector<uint8_t> trained = {0};
  auto add = [&](const std::string& text, bool t) {
    for (int32_t id : tok->Encode(text)) want.push_back(id), trained.push_back(t);
  };
  add("<|user|>\n", false);
  add("2+2?", false);
  want.push_back(eos), trained.push_back(0);
  add("\n", false);
  add("<|assistant|>\n", false);
  add("4", true);
  want.push_back(eos), trained.push_back(1);
  add("\n", false);
  EXPECT_EQ(ex[0].tokens, want);
  EXPECT_EQ(ex[0].trained, trained);
  EXPECT_EQ(tok->Decode(ex[0].tokens), "<|begin_of_text|><|user|>\n2+2?<|eot_id|>\n<|assistant|>\n4<|eot_id|>\n");
}

// A directory's own template (Llama 3's): the trained tokens are each assistant turn as the
// template writes it, the content and its <|eot_id|>; the bos_token text becomes its id.
TEST(Instructions, TheDirectorysTemplateTrainsEachAssistantTurn) {
  const auto tok = text::LoadTokenizer(Golden("text/goldens/bpe_llama3"));
  ChatFormat format;
  format.chat_template = text::ChatTemplate::Parse(
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
      "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
      "llama3");
  format.bos_token = "<|begin_of_text|>";
  format.eos_token = "<|eot_id|>";
  const std::string path = Write("t.jsonl", R"({"messages": [{"role": "system", "content": "Be brief."}, )"
                                            R"({"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, )"
                                            R"({"role": "user", "content": "2+2?"}, {"role": "assistant", "content": " 4 "}]})"
                                            "\n");
  const std::vector<Example> ex = LoadInstructions(path, *tok, format);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].tokens[0], *tok->TokenId("<|begin_of_text|>"));
  // The trained runs, decoded: each assistant turn's content (trimmed by the template) and <|eot_id|>.
  std::vector<std::string> runs;
  for (size_t i = 0; i < ex[0].tokens.size(); ++i) {
    if (!ex[0].trained[i]) continue;
    if (i == 0 || !ex[0].trained[i - 1]) runs.emplace_back();
    runs.back() += tok->Decode(std::vector<int32_t>{ex[0].tokens[i]});
  }
  EXPECT_EQ(runs, (std::vector<std::string>{"Hello!<|eot_id|>", "4<|eot_id|>"}));
  EXPECT_EQ(tok->Decode(ex[0].tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\n4<|eot_id|>");
}

TEST(Instructions, PaddedRowsMaskEverythingButResponses) {
  std::vector<Example> ex = {{{1, 2, 3, 4, 5}, {0, 0, 0, 1, 1}}, {{6, 7, 8}, {0, 1, 1}}};
  InstructionLoader padded(ex, 2, 6, /*pack=*/false, 0, "test");
  EXPECT_EQ(padded.rows(), 2);
  EXPECT_EQ(padded.trained_tokens(), 4);
  const Batch b = padded.Get(0);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{1, 2, 3, 4, 5, 0, 6, 7, 8, 0, 0, 0}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{-100, -100, 4, 5, -100, -100, 7, 8, -100, -100, -100, -100}));
  EXPECT_TRUE(b.positions.empty());
  // Packed: both in one row of 7 + 1, the second a segment of its own whose first target (the
  // first example's last token -> the second's first) is not trained.
  InstructionLoader packed(ex, 1, 8, /*pack=*/true, 0, "test");
  EXPECT_EQ(packed.rows(), 1);
  const Batch p = packed.Get(0);
  EXPECT_EQ(p.inputs, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(p.targets, (std::vector<int32_t>{-100, -100, 4, 5, -100, 7, 8, -100}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(p.segments, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1}));
}

// Packing changes nothing an example computes: the packed row's loss is the padded rows' loss,
// for Llama (rotary positions restart, GQA) and GPT-2 (learned positions restart).
void CheckPackingIsExact(const nn::CausalLM& model, int32_t vocab) {
  std::vector<Example> ex;
  for (int e = 0; e < 3; ++e) {
    Example x;
    for (int i = 0; i < 6 + 2 * e; ++i) {
      x.tokens.push_back((e * 31 + i * 7 + 3) % vocab);
      x.trained.push_back(i >= 3);
    }
    ex.push_back(x);
  }
  const int64_t T = 30;
  InstructionLoader padded(ex, 3, T, false, 0, "test"), packed(ex, 1, T, true, 0, "test");
  ASSERT_EQ(packed.rows(), 1);
  auto tensor = [](const std::vector<int32_t>& v, int64_t rows, int64_t t) {
    return from_vector<int32_t>(v, {rows, t}, DType::kI32);
  };
  const Batch a = padded.Get(0), b = packed.Get(0);
  const Tensor la = model.forward(tensor(a.inputs, 3, T), tensor(a.targets, 3, T));
  const Tensor lb = model.loss_packed(tensor(b.inputs, 1, T), tensor(b.targets, 1, T), tensor(b.positions, 1, T),
                                      tensor(b.segments, 1, T));
  sync();
  EXPECT_NEAR(lb.item(), la.item(), 2e-5 * std::abs(la.item()));
  // Without the segments (one document, positions running on) the loss differs: the mask matters.
  std::vector<int32_t> zeros(b.segments.size(), 0), running(b.positions.size());
  for (size_t i = 0; i < running.size(); ++i) running[i] = static_cast<int32_t>(i);
  const Tensor lc = model.loss_packed(tensor(b.inputs, 1, T), tensor(b.targets, 1, T), tensor(running, 1, T),
                                      tensor(zeros, 1, T));
  sync();
  EXPECT_GT(std::abs(lc.item() - la.item()), 1e-3);
}

TEST(Instructions, PackingIsExactForLlamaAndGpt2) {
  {
    SCOPED_TRACE("llama");
    CheckPackingIsExact(*nn::LoadCausalLM(Golden("nn/goldens/llama_mistral")), 96);
  }
  SCOPED_TRACE("gpt2");
  nn::GPT2 gpt(nn::GPT2Config::Preset("tiny"), 11);
  gpt.eval();
  CheckPackingIsExact(gpt, 256);
}

TEST(Instructions, BadRecordsNameTheFileLineAndField) {
  const auto tok = text::LoadTokenizer(Golden("text/goldens/bpe_gpt2"));
  std::string path = Write("b.jsonl", "{\"prompt\": \"a\", \"response\": \"b\"}\n[1, 2]\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }), HasSubstr(path + ":2: the line is not a JSON object"));
  path = Write("c.jsonl", "{\"prompt\": \"a\", \"answer\": \"b\"}\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }),
              HasSubstr(path + ":1: \"response\" must be a string (the record's keys: answer, prompt)"));
  path = Write("d.jsonl", "{\"text\": \"a\"}\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }), HasSubstr("neither \"prompt\" and \"response\" nor \"messages\""));
  path = Write("e.jsonl", R"({"messages": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}]})" "\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }), HasSubstr(path + ":1: messages[1] has role \"bot\""));
  path = Write("f.jsonl", R"({"messages": [{"role": "user", "content": "hi"}]})" "\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }), HasSubstr("no assistant message"));
  path = Write("g.jsonl", R"({"messages": [{"role": "user", "content": 3}]})" "\n");
  EXPECT_THAT(ErrorOf([&] { LoadInstructions(path, *tok); }), HasSubstr("messages[0] must be an object with string"));
  std::vector<Example> ex = {{{1, 2, 3, 4}, {0, 0, 0, 1}}};
  EXPECT_THAT(ErrorOf([&] { InstructionLoader(ex, 1, 2, false, 0, "x.jsonl"); }), HasSubstr("raise --seq"));
}

}  // namespace
}  // namespace axle::train
