// The serving replies without a server: the router's answers go into generation streams, and the
// reply is pulled through a reply_writer as the HTTP server's event loop pulls it.

#include "apps/serve/generation_reply.hpp"

#include <map>

#include <gtest/gtest.h>

#include "runtime/metrics/registry.hpp"

namespace troupe::apps {
namespace {

const api_limits tiny_limits{"troupe-tiny", 64, 16};

class GenerationReply : public ::testing::Test {
 protected:
  // A reply's context that records what it released, and whether it cancelled it.
  reply_context context() {
    return {tiny_limits, models::byte_vocabulary(), metrics_,
            [this](uint64_t id, bool cancel) { released_[id] = cancel; }};
  }
  std::vector<std::shared_ptr<generation_stream>> streams(int n) {
    std::vector<std::shared_ptr<generation_stream>> out;
    for (int k = 0; k < n; ++k)
      out.push_back(std::make_shared<generation_stream>());
    return out;
  }
  static actor::generation_event event(uint64_t id, const std::string& text, bool finished) {
    actor::generation_event e;
    e.id = id;
    e.tokens.assign(text.begin(), text.end());
    e.finished = finished;
    e.reason = actor::finish_reason::length;
    return e;
  }
  // One pull: whether the reply completed, and the bytes it wrote.
  std::pair<bool, std::string> pull(generation_reply& reply, http::reply_writer& writer) {
    const size_t before = out_.size();
    const bool done = reply.pull(writer);
    return {done, out_.substr(before)};
  }

  metrics::registry registry_;
  serve_metrics metrics_{registry_};
  std::map<uint64_t, bool> released_;
  std::string out_;
};

completion_call call_of(const std::string& body) {
  auto parsed = parse_completion(body, tiny_limits, false);
  EXPECT_TRUE(std::holds_alternative<completion_call>(parsed));
  return std::get<completion_call>(std::move(parsed));
}

TEST_F(GenerationReply, WaitsForTheRouterThenStreamsEachPieceAndEnds) {
  auto s = streams(2);
  const auto reply = streamed_completion(context(), 7, s,
                                         call_of(R"({"model": "troupe-tiny", "prompt": "Hi", "n": 2,
                                      "stream": true})"));
  int wakes = 0;
  reply->attach([&] { ++wakes; });
  http::reply_writer writer(out_, true, false);
  EXPECT_EQ(pull(*reply, writer), std::make_pair(false, std::string()));  // not yet accepted
  s[0]->accept();
  s[1]->accept();
  EXPECT_EQ(wakes, 2);
  s[0]->deliver(event(7, "Hel", false), metrics_);
  auto [done, bytes] = pull(*reply, writer);
  EXPECT_FALSE(done);
  EXPECT_EQ(bytes.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << bytes;
  EXPECT_NE(bytes.find("Content-Type: text/event-stream\r\n"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\"text\":\"Hel\""), std::string::npos) << bytes;
  s[1]->deliver(event(8, "Yo", true), metrics_);
  s[0]->deliver(event(7, "lo", true), metrics_);
  std::tie(done, bytes) = pull(*reply, writer);
  EXPECT_TRUE(done);
  EXPECT_NE(bytes.find("\"text\":\"Yo\""), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\"text\":\"lo\""), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("data: [DONE]"), std::string::npos) << bytes;
  EXPECT_EQ(bytes.substr(bytes.size() - 5), "0\r\n\r\n");
  EXPECT_EQ(released_, (std::map<uint64_t, bool>{{7, false}, {8, false}}));  // none cancelled
}

// tool_choice "auto", streamed: the content goes as soon as it cannot begin a call, each call when
// its </tool_call> arrives, and the finish reason says the reply called.
TEST_F(GenerationReply, AStreamedReplyGivesItsContentAndEachCallAsSoonAsTheyAreKnown) {
  auto parsed = parse_completion(R"({"model": "troupe-tiny", "stream": true,
      "messages": [{"role": "user", "content": "Lamp"}],
      "tools": [{"type": "function", "function": {"name": "set_light",
                 "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}}}}}]})",
                                 api_limits{"troupe-tiny", 1024, 16}, true);  // the tools fit
  ASSERT_TRUE(std::holds_alternative<completion_call>(parsed));
  auto s = streams(1);
  const auto reply = streamed_completion(context(), 5, s, std::get<completion_call>(parsed));
  reply->attach([] {});
  http::reply_writer writer(out_, true, false);
  s[0]->accept();
  s[0]->deliver(event(5, "On it. <tool_call>{\"name\": \"set_light\", ", false), metrics_);
  auto [done, bytes] = pull(*reply, writer);
  EXPECT_FALSE(done);
  EXPECT_NE(bytes.find(R"("delta":{"content":"On it.","role":"assistant"})"), std::string::npos)
      << bytes;
  EXPECT_EQ(bytes.find("tool_calls"), std::string::npos) << bytes;
  s[0]->deliver(event(5, "\"arguments\": {\"on\": true}}</tool_call>", false), metrics_);
  std::tie(done, bytes) = pull(*reply, writer);
  EXPECT_FALSE(done);
  EXPECT_NE(bytes.find(R"("function":{"arguments":"{\"on\":true}","name":"set_light"})"),
            std::string::npos)
      << bytes;
  EXPECT_NE(bytes.find(R"("index":0,"type":"function")"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find(R"("finish_reason":null)"), std::string::npos) << bytes;
  auto end = event(5, "", true);
  end.reason = actor::finish_reason::stop;
  s[0]->deliver(end, metrics_);
  std::tie(done, bytes) = pull(*reply, writer);
  EXPECT_TRUE(done);
  EXPECT_NE(bytes.find(R"("delta":{},"finish_reason":"tool_calls")"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("data: [DONE]"), std::string::npos) << bytes;
}

TEST_F(GenerationReply, ARefusalIsTheAnswerAndCancelsEveryChoice) {
  auto s = streams(2);
  const auto reply = whole_completion(
      context(), 3, s, call_of(R"({"model": "troupe-tiny", "prompt": "Hi", "n": 2})"));
  reply->attach([] {});
  http::reply_writer writer(out_, true, false);
  s[0]->accept();
  s[1]->refuse({429, "rate_limit_exceeded", "", "the queue is full"});
  const auto [done, bytes] = pull(*reply, writer);
  EXPECT_TRUE(done);
  EXPECT_EQ(bytes.rfind("HTTP/1.1 429 Too Many Requests\r\n", 0), 0u) << bytes;
  EXPECT_NE(bytes.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(bytes.find("the queue is full"), std::string::npos);
  EXPECT_EQ(released_, (std::map<uint64_t, bool>{{3, true}, {4, true}}));
}

TEST_F(GenerationReply, AWholeCompletionComesWhenEveryChoiceHasFinished) {
  auto s = streams(1);
  const auto reply =
      whole_completion(context(), 5, s, call_of(R"({"model": "troupe-tiny", "prompt": "Hi"})"));
  reply->attach([] {});
  http::reply_writer writer(out_, true, false);
  s[0]->accept();
  s[0]->deliver(event(5, "ab", false), metrics_);
  EXPECT_FALSE(pull(*reply, writer).first);
  s[0]->deliver(event(5, "c", true), metrics_);
  const auto [done, bytes] = pull(*reply, writer);
  EXPECT_TRUE(done);
  EXPECT_NE(bytes.find("Content-Length: "), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\"text\":\"abc\""), std::string::npos) << bytes;
  EXPECT_EQ(released_, (std::map<uint64_t, bool>{{5, false}}));
}

TEST_F(GenerationReply, AnAbandonedOrStoppedReplyCancelsWhatHasNotFinished) {
  auto s = streams(2);
  const auto reply = streamed_completion(
      context(), 1, s,
      call_of(R"({"model": "troupe-tiny", "prompt": "Hi", "n": 2, "stream": true})"));
  reply->attach([] {});
  http::reply_writer writer(out_, true, false);
  s[0]->accept();
  s[1]->accept();
  s[1]->deliver(event(2, "x", true), metrics_);
  EXPECT_FALSE(pull(*reply, writer).first);
  reply->abandoned();
  EXPECT_EQ(released_, (std::map<uint64_t, bool>{{1, true}, {2, false}}));

  // A whole completion still waiting when the server stops answers 503.
  released_.clear();
  auto w = streams(1);
  const auto waiting =
      whole_completion(context(), 9, w, call_of(R"({"model": "troupe-tiny", "prompt": "Hi"})"));
  waiting->attach([] {});
  out_.clear();
  http::reply_writer stopping(out_, false, false);
  stopping.set_stopping();
  const auto [done, bytes] = pull(*waiting, stopping);
  EXPECT_TRUE(done);
  EXPECT_EQ(bytes.rfind("HTTP/1.1 503", 0), 0u) << bytes;
  EXPECT_EQ(released_, (std::map<uint64_t, bool>{{9, true}}));
}

}  // namespace
}  // namespace troupe::apps
