#include "apps/serve/tool_calls.hpp"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace troupe::apps {
namespace {

TEST(ToolCalls, HermesBlocksAreCallsAndTheRestIsContent) {
  const auto r = parse_tool_calls(
      "Let me look.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>",
      tool_call_format::hermes, 7);
  EXPECT_EQ(r.content, "Let me look.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "weather");
  EXPECT_EQ(nlohmann::json::parse(r.calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
  EXPECT_EQ(r.calls[1].name, "time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.calls[0].id, tool_call_id(7, 0));
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  EXPECT_NE(tool_call_id(7, 0), tool_call_id(8, 0));
  EXPECT_EQ(r.calls[0].id.size(), 5u + 24u);
  EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCalls, WhatIsNotACallStaysText) {
  for (const char* text : {"no calls here", "<tool_call>{not json}</tool_call> after",
                           "<tool_call>{\"arguments\": {}}</tool_call>",
                           "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>",
                           "<tool_call>{\"name\": \"f\"} unclosed"}) {
    const auto r = parse_tool_calls(text, tool_call_format::hermes, 1);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  const auto no_arguments =
      parse_tool_calls("<tool_call>{\"name\": \"f\"}</tool_call>", tool_call_format::hermes, 1);
  ASSERT_EQ(no_arguments.calls.size(), 1u);
  EXPECT_EQ(no_arguments.calls[0].arguments, "{}");
}

TEST(ToolCalls, Llama3JsonRepliesAreCalls) {
  auto r =
      parse_tool_calls("<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"a;b\"}}",
                       tool_call_format::llama3_json, 3);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(nlohmann::json::parse(r.calls[0].arguments)["q"], "a;b");
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls(R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}})",
                       tool_call_format::llama3_json, 3);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "b");
  for (const char* text : {"Hello {\"name\": \"a\"}", "{\"no\": 1}", "{broken"}) {
    r = parse_tool_calls(text, tool_call_format::llama3_json, 3);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

}  // namespace
}  // namespace troupe::apps
