#pragma once

// OpenAI's function calling on the model's own terms: the calls a reply makes, parsed from its
// text in the format the model's chat template teaches it (the tools are rendered into the
// prompt by that template).
// - hermes (Qwen 2/3, troupe's template, most others): each
//   <tool_call>{"name": ..., "arguments": {...}}</tool_call> block is a call; the text outside
//   the blocks is the reply's content;
// - llama3_json (Llama 3.x): a reply that is, after an optional <|python_tag|>, a JSON object
//   {"name": ..., "parameters": {...}} (or several joined by ';') is those calls.
// A block that is not such JSON stays in the content, as vLLM's parsers leave it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::apps {

enum class tool_call_format { hermes, llama3_json };

struct tool_call {
  std::string id;  ///< "call_" and 24 hex digits, unique per call and reply
  std::string name;
  std::string arguments;  ///< a JSON object's text, as OpenAI's function.arguments
};

struct parsed_reply {
  std::string content;
  std::vector<tool_call> calls;
};

/// The calls of `text` in `format`; ids derive from `reply_id` (the request's), so that they
/// are unique across a server's replies.
[[nodiscard]] parsed_reply parse_tool_calls(std::string_view text, tool_call_format format,
                                            uint64_t reply_id);

/// A call id: "call_" and 24 hex digits of (reply_id, index).
[[nodiscard]] std::string tool_call_id(uint64_t reply_id, int index);

}  // namespace troupe::apps
