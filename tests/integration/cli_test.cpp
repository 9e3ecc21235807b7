// The troupe command line as a user meets it: check, plugins list, version, exit codes.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

const std::string quickstart = std::string(TROUPE_SOURCE_DIR) + "/configs/quickstart.yaml";
const std::string pretrain_tiny = std::string(TROUPE_SOURCE_DIR) + "/configs/pretrain_tiny.yaml";
const std::string plugin_example = std::string(TROUPE_SOURCE_DIR) + "/configs/plugin_example.yaml";

TEST(Cli, CheckAcceptsAValidConfig) {
  auto r = troupe({"check", quickstart});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ok (app pretrain, 1 roles, 1 actors)"), std::string::npos) << r.out;
}

// Every config the project ships is one `troupe check` accepts, as a user would first run it.
// The chat chain's (configs/align/chat_*.yaml) name the model that docs/alignment.md makes
// first, runs/tiny-chat: HfChatChain (hf_finetune_test) launches them on a model of its own.
TEST(Cli, EveryShippedConfigChecks) {
  int checked = 0, model_made_first = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(TROUPE_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    if (read_file(entry.path().string()).find("model: {path: runs/tiny-chat") !=
        std::string::npos) {
      ++model_made_first;
      continue;
    }
    auto r = troupe({"check", entry.path().string()});
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
    ++checked;
  }
  EXPECT_GE(checked, 10);
  EXPECT_EQ(model_made_first, 3);
}

// The first `n` lines of the file `path`, each with its newline.
std::string lines_of(const std::string& path, int n) {
  std::ifstream in(path);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i)
    out += line + "\n";
  return out;
}

// `troupe data sft` writes an RLHF config's task as supervised examples, and
// configs/align/sft.yaml (shortened) fine-tunes on them: the held-out loss on the responses
// falls. A config without an rlhf section is refused, naming what to give.
TEST(Cli, DataSftWritesTheTasksExamplesAndTheSftConfigTrainsOnThem) {
  temp_dir dir;
  const std::string data = dir.file("data/digits.jsonl");
  process_result r =
      troupe({"data", "sft", std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml",
              "--examples", "2000", "--out", data});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["examples"], 2000);
  const auto lines = read_jsonl(data);
  ASSERT_EQ(lines.size(), 2000u);
  // "a,b:max,n=" and the next n numbers of the sequence modulo max, then the newline.
  const std::string prompt = lines[0]["prompt"], response = lines[0]["response"];
  ASSERT_EQ(prompt.back(), '=');
  ASSERT_EQ(response.back(), '\n');
  int a = 0, b = 0, max = 0, n = 0;
  ASSERT_EQ(std::sscanf(prompt.c_str(), "%d,%d:%d,%d=", &a, &b, &max, &n), 4) << prompt;
  std::string want;
  for (int k = 1, x = b; k <= n; ++k) {
    x = (x + (b - a)) % max;
    if (k > 1) want += ',';
    want += std::to_string((x + max) % max);
  }
  EXPECT_EQ(response, want + "\n") << prompt;

  // troupe check reads the data as the trainers will: what it holds, or what is wrong with it.
  const std::string sft_config = std::string(TROUPE_SOURCE_DIR) + "/configs/align/sft.yaml";
  r = troupe({"check", sft_config, "--set", "pretrain.data.path=" + data});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("data: sft, 1900 examples and 100 held out"), std::string::npos) << r.out;
  const std::string bad = dir.write("bad.jsonl", lines_of(data, 30) + "{\"prompt\": 7}\n");
  r = troupe({"check", sft_config, "--set", "pretrain.data.path=" + bad});
  EXPECT_NE(r.out.find("data: not readable now: " + bad + ":31: prompt is missing or not a string"),
            std::string::npos)
      << r.out;

  r = troupe({"launch", std::string(TROUPE_SOURCE_DIR) + "/configs/align/sft.yaml", "--run-dir",
              dir.file("sft"), "--set", "pretrain.data.path=" + data, "--set",
              "pretrain.train.steps=60", "--set", "pretrain.data.eval_every=20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> held_out;
  for (const auto& row : read_jsonl(dir.file("sft") + "/metrics.jsonl")) {
    if (row.contains("val_loss")) held_out.push_back(row["val_loss"]);
  }
  ASSERT_GE(held_out.size(), 2u);
  EXPECT_LT(held_out.back(), held_out.front());

  r = troupe({"data", "sft", std::string(TROUPE_SOURCE_DIR) + "/configs/quickstart.yaml", "--out",
              dir.file("x.jsonl")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has no rlhf section: name an RLHF config"), std::string::npos) << r.err;
}

// `troupe eval MODEL_DIR --text FILE`: a Hugging Face model (a random-weight Llama made by the
// PyTorch reference, over a vocabulary trained here) scored on a held-out text in f32 and with
// its block weights in int8 and int4; `troupe quantize` of it; each user error named.
TEST(Cli, EvalScoresPerplexityBeforeAndAfterQuantizeWritesTheModel) {
  temp_dir dir;
  const std::string model = dir.file("model");
  auto r = troupe(
      {"tokenizer", "train", "/usr/share/games/fortunes", "--vocab-size", "512", "--out", model},
      std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run({"/usr/bin/python3", TROUPE_SOURCE_DIR "/tests/models/hf/hf_reference_model.py", "make",
           "llama", model, "--vocab", "512", "--seed", "4"},
          std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err << " (python3-torch comes with scripts/setup.sh)";
  const std::string text = "/usr/share/common-licenses/GPL-3";

  r = troupe({"eval", model, "--text", text, "--max-tokens", "2000", "--window", "128"},
             std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["tokens"], 2000);
  EXPECT_EQ(summary["windows"], 16);        // 15 whole windows and one of 80 tokens
  EXPECT_EQ(summary["scored"], 2000 - 16);  // each window's first token is context only
  const double f32 = summary["perplexity"]["f32"], int8 = summary["perplexity"]["int8"],
               int4 = summary["perplexity"]["int4"];
  // Quantization moves a random model's perplexity a little, int4 more than int8.
  EXPECT_GT(f32, 1.0);
  EXPECT_NE(int8, f32);
  EXPECT_LT(std::abs(int8 / f32 - 1), 0.01) << r.out;
  EXPECT_LT(std::abs(int4 / f32 - 1), 0.05) << r.out;
  EXPECT_GT(std::abs(int4 / f32 - 1), std::abs(int8 / f32 - 1)) << r.out;
  EXPECT_EQ(summary["weights"]["int8"],
            "int8 per output channel, the output head int8 per output channel");
  EXPECT_NEAR(summary["increase"]["int8"].get<double>(), int8 / f32 - 1, 1e-9);

  // The same text scored alone, by --quantization none.
  r = troupe({"eval", model, "--text", text, "--max-tokens", "2000", "--window", "128",
              "--quantization", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["perplexity"], nlohmann::json({{"f32", f32}}));

  // `troupe quantize` writes a GPTQ checkpoint of the same int4 model: its perplexity is the one
  // eval gave int4 in groups of 32, to the bit; served as it is, not quantized again.
  const std::string gptq = dir.file("model-int4");
  r = troupe({"quantize", model, "--bits", "4", "--group-size", "32", "--out", gptq});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["weights"], "int4 in groups of 32 inputs");
  EXPECT_TRUE(std::filesystem::exists(gptq + "/tokenizer.json"));
  const auto grouped = nlohmann::json::parse(
      troupe({"eval", model, "--text", text, "--max-tokens", "2000", "--window", "128",
              "--quantization", "int4", "--group-size", "32"})
          .out);
  r = troupe({"eval", gptq, "--text", text, "--max-tokens", "2000", "--window", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["perplexity"],
            nlohmann::json({{"gptq", grouped["perplexity"]["int4"]}}));

  const auto fails = [&](std::vector<std::string> args, const std::string& says) {
    const auto bad = troupe(args);
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find(says), std::string::npos) << bad.err;
  };
  fails({"eval", model, "--text", dir.file("absent.txt")}, "cannot read --text");
  fails({"eval", dir.path().string(), "--text", text}, "is not a Hugging Face model directory");
  fails({"eval", model, "--text", text, "--quantization", "int3"},
        "--quantization int3: choose int8, int4 or none");
  fails({"eval", model, "--text", text, "--window", "4096"}, "it must be in [2, 256]");
  fails({"eval", model, "--text", text, "--quantization", "int4", "--group-size", "48"},
        "quantization group size 48");
  fails({"eval", quickstart}, "--policy is required (or --text");
  fails({"quantize", model, "--bits", "4", "--out", gptq}, "is not empty: choose a new directory");
  fails({"quantize", gptq, "--bits", "8", "--out", dir.file("again")}, "is already quantized");
  fails({"quantize", model, "--bits", "4", "--group-size", "48", "--out", dir.file("g48")},
        "quantization group size 48");
  fails({"quantize", dir.path().string(), "--out", dir.file("x")},
        "is not a Hugging Face model directory");
}

// A real vocabulary for pretraining from scratch: trained on the Debian fortunes, written as a
// tokenizer.json that loads back and encodes the corpus in fewer tokens than bytes.
TEST(Cli, TokenizerTrainWritesAHuggingFaceTokenizer) {
  temp_dir dir;
  const auto r =
      troupe({"tokenizer", "train", "/usr/share/games/fortunes", "--vocab-size", "800", "--special",
              "<|endoftext|>", "--special", "<|im_end|>", "--out", dir.file("tok")},
             std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["vocab_size"], 800);
  EXPECT_GT(summary["bytes_per_token"].get<double>(), 2.0);
  const auto tokenizer = nlohmann::json::parse(read_file(dir.file("tok") + "/tokenizer.json"));
  EXPECT_EQ(tokenizer["added_tokens"][1]["content"], "<|im_end|>");
  EXPECT_GE(tokenizer["model"]["merges"].size(), 800u - 2 - 256);  // one per new id, or more
  EXPECT_TRUE(std::filesystem::exists(dir.file("tok") + "/tokenizer_config.json"));

  const auto small = troupe({"tokenizer", "train", "/usr/share/games/fortunes", "--vocab-size",
                             "200", "--out", dir.file("small")});
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("--vocab-size 200 leaves no room for merges"), std::string::npos)
      << small.err;
  const auto missing = troupe({"tokenizer", "train", dir.file("absent"), "--out", dir.file("x")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no such file or directory"), std::string::npos) << missing.err;

  // A chat vocabulary's eos token and template are checked before any training.
  const auto chat = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"tokenizer", "train", "/usr/share/games/fortunes", "--special",
                               "<|endoftext|>", "--special", "<|im_end|>"});
    args.insert(args.end(), {"--out", dir.file("chat")});
    const auto r = troupe(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("chat")));
    return r.err;
  };
  EXPECT_NE(chat({"--eos", "</s>"})
                .find("--eos: the eos token '</s>' is not one of the special tokens "
                      "(<|endoftext|>, <|im_end|>)"),
            std::string::npos);
  const std::string chatml = TROUPE_SOURCE_DIR "/configs/chat/chatml.jinja";
  EXPECT_NE(chat({"--chat-template", chatml})
                .find("an assistant's reply is not followed by the eos token '<|endoftext|>'"),
            std::string::npos);
  EXPECT_NE(chat({"--chat-template", dir.file("absent.jinja")}).find("cannot read"),
            std::string::npos);
  EXPECT_NE(chat({"--chat-template", dir.write("bad.jinja", "{% for m in messages %}")})
                .find("bad.jinja"),
            std::string::npos);
}

// `troupe serve DIR` and `model.path` check the directory before any process starts: each
// missing or contradicting part is named, with exit 2.
TEST(Cli, ServeChecksTheModelDirectoryFirst) {
  temp_dir dir;
  const auto missing = troupe({"serve", dir.file("absent")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "troupe serve: " + dir.file("absent") +
                             " has no config.json: it is not a Hugging Face model directory\n");
  // A config.json without its tokenizer.
  dir.write("model/config.json",
            R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 300, "hidden_size": 64,
                "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
                "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "hidden_act": "silu"})");
  const auto untokenized = troupe({"serve", dir.file("model"), "--max-model-len", "64"});
  EXPECT_EQ(untokenized.exit_code, 2);
  EXPECT_NE(untokenized.err.find("tokenizer.json is absent"), std::string::npos) << untokenized.err;
  const auto too_long = troupe({"serve", dir.file("model"), "--max-model-len", "4096"});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.err.find("model.ctx 4096 is longer than"), std::string::npos) << too_long.err;
  const std::string config =
      dir.write("serve.yaml", "app: serve\nmodel: {path: " + dir.file("model") +
                                  ", layers: 2}\nroles: {worker: {kind: inference_worker, impl: "
                                  "gpt}}\n");
  const auto shaped = troupe({"check", config});
  EXPECT_EQ(shaped.exit_code, 2);
  EXPECT_NE(shaped.err.find("model.layers cannot be set with model.path"), std::string::npos)
      << shaped.err;
  // The training apps check it alike.
  const auto pretrain = troupe({"check", TROUPE_SOURCE_DIR "/configs/pretrain_tiny.yaml", "--set",
                                "model={path: " + dir.file("model") + "}"});
  EXPECT_EQ(pretrain.exit_code, 2);
  EXPECT_NE(
      pretrain.err.find("pretrain: model.path: " + dir.file("model") + "/tokenizer.json is absent"),
      std::string::npos)
      << pretrain.err;
}

// Speculative decoding's settings are checked before anything starts, each refusal saying
// which key and what to do; `troupe serve --speculative-config` takes a JSON object only.
TEST(Cli, CheckExplainsSpeculativeConfigMistakes) {
  const std::string serve = TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml";
  auto r = troupe(
      {"check", serve, "--set", "serve.engine.speculative_config={num_speculative_tokens: 4}"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = troupe({"check", serve, "--set", "serve.engine.batching=static", "--set",
              "serve.engine.speculative_config={num_speculative_tokens: 4}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("speculative_config.num_speculative_tokens needs batching: continuous"),
            std::string::npos)
      << r.err;
  r = troupe({"check", serve, "--set",
              "serve.engine.speculative_config={prompt_lookup_min: 5, prompt_lookup_max: 3}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("prompt_lookup_min (5) is over prompt_lookup_max (3)"), std::string::npos)
      << r.err;
  r = troupe({"check", serve, "--set", "serve.engine.speculative_config={method: eagle}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("serve.engine.speculative_config.method"), std::string::npos) << r.err;
  r = troupe({"check", serve, "--set",
              "serve.engine.speculative_config={method: draft_model, num_speculative_tokens: 3}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("method draft_model needs model"), std::string::npos) << r.err;
  // A draft model of another vocabulary than the served one's 256 tokens.
  temp_dir dir;
  dir.write("draft/config.json",
            R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 300, "hidden_size": 64,
                "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
                "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "hidden_act": "silu"})");
  r = troupe({"check", serve, "--set",
              "serve.engine.speculative_config={method: draft_model, num_speculative_tokens: 3, "
              "model: " +
                  dir.file("draft") + "}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has a vocabulary of 300 tokens and the served model 256; a draft model "
                       "must share the served model's tokenizer"),
            std::string::npos)
      << r.err;
  r = troupe({"serve", "anywhere", "--speculative-config", "ngram"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--speculative-config is not a JSON object"), std::string::npos) << r.err;
}

// A Llama to pretrain: its tensor-parallel split and its tokenizer are checked before any
// process starts, each refusal naming the numbers or the file.
TEST(Cli, CheckRefusesALlamaThatCannotTrain) {
  temp_dir dir;
  const auto split = troupe({"check", TROUPE_SOURCE_DIR "/configs/pretrain_tiny.yaml", "--set",
                             "model={arch: llama, heads: 4, kv_heads: 1}", "--set",
                             "pretrain.parallel.tp=2", "--set", "roles.trainer.count=2"});
  EXPECT_EQ(split.exit_code, 2);
  EXPECT_NE(split.err.find("pretrain.parallel.tp: is 2, but model.kv_heads 1 do not split evenly "
                           "over 2 tensor-parallel ranks"),
            std::string::npos)
      << split.err;
  const std::string llama = TROUPE_SOURCE_DIR "/configs/quickstart_llama.yaml";
  const auto absent = troupe({"check", llama, "--set", "pretrain.data.tokenizer=" + dir.file("no"),
                              "--set", "pretrain.data.train_tokenizer=false"});
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_NE(absent.err.find("data.tokenizer: " + dir.file("no") +
                            "/tokenizer.json does not exist; train one"),
            std::string::npos)
      << absent.err;
  ASSERT_EQ(troupe({"tokenizer", "train", "/usr/share/games/fortunes", "--vocab-size", "300",
                    "--out", dir.file("tok")})
                .exit_code,
            0);
  const auto small = troupe({"check", llama, "--set", "pretrain.data.tokenizer=" + dir.file("tok"),
                             "--set", "model.vocab=280"});
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("tokenizer.json has 300 ids, more than model.vocab 280"),
            std::string::npos)
      << small.err;
  EXPECT_EQ(troupe({"check", llama, "--set", "pretrain.data.tokenizer=" + dir.file("tok"), "--set",
                    "model.vocab=300"})
                .exit_code,
            0);
}

TEST(Cli, CheckRejectsABrokenConfigWithExitTwo) {
  temp_dir dir;
  const std::string path = dir.write("broken.yaml",
                                     "app: pipeline\n"
                                     "roles:\n"
                                     "  src: {kind: source, impl: text, cuont: 2}\n");
  auto r = troupe({"check", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":3:35: roles.src.cuont: unknown key 'cuont'. Did you mean 'count'?"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("is not valid"), std::string::npos);
}

TEST(Cli, CheckAppliesSetOverrides) {
  auto r = troupe({"check", plugin_example, "--set", "roles.rotate.count=5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("7 actors"), std::string::npos) << r.out;
  r = troupe({"check", plugin_example, "--set", "roles.rotate.options.shift=99"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--set roles.rotate.options.shift=99: roles.rotate.options.shift: must be "
                       "between 1 and 25, got 99"),
            std::string::npos)
      << r.err;
}

TEST(Cli, CheckExplainsPretrainShapeMistakes) {
  auto r = troupe({"check", pretrain_tiny, "--set", "pretrain.parallel.dp=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretrain.parallel.dp: is 3 but roles.trainer.count is 1"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("pretrain.train.batch: is 16, not a multiple of parallel.dp 3"),
            std::string::npos)
      << r.err;
  r = troupe({"check", quickstart, "--set", "model.vocab=512"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model.vocab must be 256, not 512"), std::string::npos) << r.err;
}

// An elastic trainer role: the world follows the trainers, so dp is not set, shard replicas
// need sharded optimizer state, and every rank of the largest world needs a sequence.
TEST(Cli, CheckExplainsElasticPretrainMistakes) {
  const std::string elastic = std::string(TROUPE_SOURCE_DIR) + "/configs/pretrain_elastic.yaml";
  EXPECT_EQ(troupe({"check", elastic}).exit_code, 0);
  EXPECT_EQ(troupe({"check", elastic, "--set", "pretrain.parallel.zero=1", "--set",
                    "pretrain.parallel.shard_replicas=1"})
                .exit_code,
            0);
  auto r = troupe({"check", elastic, "--set", "pretrain.parallel.dp=2", "--set",
                   "pretrain.parallel.shard_replicas=1", "--set", "pretrain.train.batch=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretrain.parallel.dp: is 2, but roles.trainer.elastic makes the "
                       "data-parallel world the trainers that are alive"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("pretrain.parallel.shard_replicas: is 1, but with parallel.zero 0 every "
                       "rank holds the whole optimizer state already"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("pretrain.train.batch: is 3, but roles.trainer.elastic.max 4 ranks each "
                       "need a sequence of every step"),
            std::string::npos)
      << r.err;
}

// A pipeline's shape: troupe check shows the grid, each trainer's blocks and memory, and
// explains a grid that does not fit.
TEST(Cli, CheckShowsThePipelineGridAndExplainsItsMistakes) {
  const std::string pipeline = std::string(TROUPE_SOURCE_DIR) + "/configs/pretrain_pipeline.yaml";
  auto r = troupe({"check", pipeline});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"grid: dp 1 x pp 2; each replica's 8 sequences in 4 micro-batches, schedule 1f1b",
        "trainer/0: replica 0, stage 0: blocks 0-3, the embeddings; parameters",
        "trainer/1: replica 0, stage 1: blocks 4-7, the final norm and the head (a copy of the "
        "tied embedding); parameters"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  // The same with two tensor-parallel ranks a stage: four trainers, each with half the heads.
  r = troupe(
      {"check", pipeline, "--set", "pretrain.parallel.tp=2", "--set", "roles.trainer.count=4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"grid: dp 1 x pp 2 x tp 2; each replica's 8 sequences in 4 micro-batches, schedule 1f1b",
        "trainer/1: replica 0, stage 0, tp rank 1: blocks 0-3 (heads 4-7 of 8 and their share of "
        "the MLP), the embeddings (vocabulary 128-255); parameters",
        "trainer/2: replica 0, stage 1, tp rank 0: blocks 4-7 (heads 0-3 of 8",
        "the final norm and the head (a copy of the tied embedding) (vocabulary 0-127)"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  r = troupe({"check", pipeline, "--set", "pretrain.parallel.pp=3", "--set",
              "pretrain.parallel.tp=3", "--set", "pretrain.parallel.micro_batches=3", "--set",
              "pretrain.train.micro_batch=2", "--set", "pretrain.parallel.schedule=zb1", "--set",
              "pretrain.parallel.activation_checkpointing=blocks"});
  EXPECT_EQ(r.exit_code, 2);
  for (const char* error :
       {"pretrain.parallel.dp: is 1 and parallel.pp is 3 and tp 3, but roles.trainer.count is 2: "
        "the grid is dp x pp x tp trainer actors; set the count to 9",
        "pretrain.parallel.tp: is 3, but model.heads 8 do not split evenly over 3 tensor-parallel "
        "ranks",
        "pretrain.parallel.pp: is 3, but model.layers 8 do not split evenly over 3 stages",
        "pretrain.parallel.micro_batches: is 3, but each replica's share of a step is 8 "
        "sequences (train.batch 8 over dp 1), which it does not divide",
        "pretrain.train.micro_batch: is 2, but a pipeline's (or tensor-parallel) passes are its "
        "micro-batches",
        "pretrain.parallel.schedule: is zb1, which defers each weight gradient",
        "parallel.activation_checkpointing blocks frees them: use schedule 1f1b with "
        "checkpointing, or none"}) {
    EXPECT_NE(r.err.find(error), std::string::npos) << error << "\n" << r.err;
  }
  // Each tensor-parallel rank holds a block of the vocabulary: 256 bytes do not split over 3.
  r = troupe({"check", pipeline, "--set", "model.dim=192", "--set", "model.heads=6", "--set",
              "pretrain.parallel.tp=3", "--set", "roles.trainer.count=6"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretrain.parallel.tp: is 3, but model.vocab 256 does not split evenly "
                       "over 3 tensor-parallel ranks"),
            std::string::npos)
      << r.err;
  // ZeRO-3 shards a whole model over a fixed data-parallel group: the grid's and every_k's
  // mistakes, and its check line.
  r = troupe({"check", pipeline, "--set", "pretrain.parallel.zero=3", "--set",
              "pretrain.parallel.activation_checkpointing=every_k"});
  EXPECT_EQ(r.exit_code, 2);
  for (const char* error :
       {"pretrain.parallel.zero: is 3, but parallel.pp is 2 and tp 1: ZeRO-3 shards a whole "
        "model's parameters over the data-parallel group",
        "pretrain.parallel.zero: is 3, which gathers one block at a time, but "
        "activation_checkpointing every_k recomputes several at once; use blocks"}) {
    EXPECT_NE(r.err.find(error), std::string::npos) << error << "\n" << r.err;
  }
  const std::vector<std::string> zero3 = {"check", pipeline,
                                          "--set", "pretrain.parallel.zero=3",
                                          "--set", "pretrain.parallel.pp=1",
                                          "--set", "pretrain.parallel.dp=2",
                                          "--set", "pretrain.parallel.micro_batches=1",
                                          "--set", "pretrain.parallel.schedule=1f1b"};
  std::vector<std::string> odd_passes = zero3;
  odd_passes.insert(odd_passes.end(), {"--set", "pretrain.train.micro_batch=3"});
  r = troupe(odd_passes);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretrain.train.micro_batch: is 3, but with parallel.zero 3 it must divide "
                       "each rank's 4 sequences"),
            std::string::npos)
      << r.err;
  r = troupe(zero3);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("grid: dp 2 (zero 3); each rank holds its shard of every block, the whole "
                       "block only while it runs"),
            std::string::npos)
      << r.out;
  temp_dir dir;
  const std::string elastic =
      dir.write("elastic.yaml",
                "app: pretrain\n"
                "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                "roles: {trainer: {kind: trainer, impl: gpt, elastic: {min: 1, max: 2}}}\n"
                "pretrain: {parallel: {pp: 2}}\n");
  r = troupe({"check", elastic});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("roles.trainer.elastic regroups the data-parallel dimension only"),
            std::string::npos)
      << r.err;
}

TEST(Cli, ShardReplicasNeedAnElasticTrainerRole) {
  auto r = troupe({"check", pretrain_tiny, "--set", "pretrain.parallel.zero=1", "--set",
                   "pretrain.parallel.shard_replicas=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretrain.parallel.shard_replicas: is 1, but the trainer group is fixed"),
            std::string::npos)
      << r.err;
}

TEST(Cli, ResumeNeedsAnAppThatCheckpoints) {
  temp_dir dir;
  auto r = troupe({"launch", plugin_example, "--resume", dir.path().string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume: app 'pipeline' cannot resume"), std::string::npos) << r.err;
  r = troupe({"launch", quickstart, "--resume", dir.file("missing")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no such directory"), std::string::npos) << r.err;
}

TEST(Cli, MissingConfigFile) {
  auto r = troupe({"check", "/no/such/config.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/such/config.yaml: cannot read the config file"), std::string::npos);
}

TEST(Cli, PluginsListShowsRolesAndWhereTheyCameFrom) {
  auto r = troupe({"plugins", "list", "--json"});
  // The test plugin directory holds two deliberately broken plugins: they are reported.
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto out = nlohmann::json::parse(r.out);
  bool caesar = false, text = false;
  for (const auto& role : out["roles"]) {
    if (role["kind"] == "stage" && role["name"] == "caesar") {
      caesar = true;
      EXPECT_NE(role["origin"].get<std::string>().find("plugins/troupe_plugin_example.so"),
                std::string::npos);
      EXPECT_EQ(role["options"][0]["key"], "shift");
    }
    if (role["kind"] == "source" && role["name"] == "text") {
      text = true;
      EXPECT_EQ(role["origin"], "built-in");
    }
  }
  EXPECT_TRUE(caesar && text) << r.out;
  std::vector<std::string> loaded;
  for (const auto& p : out["plugins"])
    loaded.push_back(p["name"]);
  EXPECT_EQ(loaded, (std::vector<std::string>{"example", "faulty", "reward_example"}));
  ASSERT_EQ(out["errors"].size(), 2u);
  EXPECT_NE(out["errors"][0].get<std::string>().find("plugin ABI mismatch"), std::string::npos);

  auto text_listing = troupe({"plugins", "list"});
  EXPECT_NE(text_listing.out.find("stage/caesar"), std::string::npos) << text_listing.out;
}

TEST(Cli, VersionReportsBuildAndDevices) {
  auto r = troupe({"version", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v["caf"], "0.17.6");
  EXPECT_TRUE(v.contains("cuda_compiled"));
  EXPECT_TRUE(v["cuda_devices"].is_array());
  EXPECT_EQ(v["blas"].get<std::string>().rfind("OpenBLAS", 0), 0u) << v["blas"];
  // NCCL's version where CUDA is compiled in, "none" otherwise.
  EXPECT_EQ(v["nccl"] == "none", !v["cuda_compiled"].get<bool>()) << v["nccl"];
}

// `--check` only looks (dpkg-query, no apt): on a set-up machine it finds everything.
TEST(SetupScript, CheckFindsEverythingInstalled) {
  auto r = run({"/bin/bash", std::string(TROUPE_SOURCE_DIR) + "/scripts/setup.sh", "--check"},
               std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("packages present"), std::string::npos) << r.out;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(troupe({}).exit_code, 2);
  EXPECT_EQ(troupe({"launch"}).exit_code, 2);
  EXPECT_EQ(troupe({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(troupe({"worker", "--resources", "bogus=1"}).exit_code, 2);
  EXPECT_EQ(troupe({"--help"}).exit_code, 0);
}

}  // namespace
}  // namespace troupe::testing
