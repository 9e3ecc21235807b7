#include "apps/serve/openai_api.hpp"

#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"

namespace troupe::apps {
namespace {

const api_limits limits{"troupe-tiny", 32, 16};

completion_call ok(const std::string& body, bool chat = false, const api_limits& l = limits) {
  auto r = parse_completion(body, l, chat);
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << body << " -> " << e->message;
    return {};
  }
  return std::get<completion_call>(r);
}

api_error refused(const std::string& body, bool chat = false) {
  auto r = parse_completion(body, limits, chat);
  if (auto* e = std::get_if<api_error>(&r)) return *e;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

TEST(OpenAiApi, ParsesCompletionsWithEveryOption) {
  const auto c = ok(R"({"model": "troupe-tiny", "prompt": "Hi", "max_tokens": 5, "temperature":
    0.5, "top_p": 0.9, "top_k": 20, "seed": 42, "stop": ["\n"], "stream": true, "n": 1})");
  EXPECT_EQ(c.prompts, (std::vector<std::vector<int32_t>>{{'H', 'i'}}));
  EXPECT_EQ(c.request.max_tokens, 5);
  EXPECT_FLOAT_EQ(c.request.temperature, 0.5f);
  EXPECT_FLOAT_EQ(c.request.top_p, 0.9f);
  EXPECT_EQ(c.request.top_k, 20);
  EXPECT_EQ(c.request.seed, 42u);
  EXPECT_EQ(c.request.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(c.stream);
  EXPECT_FALSE(c.request.include_stop_str_in_output);
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": "x"})").request.max_tokens, 16);
  EXPECT_TRUE(ok(R"({"model": "troupe-tiny", "prompt": "x", "include_stop_str_in_output": true})")
                  .request.include_stop_str_in_output);
}

// vLLM's stop_token_ids and ignore_eos: the model's end-of-sequence tokens stop every request
// unless it ignores them.
TEST(OpenAiApi, StopTokensAndTheModelsEndOfSequence) {
  api_limits with_eos = limits;
  with_eos.stop_token_ids = {3};
  EXPECT_EQ(
      ok(R"({"model": "troupe-tiny", "prompt": "x"})", false, with_eos).request.stop_token_ids,
      std::vector<int32_t>{3});
  EXPECT_EQ(
      ok(R"({"model": "troupe-tiny", "prompt": "x", "stop_token_ids": [10, 11]})", false, with_eos)
          .request.stop_token_ids,
      (std::vector<int32_t>{10, 11, 3}));
  EXPECT_TRUE(ok(R"({"model": "troupe-tiny", "prompt": "x", "ignore_eos": true})", false, with_eos)
                  .request.stop_token_ids.empty());
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "stop_token_ids": [256]})").message,
            "'stop_token_ids'[0] must be a token id from 0 to 255, not 256");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "stop_token_ids": 5})").message,
            "'stop_token_ids' must be a list of ids");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "ignore_eos": 1})").message,
            "'ignore_eos' must be true or false");
}

// A token may hold text before the stop string that ended the output: the text is cut there,
// unless the stop string is to stay.
TEST(OpenAiApi, TheTextIsCutWhereTheStopStringBegins) {
  completion_call call = ok(R"({"model": "troupe-tiny", "prompt": "x", "stop": ["\n\n", "END"]})");
  EXPECT_EQ(cut_at_stop("one\n\ntwo", call, actor::finish_reason::stop), "one");
  EXPECT_EQ(cut_at_stop("oneEND\n\n", call, actor::finish_reason::stop), "one");
  EXPECT_EQ(cut_at_stop("one\n", call, actor::finish_reason::stop), "one\n");
  EXPECT_EQ(cut_at_stop("one\n\ntwo", call, actor::finish_reason::length), "one\n\ntwo");
  call.request.include_stop_str_in_output = true;
  EXPECT_EQ(cut_at_stop("one\n\ntwo", call, actor::finish_reason::stop), "one\n\ntwo");
}

TEST(OpenAiApi, ChatMessagesBecomeOneTemplatedPrompt) {
  const auto c = ok(R"({"model": "troupe-tiny", "messages": [{"role": "system", "content":
                     "Be brief."}, {"role": "user", "content": "Hi"}]})",
                    true, {"troupe-tiny", 128, 16});
  std::string prompt;
  for (int32_t t : c.prompts.at(0))
    prompt.push_back(static_cast<char>(t));
  EXPECT_EQ(prompt, "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
  EXPECT_TRUE(c.chat);
}

TEST(OpenAiApi, RefusesBadRequestsWithTheRightStatus) {
  EXPECT_EQ(refused("{not json").http_status, 400);
  EXPECT_EQ(refused(R"([1])").http_status, 400);
  auto e = refused(R"({"model": "troupe-tiny", "prompt": "x", "temprature": 1})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_NE(e.message.find("unknown field 'temprature'"), std::string::npos);
  // An OpenAI field the server does not take is named as such, with what to do instead.
  e = refused(R"({"model": "troupe-tiny", "prompt": "x", "best_of": 3})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.message, "'best_of' is not supported: ask for n choices and pick among them");
  e = refused(R"({"model": "troupe-tiny", "prompt": "x", "include_stop_str_in_output": 1})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_NE(e.message.find("'include_stop_str_in_output' must be true or false"),
            std::string::npos);
  e = refused(R"({"model": "gpt-4", "prompt": "x"})");
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  e = refused(R"({"model": "troupe-tiny", "prompt": ")" + std::string(40, 'a') + R"("})");
  EXPECT_EQ(e.http_status, 413);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "temperature": 3})").http_status,
            400);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "max_tokens": 0})").http_status,
            400);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "n": 17})").http_status, 400);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": ""})").http_status, 400);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "stream": "yes"})").http_status,
            400);
  EXPECT_EQ(
      refused(R"({"model": "troupe-tiny", "messages": [{"role": "robot", "content": "x"}]})", true)
          .http_status,
      400);
  const auto body = nlohmann::json::parse(error_body(e));
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"].contains("message"));
}

choice_output output_of(const std::string& text, actor::finish_reason reason) {
  choice_output c;
  c.tokens.assign(text.begin(), text.end());
  c.reason = reason;
  return c;
}

TEST(OpenAiApi, RendersResponsesAndStreamChunks) {
  const auto done = actor::finish_reason::stop;
  completion_call call;
  call.prompts = {{'h', 'i'}};
  auto body = nlohmann::json::parse(
      completion_body("cmpl-1", limits, 1700000000, call, {output_of("Hello", done)}));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  completion_call chat;
  chat.chat = true;
  chat.prompts = call.prompts;
  body = nlohmann::json::parse(completion_body("chatcmpl-1", limits, 1, chat,
                                               {output_of("Hi", actor::finish_reason::length)}));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");

  const std::string chunk =
      stream_chunk("cmpl-1", limits, 1, call, 0, "He", output_of("He", done), nullptr);
  ASSERT_EQ(chunk.rfind("data: ", 0), 0u);
  ASSERT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  const auto parsed = nlohmann::json::parse(chunk.substr(6));
  EXPECT_EQ(parsed["choices"][0]["text"], "He");
  EXPECT_TRUE(parsed["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(stream_done(), "data: [DONE]\n\n");
  // Stray bytes from a byte-level model still make valid JSON.
  EXPECT_NO_THROW(nlohmann::json::parse(
      stream_chunk("c", limits, 1, chat, 0, std::string("\xff\xfe", 2), {}, &done).substr(6)));
}

// n choices and log-probs: completions' logprobs is the number of alternatives, chat's a bool
// with top_logprobs; the bodies carry OpenAI's shapes.
TEST(OpenAiApi, ChoicesAndLogProbs) {
  auto parsed = parse_completion(
      R"({"model": "troupe-tiny", "prompt": "x", "n": 3, "logprobs": 2})", limits, false);
  ASSERT_TRUE(std::holds_alternative<completion_call>(parsed));
  completion_call call = std::get<completion_call>(parsed);
  EXPECT_EQ(call.n, 3);
  EXPECT_TRUE(call.logprobs);
  EXPECT_EQ(call.request.top_logprobs, 2);
  parsed = parse_completion(
      R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "x"}],
          "logprobs": true, "top_logprobs": 4})",
      limits, true);
  ASSERT_TRUE(std::holds_alternative<completion_call>(parsed));
  completion_call chat = std::get<completion_call>(parsed);
  EXPECT_TRUE(chat.logprobs);
  EXPECT_EQ(chat.request.top_logprobs, 4);
  const auto refused = [](const char* body, bool is_chat) {
    auto p = parse_completion(body, limits, is_chat);
    return std::holds_alternative<api_error>(p) ? std::get<api_error>(p).message : std::string();
  };
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "prompt": "x", "n": 17})", false)
                .find("'n' must be between 1 and 16"),
            std::string::npos);
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "prompt": "x", "logprobs": 6})", false)
                .find("'logprobs' must be between 0 and 5"),
            std::string::npos);
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "x"}],
                        "top_logprobs": 2})",
                    true)
                .find("'top_logprobs' needs 'logprobs': true"),
            std::string::npos);

  choice_output a = output_of("ab", actor::finish_reason::stop);
  a.logprobs = {-0.5f, -1.5f};
  a.top_tokens = {'a', 'c', 'b', 'a'};
  a.top_values = {-0.5f, -2.0f, -1.5f, -1.75f};
  const choice_output b = [&] {
    choice_output c = a;
    c.tokens = {'c', 'd'};
    return c;
  }();
  auto body = nlohmann::json::parse(completion_body("cmpl-2", limits, 1, call, {a, b}));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["text"], "cd");
  const auto& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], (nlohmann::json{"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"], (nlohmann::json{-0.5, -1.5}));
  EXPECT_EQ(lp["top_logprobs"][1]["a"], -1.75);
  EXPECT_EQ(lp["text_offset"], (nlohmann::json{0, 1}));
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  body = nlohmann::json::parse(completion_body("chatcmpl-2", limits, 1, chat, {a}));
  const auto& content = body["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content[0]["token"], "a");
  EXPECT_EQ(content[0]["bytes"], (nlohmann::json{97}));
  EXPECT_EQ(content[1]["top_logprobs"][0]["token"], "b");
  EXPECT_EQ(content[1]["top_logprobs"][1]["logprob"], -1.75);
}

TEST(OpenAiApi, StreamsHoldBackASplitUtf8Character) {
  const std::string euro = "\xe2\x82\xac";  // U+20AC, three bytes
  auto stream = models::byte_vocabulary().stream();
  EXPECT_EQ(stream->push(std::vector<int32_t>{'a', 0xe2, 0x82}), "a");
  EXPECT_EQ(stream->push(std::vector<int32_t>{0xac, 'b'}), euro + "b");
  EXPECT_EQ(stream->push(std::vector<int32_t>{0xe2}), "");
  EXPECT_EQ(stream->finish(), "\xe2");  // the end: what is left, as it is
  EXPECT_EQ(*models::byte_vocabulary().decode(std::vector<int32_t>{'o', 'k'}), "ok");
  EXPECT_FALSE(models::byte_vocabulary().decode(std::vector<int32_t>{'o', 300}).ok());
}

// The OpenAI API's prompt may be token ids, and a call may carry a batch of prompts (texts or
// token-id lists): choice p × n + k is generation k of prompt p.
TEST(OpenAiApi, APromptMayBeTokenIdsOrABatch) {
  using prompts = std::vector<std::vector<int32_t>>;
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": [72, 105]})").prompts, (prompts{{72, 105}}));
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": [[72, 105, 33]]})").prompts,
            (prompts{{72, 105, 33}}));
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": ["Hi"]})").prompts, (prompts{{'H', 'i'}}));
  const auto batch = ok(R"({"model": "troupe-tiny", "prompt": ["Hi", "abc"], "n": 2})");
  EXPECT_EQ(batch.prompts, (prompts{{'H', 'i'}, {'a', 'b', 'c'}}));
  EXPECT_EQ(batch.choices(), 4);
  EXPECT_EQ(batch.prompt_of(1), batch.prompts[0]);
  EXPECT_EQ(batch.prompt_of(2), batch.prompts[1]);
  EXPECT_EQ(batch.prompt_tokens(), 5);
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": [[1], [2, 3]]})").prompts,
            (prompts{{1}, {2, 3}}));
  auto e = refused(R"({"model": "troupe-tiny", "prompt": [72, 256]})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.message, "'prompt'[1] must be a token id from 0 to 255, not 256");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": [[1], [2, 256]]})").message,
            "'prompt'[1][1] must be a token id from 0 to 255, not 256");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": ["a", ""]})").message,
            "'prompt'[1] is empty");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": ["a", 3]})").message,
            "'prompt'[1] must be a string or a list of token ids");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": [72, "x"]})").http_status, 400);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": []})").message, "'prompt' is empty");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": {"a": 1}})").message,
            "'prompt' must be a string, a list of token ids, or a list of either");
  e = refused(R"({"model": "troupe-tiny", "prompt": ["a", ")" + std::string(40, 'a') + R"("]})");
  EXPECT_EQ(e.http_status, 413);
  EXPECT_NE(e.message.find("the prompt 1 has 40"), std::string::npos) << e.message;
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "n": 2, "prompt": [)" +
                    [] {
                      std::string p = "\"a\"";
                      for (int i = 1; i < 40; ++i)
                        p += ", \"a\"";
                      return p;
                    }() +
                    "]}")
                .message.find("at most 64 choices"),
            std::string::npos);
}

// OpenAI's penalties and logit_bias, vLLM's repetition_penalty and min_tokens.
TEST(OpenAiApi, PenaltiesLogitBiasAndMinTokens) {
  const auto c = ok(R"({"model": "troupe-tiny", "prompt": "x", "frequency_penalty": 0.5,
    "presence_penalty": -1, "repetition_penalty": 1.2, "logit_bias": {"65": -100, "66": 2.5},
    "min_tokens": 3, "max_tokens": 8})");
  EXPECT_FLOAT_EQ(c.request.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(c.request.presence_penalty, -1.0f);
  EXPECT_FLOAT_EQ(c.request.repetition_penalty, 1.2f);
  EXPECT_EQ(c.request.logit_bias, (std::vector<actor::token_bias>{{65, -100.0f}, {66, 2.5f}}));
  EXPECT_EQ(c.request.min_tokens, 3);
  const auto plain = ok(R"({"model": "troupe-tiny", "prompt": "x"})");
  EXPECT_EQ(plain.request.repetition_penalty, 1.0f);
  EXPECT_TRUE(plain.request.logit_bias.empty());
  const auto message = [](const std::string& fields) {
    return refused(R"({"model": "troupe-tiny", "prompt": "x", )" + fields + "}").message;
  };
  EXPECT_EQ(message(R"("frequency_penalty": 2.5)"),
            "'frequency_penalty' must be between -2 and 2, got 2.5");
  EXPECT_EQ(message(R"("repetition_penalty": 0)"), "'repetition_penalty' must be above 0");
  EXPECT_EQ(message(R"("logit_bias": {"x": 1})"),
            "'logit_bias' key 'x' must be a token id from 0 to 255");
  EXPECT_EQ(message(R"("logit_bias": {"300": 1})"),
            "'logit_bias' key '300' must be a token id from 0 to 255");
  EXPECT_EQ(message(R"("logit_bias": {"3": 101})"),
            "'logit_bias' of token 3 must be a number between -100 and 100, not 101");
  EXPECT_EQ(message(R"("logit_bias": [1])"), "'logit_bias' must map token ids to biases");
  EXPECT_EQ(message(R"("min_tokens": 5, "max_tokens": 4)"),
            "'min_tokens' must be between 0 and 4, got 5");
}

// seed 0 is a seed like any other; no seed lets the server draw one.
TEST(OpenAiApi, SeedZeroIsASeed) {
  const auto zero = ok(R"({"model": "troupe-tiny", "prompt": "x", "seed": 0})");
  EXPECT_TRUE(zero.seeded);
  EXPECT_EQ(zero.request.seed, 0u);
  EXPECT_FALSE(ok(R"({"model": "troupe-tiny", "prompt": "x"})").seeded);
  EXPECT_FALSE(ok(R"({"model": "troupe-tiny", "prompt": "x", "seed": null})").seeded);
}

// A chat message's content may be a list of text parts (joined by newlines); other parts are
// refused by name. /tokenize reads them the same way.
TEST(OpenAiApi, ChatContentMayBeTextParts) {
  const api_limits wide{"troupe-tiny", 128, 16};
  const auto parts = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}]})",
                        true, wide);
  const auto text = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi\nthere"}]})",
                       true, wide);
  EXPECT_EQ(parts.prompts, text.prompts);
  auto e = parse_completion(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
                            wide, true);
  ASSERT_TRUE(std::holds_alternative<api_error>(e));
  EXPECT_EQ(std::get<api_error>(e).message,
            "'messages'[0].content[0] must be a text part {\"type\": \"text\", \"text\": "
            "\"...\"} (type \"image_url\"); this model reads text only");
  EXPECT_EQ(std::get<std::string>(tokenize(R"({"messages": [{"role": "user", "content":
      [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}]})",
                                           wide)),
            std::get<std::string>(tokenize(R"({"messages": [{"role": "user", "content":
      "Hi\nthere"}]})",
                                           wide)));
}

// stream_options.include_usage: every chunk has a null usage, and a last chunk before [DONE]
// has no choices and the usage.
TEST(OpenAiApi, StreamOptionsIncludeUsage) {
  const auto call = ok(R"({"model": "troupe-tiny", "prompt": ["ab", "c"], "stream": true,
                           "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(call.include_usage);
  const auto chunk =
      nlohmann::json::parse(stream_chunk("c", limits, 1, call, 0, "x", {}, nullptr).substr(6));
  ASSERT_TRUE(chunk.contains("usage"));
  EXPECT_TRUE(chunk["usage"].is_null());
  const auto last = nlohmann::json::parse(stream_usage_chunk("c", limits, 1, call, 7).substr(6));
  EXPECT_EQ(last["choices"], nlohmann::json::array());
  EXPECT_EQ(last["usage"],
            (nlohmann::json{{"prompt_tokens", 3}, {"completion_tokens", 7}, {"total_tokens", 10}}));
  EXPECT_FALSE(nlohmann::json::parse(stream_chunk("c", limits, 1,
                                                  ok(R"({"model": "troupe-tiny", "prompt": "x"})"),
                                                  0, "x", {}, nullptr)
                                         .substr(6))
                   .contains("usage"));
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "stream_options":
                       {"include_usage": true}})")
                .message,
            "'stream_options' is only allowed with 'stream': true");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "stream": true, "stream_options":
                       {"continuous_usage_stats": true}})")
                .message,
            "unknown field 'stream_options.continuous_usage_stats'; troupe reads "
            "'stream_options.include_usage'");
}

// echo (completions): each choice's text starts with its prompt's.
TEST(OpenAiApi, EchoStartsTheTextWithThePrompt) {
  const auto call = ok(R"({"model": "troupe-tiny", "prompt": ["ab", "c"], "echo": true,
                           "stop": ["b"]})");
  EXPECT_TRUE(call.echo);
  EXPECT_EQ(echoed_prompt(call, 1, models::byte_vocabulary()), "c");
  const auto body =
      nlohmann::json::parse(completion_body("cmpl-3", limits, 1, call,
                                            {output_of("xy", actor::finish_reason::length),
                                             output_of("zbz", actor::finish_reason::stop)}));
  EXPECT_EQ(body["choices"][0]["text"], "abxy");
  EXPECT_EQ(body["choices"][1]["text"], "cz") << "the stop string is looked for after the prompt";
  EXPECT_EQ(echoed_prompt(ok(R"({"model": "troupe-tiny", "prompt": "ab"})"), 0,
                          models::byte_vocabulary()),
            "");
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "prompt": "x", "echo": true, "logprobs": 1})")
                .message.find("'echo' with 'logprobs' is not supported"),
            std::string::npos);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "messages": [], "echo": true})", true).message,
            "unknown field 'echo'");
}

// response_format: json_object, and json_schema with its properties in their written order (the
// body's own, not a JSON library's sorted one); a schema outside the subset is a 400 naming it.
TEST(OpenAiApi, ResponseFormatAsksForAJsonValue) {
  EXPECT_EQ(
      ok(R"({"model": "troupe-tiny", "prompt": "x", "response_format": {"type": "json_object"}})")
          .request.json_schema,
      R"({"type": "object"})");
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": "x", "response_format": {"type": "text"}})")
                .request.json_schema,
            "");
  const auto call = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "w", "strict": true,
      "schema": {"type": "object", "properties": {"zeta": {"type": "string"},
                 "alpha": {"type": "integer"}}}}}})",
                       true, {"troupe-tiny", 128, 16});
  EXPECT_EQ(
      call.request.json_schema,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "response_format":
                       {"type": "json_schema", "json_schema": {"name": "w", "schema":
                       {"type": "string", "format": "email"}}}})")
                .message,
            "'response_format.json_schema.schema': the schema at #: the keyword 'format' is not "
            "supported; troupe's structured output reads anyOf, const, enum, items, maxItems, "
            "maxLength, minItems, minLength, properties, required, type");
  EXPECT_NE(
      refused(R"({"model": "troupe-tiny", "prompt": "x", "response_format": {"type": "yaml"}})")
          .message.find("'response_format' must be"),
      std::string::npos);
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "response_format":
                       {"type": "json_schema", "json_schema": {"name": "w"}}})")
                .message,
            "'response_format.json_schema.schema' is missing");
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "response_format":
                       {"type": "json_schema", "json_schema": {"name": "w", "schema":
                       {"type": "array", "items": )" +
                    std::string(3000, '[') + std::string(3000, ']') + "}}}}")
                .message,
            "'response_format.json_schema.schema': the schema nests deeper than 32 levels");
}

// Chat's tools: rendered by the template (troupe's: a <|tools|> line first); a named
// tool_choice guides the reply by the function's parameters and returns it as the call's
// arguments; "required" guides it as a list of calls; "auto" parses the calls the reply makes.
TEST(OpenAiApi, ToolsAreRenderedAndCallsComeBackAsToolCalls) {
  const api_limits wide{"troupe-tiny", 256, 16};
  const std::string tools = R"([{"type": "function", "function": {"name": "weather",
      "description": "today's weather", "parameters": {"type": "object", "properties":
      {"zeta": {"type": "string"}, "alpha": {"type": "boolean"}}, "required": ["zeta"]}}}])";
  const auto automatic = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi"}], "tools": )" + tools +
                                "}",
                            true, wide);
  EXPECT_EQ(automatic.tool_choice, completion_call::tool_use::automatic);
  const std::string prompt(automatic.prompts[0].begin(), automatic.prompts[0].end());
  EXPECT_EQ(prompt.rfind("<|tools|>\n[{\"function\":{\"description\"", 0), 0u) << prompt;
  EXPECT_TRUE(automatic.request.json_schema.empty());
  // vLLM's /tokenize renders the tools too: the tokens of the completion's prompt.
  const auto tokenized = tokenize(
      R"({"messages": [{"role": "user", "content": "Hi"}], "tools": )" + tools + "}", wide);
  ASSERT_TRUE(std::holds_alternative<std::string>(tokenized));
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(tokenized))["tokens"],
            nlohmann::json(automatic.prompts[0]));
  const auto tools_without_chat = tokenize(R"({"prompt": "Hi", "tools": )" + tools + "}", wide);
  ASSERT_TRUE(std::holds_alternative<api_error>(tools_without_chat));
  EXPECT_EQ(std::get<api_error>(tools_without_chat).message, "'tools' goes with 'messages'");

  const auto named = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi"}], "tools": )" + tools +
                            R"(, "tool_choice": {"type": "function", "function": {"name":
      "weather"}}})",
                        true, wide);
  EXPECT_EQ(named.tool_choice, completion_call::tool_use::named);
  EXPECT_EQ(
      named.request.json_schema,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"boolean"}},"required":["zeta"]})");
  const auto none = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi"}], "tools": )" + tools +
                           R"(, "tool_choice": "none"})",
                       true, wide);
  EXPECT_EQ(none.tool_choice, completion_call::tool_use::none);

  // The replies.
  const auto forced = chat_reply_of(named, wide, R"({"zeta": "x"})", actor::finish_reason::stop, 5);
  EXPECT_TRUE(forced.message["content"].is_null());
  EXPECT_EQ(forced.message["tool_calls"][0]["function"]["name"], "weather");
  EXPECT_EQ(forced.message["tool_calls"][0]["function"]["arguments"], R"({"zeta": "x"})");
  EXPECT_EQ(forced.message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(forced.finish_reason, "stop");
  const std::string called =
      "Checking.<tool_call>{\"name\": \"weather\", \"arguments\": {\"zeta\": \"Oslo\"}}"
      "</tool_call>";
  const auto parsed = chat_reply_of(automatic, wide, called, actor::finish_reason::stop, 5);
  EXPECT_EQ(parsed.message["content"], "Checking.");
  EXPECT_EQ(parsed.message["tool_calls"][0]["function"]["arguments"], R"({"zeta":"Oslo"})");
  EXPECT_EQ(parsed.finish_reason, "tool_calls");
  const auto plain = chat_reply_of(none, wide, called, actor::finish_reason::stop, 5);
  EXPECT_EQ(plain.message["content"], called);
  EXPECT_FALSE(plain.message.contains("tool_calls"));
  // Streamed: the content as soon as it cannot begin a call, then the call when it closes, then
  // the finish reason.
  auto reader = tool_call_stream_of(automatic, wide, 5);
  const auto chunk_of = [&](const parsed_reply& piece, bool first,
                            const actor::finish_reason* reason) {
    const std::string sse =
        stream_reply_chunk("c", wide, 1, automatic, 2, piece, reader, first, reason);
    return sse.empty() ? nlohmann::json() : nlohmann::json::parse(sse.substr(6))["choices"][0];
  };
  auto chunk = chunk_of(reader.push("Checking.<tool"), true, nullptr);
  EXPECT_EQ(chunk["index"], 2);
  EXPECT_EQ(chunk["delta"], (nlohmann::json{{"role", "assistant"}, {"content", "Checking."}}));
  EXPECT_TRUE(chunk["finish_reason"].is_null());
  EXPECT_TRUE(chunk_of(reader.push("_call>{\"name\": \"wea"), false, nullptr).is_null());
  chunk = chunk_of(reader.push("ther\", \"arguments\": {\"zeta\": \"Oslo\"}}</tool_call>"), false,
                   nullptr);
  EXPECT_FALSE(chunk["delta"].contains("content"));
  EXPECT_EQ(chunk["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(chunk["delta"]["tool_calls"][0]["id"], parsed.message["tool_calls"][0]["id"]);
  EXPECT_EQ(chunk["delta"]["tool_calls"][0]["function"]["name"], "weather");
  EXPECT_EQ(chunk["delta"]["tool_calls"][0]["function"]["arguments"], R"({"zeta":"Oslo"})");
  const auto stop = actor::finish_reason::stop;
  chunk = chunk_of(reader.finish(), false, &stop);
  EXPECT_EQ(chunk["delta"], nlohmann::json::object());
  EXPECT_EQ(chunk["finish_reason"], "tool_calls");

  // "required": guided as a list of one or more calls of the tools (vLLM's schema), returned as
  // tool_calls; a list cut short by max_tokens comes back as content.
  const auto required = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi"}], "tools": )" + tools +
                               R"(, "tool_choice": "required"})",
                           true, wide);
  EXPECT_EQ(required.tool_choice, completion_call::tool_use::required);
  EXPECT_EQ(
      required.request.json_schema,
      R"({"type":"array","minItems":1,"items":{"anyOf":[{"type":"object","properties":{"name":{"const":"weather"},"parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"boolean"}},"required":["zeta"]}},"required":["name","parameters"]}]}})");
  const auto one = ok(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content":
      "Hi"}], "tools": )" +
                          tools + R"(, "tool_choice": "required", "parallel_tool_calls": false})",
                      true, wide);
  EXPECT_EQ(nlohmann::json::parse(one.request.json_schema)["maxItems"], 1);
  const auto listed =
      chat_reply_of(required, wide,
                    R"([{"name": "weather", "parameters": {"zeta": "a"}}, )"
                    R"({"name": "weather", "parameters": {"zeta": "b", "alpha": true}}])",
                    actor::finish_reason::stop, 5);
  EXPECT_TRUE(listed.message["content"].is_null());
  ASSERT_EQ(listed.message["tool_calls"].size(), 2u);
  EXPECT_EQ(listed.message["tool_calls"][1]["function"]["arguments"],
            R"({"zeta":"b","alpha":true})");
  EXPECT_NE(listed.message["tool_calls"][0]["id"], listed.message["tool_calls"][1]["id"]);
  EXPECT_EQ(listed.finish_reason, "tool_calls");
  const auto cut =
      chat_reply_of(required, wide, R"([{"name": "wea)", actor::finish_reason::length, 5);
  EXPECT_EQ(cut.message["content"], R"([{"name": "wea)");
  EXPECT_EQ(cut.finish_reason, "length");
  // A list cut short after whole calls keeps them, as a stream has already sent them.
  const auto cut_later =
      chat_reply_of(required, wide, R"([{"name": "weather", "parameters": {"zeta": "a"}}, {"na)",
                    actor::finish_reason::length, 5);
  EXPECT_TRUE(cut_later.message["content"].is_null());
  ASSERT_EQ(cut_later.message["tool_calls"].size(), 1u);
  EXPECT_EQ(cut_later.finish_reason, "length");

  // A conversation with tool turns needs a template that has them.
  EXPECT_NE(refused(R"({"model": "troupe-tiny", "messages": [{"role": "assistant", "content":
      "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather",
      "arguments": "{\"zeta\": \"x\"}"}}]}, {"role": "tool", "tool_call_id": "call_1",
      "content": "sunny"}]})",
                    true)
                .message.find("messages[1].role must be system, user or assistant, not 'tool'"),
            std::string::npos)
      << "troupe's own template has no tool turns";

  const auto message = [&](const std::string& fields) {
    return refused(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "x"}], )" +
                       fields + "}",
                   true)
        .message;
  };
  EXPECT_EQ(message(R"("tool_choice": "auto")"), "'tool_choice' needs 'tools'");
  EXPECT_NE(message(R"("tools": [])").find("'tools' must be a non-empty list"), std::string::npos);
  EXPECT_EQ(message(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"),
            "'tools'[0].function.name must be 1 to 64 letters, digits, _ or -");
  EXPECT_EQ(message(R"("tools": [{"type": "function", "function": {"name": "f", "x": 1}}])"),
            "unknown field 'tools'[0].function.x");
  EXPECT_EQ(message(R"("tools": )" + tools +
                    R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"),
            R"(give 'response_format' or tool_choice "required", not both)");
  EXPECT_EQ(message(R"("tools": )" + tools +
                    R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})"),
            "'tool_choice' names \"g\", which is not in 'tools'");
  EXPECT_EQ(message(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "string", "pattern": "x"}}}], "tool_choice": {"type": "function", "function":
      {"name": "f"}})")
                .substr(0, 64),
            "'tools'[0].function.parameters: the schema at #: the keyword 'pa");
  EXPECT_EQ(message(R"("tools": )" + tools +
                    R"(, "tool_choice": {"type": "function", "function": {"name": "weather"}},
                    "response_format": {"type": "json_object"})"),
            "give 'response_format' or a named 'tool_choice', not both");
}

// vLLM's /tokenize and /detokenize.
// OpenAI's embeddings request: its input as a completion's prompt (a text, token ids, or a batch
// of either); the vectors back as floats or as base64 of their f32 bytes (the Node client's
// default), scaled to unit length unless the pooler says otherwise.
TEST(OpenAiApi, EmbeddingsTakeInputsAndAnswerFloatsOrBase64) {
  auto parsed = parse_embeddings(
      R"({"model": "troupe-tiny", "input": ["ab", [1, 2, 3]], "encoding_format": "base64"})",
      limits);
  ASSERT_TRUE(std::holds_alternative<embedding_call>(parsed));
  const embedding_call call = std::get<embedding_call>(parsed);
  EXPECT_EQ(call.inputs, (std::vector<std::vector<int32_t>>{{'a', 'b'}, {1, 2, 3}}));
  EXPECT_TRUE(call.base64);
  const auto body = nlohmann::json::parse(embeddings_body(limits, call, {{3, 4}, {0, -2}}));
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "troupe-tiny");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["data"][1]["index"], 1);
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(body["data"][0]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), 2 * sizeof(float));
  float first[2];
  std::memcpy(first, bytes.data(), bytes.size());
  EXPECT_FLOAT_EQ(first[0], 0.6f);  // (3, 4) / 5
  EXPECT_FLOAT_EQ(first[1], 0.8f);
  api_limits raw = limits;
  raw.normalize_embeddings = false;
  const auto floats = nlohmann::json::parse(embeddings_body(
      raw,
      std::get<embedding_call>(parse_embeddings(R"({"model": "troupe-tiny", "input": "x"})", raw)),
      {{3, 4}}));
  EXPECT_EQ(floats["data"][0]["embedding"], nlohmann::json::array({3.0, 4.0}));
  auto error = [](const std::string& body) {
    auto r = parse_embeddings(body, limits);
    EXPECT_TRUE(std::holds_alternative<api_error>(r)) << body;
    return std::holds_alternative<api_error>(r) ? std::get<api_error>(r) : api_error{};
  };
  EXPECT_EQ(error(R"({"model": "troupe-tiny"})").message,
            "'input' is required: a text, a list of token ids, or a list of either");
  EXPECT_EQ(error(R"({"model": "troupe-tiny", "input": ""})").message, "'input' is empty");
  EXPECT_EQ(error(R"({"model": "troupe-tiny", "input": ["a", ""]})").message,
            "'input'[1] is empty");
  EXPECT_NE(error(R"({"model": "troupe-tiny", "input": "a", "dimensions": 8})")
                .message.find("'dimensions' is not supported"),
            std::string::npos);
  EXPECT_NE(error(R"({"model": "troupe-tiny", "input": "a", "encoding_format": "int8"})")
                .message.find("'encoding_format' must be \"float\" or \"base64\""),
            std::string::npos);
  EXPECT_EQ(error(R"({"model": "gpt", "input": "a"})").http_status, 404);
  EXPECT_EQ(error(R"({"model": "troupe-tiny", "input": [[1, 999]]})").message,
            "'input'[0][1] must be a token id from 0 to 255, not 999");
  const std::string long_input(40, 'x');
  EXPECT_EQ(error(R"({"model": "troupe-tiny", "input": ")" + long_input + "\"}").http_status, 413);
}

TEST(OpenAiApi, TokenizeAndDetokenizeAsVllmDoes) {
  auto body = tokenize(R"({"prompt": "Hi!"})", limits);
  ASSERT_TRUE(std::holds_alternative<std::string>(body));
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(body)),
            nlohmann::json({{"tokens", {72, 105, 33}}, {"count", 3}, {"max_model_len", 32}}));
  body = tokenize(R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "x"}]})",
                  {"troupe-tiny", 128, 16});
  ASSERT_TRUE(std::holds_alternative<std::string>(body));
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(body))["count"],
            std::string("<|user|>\nx\n<|assistant|>\n").size());
  body = detokenize(R"({"tokens": [72, 105, 33]})", limits);
  ASSERT_TRUE(std::holds_alternative<std::string>(body));
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(body)),
            nlohmann::json({{"prompt", "Hi!"}}));

  const auto error = [](const std::variant<std::string, api_error>& r) {
    return std::holds_alternative<api_error>(r) ? std::get<api_error>(r) : api_error{};
  };
  EXPECT_EQ(error(tokenize(R"({"prompt": 5})", limits)).message,
            "'prompt' (a string) or 'messages' is required");
  EXPECT_EQ(error(tokenize(R"({"prompt": "x", "add_special_tokens": 1})", limits)).message,
            "'add_special_tokens' must be true or false");
  EXPECT_EQ(error(tokenize(R"({"prompt": "x", "model": "other"})", limits)).http_status, 404);
  EXPECT_EQ(
      error(tokenize(R"({"messages": [{"role": "bot", "content": "x"}]})", limits)).http_status,
      400);
  EXPECT_EQ(error(detokenize(R"({"tokens": [1, -2]})", limits)).message,
            "'tokens'[1] must be a token id from 0 to 255, not -2");
  EXPECT_EQ(error(detokenize(R"({"tokens": "abc"})", limits)).message,
            "'tokens' must be a list of token ids");
  EXPECT_EQ(error(detokenize(R"({"tokens": [], "extra": 1})", limits)).message,
            "unknown field 'extra'");
}

}  // namespace
}  // namespace troupe::apps
