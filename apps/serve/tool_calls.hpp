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
/// are unique across a server's replies. What a tool_call_stream makes of the whole text.
[[nodiscard]] parsed_reply parse_tool_calls(std::string_view text, tool_call_format format,
                                            uint64_t reply_id);

/// A reply's calls parsed as its text arrives, so that a stream sends each part as soon as it is
/// known: text that cannot begin a call is content at once, and a call goes whole when it closes
/// (hermes: at its </tool_call>; llama3_json: a reply that opens with '{' is held to its end; a
/// list of calls, tool_choice "required": at each element's '}'). However the text is split, the
/// pieces add up to the same reply: the calls numbered in order, and the text outside them as
/// content (but the whitespace that ends it, when the reply makes calls).
class tool_call_stream {
 public:
  tool_call_stream(tool_call_format format, uint64_t reply_id);
  /// A reply guided as a JSON list of {"name", "parameters"} objects (tool_choice "required"):
  /// each whole element is a call; a reply with none whole is content.
  [[nodiscard]] static tool_call_stream call_list(uint64_t reply_id);

  /// The content and calls that `text`, the reply's next piece, completes.
  [[nodiscard]] parsed_reply push(std::string_view text);
  /// At the reply's end: the content and calls of `text`, its last piece, and of all that was
  /// held back.
  [[nodiscard]] parsed_reply finish(std::string_view text = {});
  /// How many calls it has given so far.
  [[nodiscard]] int calls() const { return calls_; }

 private:
  enum class mode { hermes, llama3_json, call_list };
  tool_call_stream(mode m, uint64_t reply_id) : mode_(m), reply_id_(reply_id) {}

  // Reads pending_ as far as it can be (`end`: all of it), each mode by its own.
  void read(parsed_reply& out, bool end);
  void hermes(parsed_reply& out, bool end);
  void llama3_json(parsed_reply& out, bool end);
  void call_list(parsed_reply& out, bool end);
  void add_content(parsed_reply& out, std::string_view text);
  void add_call(parsed_reply& out, tool_call call);

  mode mode_;
  uint64_t reply_id_;
  std::string pending_;     // text not yet given: a possible call, or a tag's beginning
  std::string space_;       // whitespace after the content so far, given if more content follows
  bool in_call_ = false;    // hermes: inside <tool_call>; llama3_json: the reply is JSON
  bool decided_ = false;    // llama3_json: whether the reply is text or JSON is known
  size_t scanned_ = 0;      // call_list: how far pending_ has been read
  int depth_ = 0;           // call_list: brackets open at scanned_
  bool in_string_ = false;  // call_list: inside a JSON string at scanned_
  bool escaped_ = false;    // call_list: after a backslash in one
  size_t element_ = 0;      // call_list: where the open element begins
  int calls_ = 0;
};

/// A call id: "call_" and 24 hex digits of (reply_id, index).
[[nodiscard]] std::string tool_call_id(uint64_t reply_id, int index);

}  // namespace troupe::apps
