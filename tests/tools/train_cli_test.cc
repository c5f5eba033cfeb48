// `axle train` end to end: defaults train, and bad input exits 1 with a clear message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "axle/nn.h"
#include "run_axle.h"
#include "train/data.h"

namespace axle {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using testing::RunAxle;
using testing::RunResult;

class TrainCliTest : public testing::TempDirTest {
 protected:
  TrainCliTest() : TempDirTest("axle_train_cli") {}
};

// A short run: the loss falls, the log has every field, and only step 0 compiles.
TEST_F(TrainCliTest, TrainsAndLogsJsonWithoutRecompiling) {
  const std::string log = Path("log.jsonl");
  RunResult r = RunAxle("train --steps 40 --batch 8 --seq 32 --lr 3e-3 --warmup 5 --samples 1 "
                        "--sample-tokens 16 --no-progress --log-json " + log);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 0 | loss "));
  EXPECT_THAT(r.output, HasSubstr("--- sample 0 ---"));
  std::ifstream in(log);
  std::string line;
  std::vector<nlohmann::json> steps;
  while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(steps.size(), 40u);
  for (const char* key : {"step", "loss", "lr", "tokens_per_s", "step_s", "compile_s"})
    EXPECT_TRUE(steps[0].contains(key)) << key;
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i]["compile_s"].get<double>(), 0.0) << i;
  const double first = steps.front()["loss"], last = steps.back()["loss"];
  EXPECT_NEAR(first, std::log(256.0), 0.3);
  EXPECT_LT(last, first - 1.0);
}

// The persistent cache: a second process on the same cache directory compiles nothing; every
// executable comes from the disk (and the loss curve is the same).
TEST_F(TrainCliTest, SecondProcessOnAWarmCacheCompilesNothing) {
  const std::string args = "train --backend compiled --steps 3 --batch 4 --seq 16 --samples 1 "
                           "--sample-tokens 4 --no-progress";
  const std::string env = "AXLE_CACHE_DIR=" + Path("cache") + " ";
  RunResult cold = RunAxle(args, env);
  ASSERT_EQ(cold.status, 0) << cold.output;
  EXPECT_THAT(cold.output, HasSubstr("Metric: disk cache hits    0\n")) << cold.output;
  EXPECT_THAT(cold.output, ::testing::Not(HasSubstr("Metric: compiles           0\n"))) << cold.output;
  RunResult warm = RunAxle(args, env);
  ASSERT_EQ(warm.status, 0) << warm.output;
  EXPECT_THAT(warm.output, HasSubstr("Metric: compiles           0\n")) << warm.output;
  EXPECT_THAT(warm.output, ::testing::Not(HasSubstr("Metric: disk cache hits    0\n"))) << warm.output;
  // Note [A warm start skips the pipeline]: the optimized modules come from the cache too.
  EXPECT_THAT(cold.output, ::testing::Not(HasSubstr("Metric: passes run         0\n"))) << cold.output;
  EXPECT_THAT(warm.output, HasSubstr("Metric: passes run         0\n")) << warm.output;
  EXPECT_THAT(warm.output, HasSubstr(" from the disk cache, 0 passes run)")) << warm.output;
  auto losses = [](const std::string& out) {
    std::string s;
    for (size_t p = out.find("| loss "); p != std::string::npos; p = out.find("| loss ", p + 1))
      s += out.substr(p, 16) + ";";
    return s;
  };
  EXPECT_EQ(losses(cold.output), losses(warm.output));
}

TEST_F(TrainCliTest, BadInputExitsOneWithAClearMessage) {
  RunResult r = RunAxle("train --no-such-flag");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--no-such-flag"));

  r = RunAxle("train --steps 1 --data " + Path("missing.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("missing.bin"));

  r = RunAxle("train --steps 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--steps"));

  r = RunAxle("train --steps 1 --seq 4096");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("n_positions"));

  // A token id the tiny model's 256-entry vocabulary cannot embed.
  const std::string shard = Path("tokens.bin");
  train::WriteTokenShard(shard, std::vector<int32_t>{1, 2, 3, 300, 4, 5, 6, 7, 8, 9});
  r = RunAxle("train --steps 1 --batch 1 --seq 4 --data " + shard);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("300"));
  EXPECT_THAT(r.output, HasSubstr("vocab_size 256"));

  // A truncated safetensors file as --init.
  {
    std::ofstream f(Path("model.safetensors"), std::ios::binary);
    const uint64_t header_len = 200;
    f.write(reinterpret_cast<const char*>(&header_len), 8);
    f << "{\"wte.weight\": {";
  }
  r = RunAxle("train --steps 1 --init " + Path("model.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("model.safetensors"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("terminate")));

  // A config.json that disagrees with the weights (n_embd 32 against 64-wide tensors).
  {
    fs::create_directories(dir_ / "mismatch");
    nn::GPT2 tiny(nn::GPT2Config::Preset("tiny"), 1);
    nn::save_safetensors(tiny.state_dict(), Path("mismatch/model.safetensors"));
    std::ofstream(Path("mismatch/config.json"))
        << R"({"vocab_size": 256, "n_positions": 128, "n_embd": 32, "n_layer": 2, "n_head": 4})";
  }
  r = RunAxle("train --steps 1 --init " + Path("mismatch"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("wte.weight"));
  EXPECT_THAT(r.output, HasSubstr("[256,64]"));

  // The Llama family: an unknown model_type and a config missing a field name the file and the
  // field; --model must agree with the directory; the presets are the family's.
  {
    const std::string golden = std::string(AXLE_SOURCE_DIR) + "/tests/nn/goldens/llama_mistral";
    fs::create_directories(dir_ / "llama");
    fs::copy(golden, dir_ / "llama", fs::copy_options::overwrite_existing | fs::copy_options::recursive);
    std::ifstream in(golden + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["model_type"] = "t5";
    std::ofstream(Path("llama/config.json")) << config.dump();
    r = RunAxle("train --steps 1 --init " + Path("llama"));
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr(Path("llama/config.json")));
    EXPECT_THAT(r.output, HasSubstr("model_type \"t5\" is not a model Axle has"));
    config["model_type"] = "mistral";
    config.erase("num_hidden_layers");
    std::ofstream(Path("llama/config.json")) << config.dump();
    r = RunAxle("train --steps 1 --init " + Path("llama"));
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr(Path("llama/config.json")));
    EXPECT_THAT(r.output, HasSubstr("lacks \"num_hidden_layers\""));
    r = RunAxle("train --steps 1 --model gpt2 --init " + golden);
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr("holds a mistral model"));
    r = RunAxle("train --steps 1 --config bench");
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr("--config bench: the GPT-2 sizes are tiny, small, 124m"));
  }

  // Instruction data: a JSONL line that is not an object, a directory without a tokenizer, a
  // directory whose own chat template Axle cannot render.
  {
    nn::LlamaConfig c = nn::LlamaConfig::Preset("tiny");
    c.vocab_size = 2000;
    nn::Llama llama(c, 1);
    nn::SaveCausalLM(llama, Path("chat/model.safetensors"));
    std::ofstream(Path("chat.jsonl")) << R"({"prompt": "1+1?", "response": "2"})" << "\n"
                                      << R"({"messages": [{"role": "user", "content": "hi"}, )"
                                      << R"({"role": "assistant", "content": "hello"}]})" << "\n";
    std::ofstream(Path("bad.jsonl")) << R"({"prompt": "1+1?", "response": "2"})" << "\n" << "42\n";
    r = RunAxle("train --steps 1 --init " + Path("chat") + " --data " + Path("chat.jsonl"));
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr("needs the model's tokenizer"));
    fs::copy_file(std::string(AXLE_SOURCE_DIR) + "/tests/text/goldens/bpe_llama3/tokenizer.json",
                  Path("chat/tokenizer.json"));
    r = RunAxle("train --steps 1 --init " + Path("chat") + " --data " + Path("bad.jsonl"));
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr(Path("bad.jsonl") + ":2: the line is not a JSON object"));
    r = RunAxle("train --steps 3 --batch 1 --seq 64 --samples 0 --pack --init " + Path("chat") + " --data " +
                Path("chat.jsonl"));
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("instruction data: 2 examples in 1 packed rows of 65 tokens"));
    // The directory's own template (Qwen2's), and one whose renderings do not extend each other.
    std::ofstream(Path("chat/tokenizer_config.json"))
        << R"({"eos_token": "<|eot_id|>", "chat_template": "{% for message in messages %}{{'<|im_start|>' + )"
        << R"(message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if )"
        << R"(add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"})";
    r = RunAxle("train --steps 2 --batch 1 --seq 64 --samples 0 --init " + Path("chat") + " --data " + Path("chat.jsonl"));
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("the chat template of " + Path("chat") + "/tokenizer_config.json"));
    std::ofstream(Path("chat/tokenizer_config.json")) << R"({"chat_template": "{{ messages }}"})";
    r = RunAxle("train --steps 1 --init " + Path("chat") + " --data " + Path("chat.jsonl"));
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.output, HasSubstr(Path("chat.jsonl") + ":1: the chat template's rendering of the first 1 messages"));
    r = RunAxle("train --steps 1 --batch 1 --seq 64 --samples 0 --chat-template axle --init " + Path("chat") +
                " --data " + Path("chat.jsonl"));
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("Axle's chat template"));
  }

  r = RunAxle("train --steps 1 --init " + Path("model.safetensors") + " --config small");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("exclude each other"));

  // Note [Which BLAS] (backends/cpu/blas.cc): an unknown AXLE_BLAS, and AXLE_BLAS=mkl where MKL does not load.
  r = RunAxle("train --steps 1", "AXLE_BLAS=atlas ");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("AXLE_BLAS='atlas'"));
  EXPECT_THAT(r.output, HasSubstr("openblas"));
  r = RunAxle("train --steps 1", "AXLE_BLAS=mkl AXLE_MKL_LIBRARY=" + Path("no_libmkl_rt.so") + " ");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("no_libmkl_rt.so"));
  EXPECT_THAT(r.output, HasSubstr("pip install --no-deps mkl"));
  r = RunAxle("train --steps 1", "AXLE_BLAS=onednn AXLE_DNNL_LIBRARY=" + Path("no_libdnnl.so") + " ");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("no_libdnnl.so"));
  EXPECT_THAT(r.output, HasSubstr("apt-get install libdnnl2"));
}

// The header names the BLAS in use; AXLE_BLAS=openblas forces OpenBLAS, and auto with neither MKL
// nor oneDNN to load falls back to it and says why; with oneDNN, it names both libraries.
TEST_F(TrainCliTest, HeaderNamesTheBlas) {
  const std::string args = "train --steps 1 --batch 2 --seq 8 --samples 0 --no-progress";
  RunResult r = RunAxle(args, "AXLE_BLAS=openblas ");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("blas: openblas, OpenBLAS "));
  r = RunAxle(args, "AXLE_MKL_LIBRARY=" + Path("no_libmkl_rt.so") + " AXLE_DNNL_LIBRARY=" + Path("no_libdnnl.so") + " ");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("blas: openblas, OpenBLAS "));
  EXPECT_THAT(r.output, HasSubstr("(MKL not loaded: "));
  r = RunAxle(args, "AXLE_BLAS=onednn ");
  if (r.status == 0) {  // oneDNN loads here (Note [Products through oneDNN])
    EXPECT_THAT(r.output, HasSubstr("blas: onednn, oneDNN "));
    EXPECT_THAT(r.output, HasSubstr("else OpenBLAS "));
  } else {
    EXPECT_THAT(r.output, HasSubstr("apt-get install libdnnl2"));
  }
}

}  // namespace
}  // namespace axle
