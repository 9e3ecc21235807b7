#include "apps/serve/tool_calls.hpp"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace troupe::apps {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view reply_space = " \t\r\n";
constexpr std::string_view llama3_python_tag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(reply_space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(reply_space) - first + 1);
}

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// {"name": string, <arguments_key>: object} as a call, or nothing; the arguments' keys as written.
bool read_call(std::string_view text, const char* arguments_key, uint64_t reply_id, int index,
               tool_call& out) {
  const ordered_json j = ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const ordered_json arguments = j.value(arguments_key, ordered_json::object());
  if (!arguments.is_object()) return false;
  out = {tool_call_id(reply_id, index), j["name"].get<std::string>(), arguments.dump()};
  return true;
}

// A whole Llama 3 reply: one JSON call, or several joined by ';', or text.
parsed_reply llama3_calls(std::string_view text, uint64_t reply_id) {
  std::string_view body = trim(text);
  if (body.starts_with(llama3_python_tag)) body = trim(body.substr(llama3_python_tag.size()));
  parsed_reply out;
  if (!body.starts_with("{")) return {std::string(text), {}};
  if (tool_call call; read_call(body, "parameters", reply_id, 0, call)) {
    out.calls.push_back(std::move(call));  // one call (whose strings may hold ';')
    return out;
  }
  while (!body.empty()) {
    const size_t end = std::min(body.find(';'), body.size());
    tool_call call;
    if (!read_call(trim(body.substr(0, end)), "parameters", reply_id,
                   static_cast<int>(out.calls.size()), call)) {
      return {std::string(text), {}};  // not calls after all: the reply is text
    }
    out.calls.push_back(std::move(call));
    body = trim(body.substr(std::min(end + 1, body.size())));
  }
  return out;
}

// How much of the end of `text` could be the beginning of `tag`.
size_t tag_start_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::string tool_call_id(uint64_t reply_id, int index) {
  const uint64_t a = mix(reply_id * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index));
  return absl::StrFormat("call_%016x%08x", a, static_cast<uint32_t>(mix(a)));
}

parsed_reply parse_tool_calls(std::string_view text, tool_call_format format, uint64_t reply_id) {
  return tool_call_stream(format, reply_id).finish(text);
}

tool_call_stream::tool_call_stream(tool_call_format format, uint64_t reply_id)
    : tool_call_stream(format == tool_call_format::hermes ? mode::hermes : mode::llama3_json,
                       reply_id) {}

tool_call_stream tool_call_stream::call_list(uint64_t reply_id) {
  return {mode::call_list, reply_id};
}

parsed_reply tool_call_stream::push(std::string_view text) {
  pending_ += text;
  parsed_reply out;
  read(out, false);
  return out;
}

parsed_reply tool_call_stream::finish(std::string_view text) {
  parsed_reply out = push(text);
  read(out, true);
  if (calls_ == 0) out.content += std::exchange(space_, std::string());  // text keeps its end
  return out;
}

void tool_call_stream::read(parsed_reply& out, bool end) {
  switch (mode_) {
    case mode::hermes:
      return hermes(out, end);
    case mode::llama3_json:
      return llama3_json(out, end);
    case mode::call_list:
      return call_list(out, end);
  }
}

void tool_call_stream::add_content(parsed_reply& out, std::string_view text) {
  const size_t last = text.find_last_not_of(reply_space);
  if (last == std::string_view::npos) {
    space_ += text;
    return;
  }
  out.content += std::exchange(space_, std::string());
  out.content += text.substr(0, last + 1);
  space_ = text.substr(last + 1);
}

void tool_call_stream::add_call(parsed_reply& out, tool_call call) {
  out.calls.push_back(std::move(call));
  ++calls_;
}

void tool_call_stream::hermes(parsed_reply& out, bool end) {
  constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  for (;;) {
    if (!in_call_) {
      const size_t start = pending_.find(open);
      if (start == std::string::npos) {  // all content, but what may begin a block
        const size_t held = end ? 0 : tag_start_at_end(pending_, open);
        add_content(out, std::string_view(pending_).substr(0, pending_.size() - held));
        pending_.erase(0, pending_.size() - held);
        return;
      }
      add_content(out, std::string_view(pending_).substr(0, start));
      pending_.erase(0, start);
      in_call_ = true;
    }
    const size_t stop = pending_.find(close, open.size());
    if (stop == std::string::npos) {
      if (end) {  // a block never closed is text
        add_content(out, pending_);
        pending_.clear();
      }
      return;
    }
    const std::string_view body =
        std::string_view(pending_).substr(open.size(), stop - open.size());
    if (tool_call call; read_call(trim(body), "arguments", reply_id_, calls_, call)) {
      add_call(out, std::move(call));
    } else {  // not a call: the block stays text
      add_content(out, std::string_view(pending_).substr(0, stop + close.size()));
    }
    pending_.erase(0, stop + close.size());
    in_call_ = false;
  }
}

void tool_call_stream::llama3_json(parsed_reply& out, bool end) {
  if (!decided_) {  // text or JSON: the first thing after whitespace and the tag tells
    std::string_view body = trim(pending_);
    if (body.starts_with(llama3_python_tag)) body = trim(body.substr(llama3_python_tag.size()));
    decided_ = !body.empty() &&
               !(llama3_python_tag.starts_with(body) && body.size() < llama3_python_tag.size());
    in_call_ = body.starts_with("{");
  }
  if (decided_ && !in_call_) {
    add_content(out, pending_);
  } else if (end) {  // JSON, or too little to tell: read whole
    parsed_reply whole = llama3_calls(pending_, reply_id_);
    for (auto& call : whole.calls)
      add_call(out, std::move(call));
    add_content(out, whole.content);
  } else {
    return;
  }
  pending_.clear();
}

void tool_call_stream::call_list(parsed_reply& out, bool end) {
  // pending_ keeps the whole reply: a list with no whole element is text.
  for (; scanned_ < pending_.size(); ++scanned_) {
    const char c = pending_[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (++depth_ == 2) element_ = scanned_;
    } else if (c == '}' || c == ']') {
      if (depth_-- != 2 || c != '}') continue;
      const auto item = ordered_json::parse(pending_.begin() + static_cast<ptrdiff_t>(element_),
                                            pending_.begin() + static_cast<ptrdiff_t>(scanned_) + 1,
                                            nullptr, false);
      if (!item.is_object()) continue;
      add_call(out, {tool_call_id(reply_id_, calls_), item.value("name", ""),
                     item.value("parameters", ordered_json::object()).dump()});
    }
  }
  if (end && calls_ == 0) add_content(out, pending_);
}

}  // namespace troupe::apps
