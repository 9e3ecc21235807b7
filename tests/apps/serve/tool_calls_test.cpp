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

// The reply read piece by piece: `pieces` pushed, then finish().
parsed_reply streamed(tool_call_stream stream, const std::vector<std::string>& pieces) {
  parsed_reply out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    parsed_reply piece = i + 1 < pieces.size() ? stream.push(pieces[i]) : stream.finish(pieces[i]);
    out.content += piece.content;
    for (auto& call : piece.calls)
      out.calls.push_back(std::move(call));
  }
  return out;
}

void expect_same(const parsed_reply& a, const parsed_reply& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << what;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
}

// However a reply is cut into pieces (here: at every byte, and in two at every point), the
// stream gives what the whole text gives.
TEST(ToolCallStream, AnySplitOfTheTextGivesTheWholeTextsReply) {
  const std::vector<std::pair<tool_call_format, std::string>> replies = {
      {tool_call_format::hermes,
       "Let me look.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
       "</tool_call>\n<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>\n"},
      {tool_call_format::hermes, "A <tool_call>{\"name\": \"f\"}</tool_call>  B <tool_c"},
      {tool_call_format::hermes, "<tool_call>{not json}</tool_call> after <<tool_call>>"},
      {tool_call_format::hermes, "  plain text with < and </tool_call> and spaces  \n"},
      {tool_call_format::llama3_json, R"({"name": "a", "parameters": {}}; {"name": "b"})"},
      {tool_call_format::llama3_json, "  <|python_tag|>{\"name\": \"s\", \"parameters\": {}}"},
      {tool_call_format::llama3_json, " Hello {\"name\": \"a\"} "},
      {tool_call_format::llama3_json, "{broken"},
  };
  for (const auto& [format, text] : replies) {
    const parsed_reply whole = parse_tool_calls(text, format, 9);
    std::vector<std::string> bytes;
    for (char c : text)
      bytes.emplace_back(1, c);
    expect_same(streamed(tool_call_stream(format, 9), bytes), whole, text);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      expect_same(streamed(tool_call_stream(format, 9), {text.substr(0, cut), text.substr(cut)}),
                  whole, text + " cut at " + std::to_string(cut));
    }
  }
  const std::string list =
      R"([{"name": "w", "parameters": {"s": "a]}\"{"}}, {"name": "v", "parameters": {"n": [1]}}])";
  const parsed_reply whole = tool_call_stream::call_list(4).finish(list);
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.calls[0].arguments, R"({"s":"a]}\"{"})");
  EXPECT_EQ(whole.calls[1].arguments, R"({"n":[1]})");
  for (size_t cut = 0; cut <= list.size(); ++cut) {
    expect_same(streamed(tool_call_stream::call_list(4), {list.substr(0, cut), list.substr(cut)}),
                whole, list + " cut at " + std::to_string(cut));
  }
}

// Each part goes as soon as it is known: content that cannot begin a block at once, a call at
// its </tool_call>; whitespace waits for what follows it.
TEST(ToolCallStream, HermesContentAndCallsGoAsSoonAsTheyAreKnown) {
  tool_call_stream s(tool_call_format::hermes, 1);
  EXPECT_EQ(s.push("Let me look. <to").content, "Let me look.");
  auto piece = s.push("ol_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}");
  EXPECT_EQ(piece.content, "");
  EXPECT_TRUE(piece.calls.empty());
  piece = s.push("</tool_call>\n");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].id, tool_call_id(1, 0));
  EXPECT_EQ(piece.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(s.calls(), 1);
  EXPECT_EQ(s.push("Done").content, " \nDone");  // whitespace between content goes with it
  piece = s.finish("\n");
  EXPECT_EQ(piece.content, "");  // a reply that made calls loses its trailing whitespace
  EXPECT_TRUE(piece.calls.empty());
}

// Llama 3: a reply that does not open with '{' is text from its first character; one that does
// is held and read whole at its end.
TEST(ToolCallStream, Llama3TextStreamsAndJsonIsReadWhole) {
  tool_call_stream text(tool_call_format::llama3_json, 1);
  EXPECT_EQ(text.push("  ").content, "");
  EXPECT_EQ(text.push("Hi {").content, "  Hi {");
  EXPECT_EQ(text.finish("}").content, "}");
  tool_call_stream json(tool_call_format::llama3_json, 1);
  EXPECT_EQ(json.push("{\"name\": \"a\", ").content, "");
  const auto piece = json.finish("\"parameters\": {\"x\": 1}}");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].name, "a");
  EXPECT_EQ(piece.content, "");
}

// tool_choice "required": each element of the list is a call at its closing brace; a reply with
// no whole element is text.
TEST(ToolCallStream, AListGivesEachElementWhenItCloses) {
  auto s = tool_call_stream::call_list(2);
  EXPECT_TRUE(s.push(R"([{"name": "a", "parameters": {"x": "}"})").calls.empty());
  const auto first = s.push("}, ");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "a");
  EXPECT_EQ(first.calls[0].arguments, R"({"x":"}"})");
  EXPECT_EQ(first.content, "");
  const auto rest = s.finish(R"({"name": "b", "param)");
  EXPECT_TRUE(rest.calls.empty());
  EXPECT_EQ(rest.content, "");
  EXPECT_EQ(tool_call_stream::call_list(2).finish(R"([{"name": "a)").content, R"([{"name": "a)");
}

}  // namespace
}  // namespace troupe::apps
