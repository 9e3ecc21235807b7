#include "apps/serve/openai_api.hpp"

#include <gtest/gtest.h>

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
  EXPECT_EQ(c.request.prompt, (std::vector<int32_t>{'H', 'i'}));
  EXPECT_EQ(c.request.max_tokens, 5);
  EXPECT_FLOAT_EQ(c.request.temperature, 0.5f);
  EXPECT_FLOAT_EQ(c.request.top_p, 0.9f);
  EXPECT_EQ(c.request.top_k, 20);
  EXPECT_EQ(c.request.seed, 42u);
  EXPECT_EQ(c.request.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(c.stream);
  EXPECT_EQ(ok(R"({"model": "troupe-tiny", "prompt": "x"})").request.max_tokens, 16);
}

TEST(OpenAiApi, ChatMessagesBecomeOneTemplatedPrompt) {
  const auto c = ok(R"({"model": "troupe-tiny", "messages": [{"role": "system", "content":
                     "Be brief."}, {"role": "user", "content": "Hi"}]})",
                    true, {"troupe-tiny", 128, 16});
  std::string prompt;
  for (int32_t t : c.request.prompt)
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
  EXPECT_EQ(refused(R"({"model": "troupe-tiny", "prompt": "x", "n": 2})").http_status, 400);
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

TEST(OpenAiApi, RendersResponsesAndStreamChunks) {
  const auto done = actor::finish_reason::stop;
  auto body = nlohmann::json::parse(
      completion_body("cmpl-1", limits, 1700000000, false, "Hello", done, 2, 5));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  body = nlohmann::json::parse(
      completion_body("chatcmpl-1", limits, 1, true, "Hi", actor::finish_reason::length, 2, 2));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");

  const std::string chunk = stream_chunk("cmpl-1", limits, 1, false, "He", nullptr);
  ASSERT_EQ(chunk.rfind("data: ", 0), 0u);
  ASSERT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  const auto parsed = nlohmann::json::parse(chunk.substr(6));
  EXPECT_EQ(parsed["choices"][0]["text"], "He");
  EXPECT_TRUE(parsed["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(stream_done(), "data: [DONE]\n\n");
  // Stray bytes from a byte-level model still make valid JSON.
  EXPECT_NO_THROW(nlohmann::json::parse(
      stream_chunk("c", limits, 1, true, std::string("\xff\xfe", 2), &done).substr(6)));
}

TEST(OpenAiApi, StreamsHoldBackASplitUtf8Character) {
  const std::string euro = "\xe2\x82\xac";  // U+20AC, three bytes
  EXPECT_EQ(complete_utf8("ab"), 2u);
  EXPECT_EQ(complete_utf8("a" + euro), 4u);
  EXPECT_EQ(complete_utf8("a" + euro.substr(0, 2)), 1u);
  EXPECT_EQ(complete_utf8("a" + euro.substr(0, 1)), 1u);
  EXPECT_EQ(text_of({'o', 'k'}), "ok");
}

}  // namespace
}  // namespace troupe::apps
