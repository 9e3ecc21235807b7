#include "apps/serve/tool_calls.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace troupe::apps {
namespace {

using json = nlohmann::json;

std::string_view trim(std::string_view s) {
  constexpr std::string_view space = " \t\r\n";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// {"name": string, <arguments_key>: object} as a call, or nothing.
bool read_call(std::string_view text, const char* arguments_key, uint64_t reply_id, int index,
               tool_call& out) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const json arguments = j.value(arguments_key, json::object());
  if (!arguments.is_object()) return false;
  out = {tool_call_id(reply_id, index), j["name"].get<std::string>(), arguments.dump()};
  return true;
}

parsed_reply hermes(std::string_view text, uint64_t reply_id) {
  constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  parsed_reply out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t start = text.find(open, at);
    const size_t end =
        start == std::string_view::npos ? std::string_view::npos : text.find(close, start);
    if (end == std::string_view::npos) break;
    const std::string_view body = text.substr(start + open.size(), end - start - open.size());
    tool_call call;
    if (read_call(trim(body), "arguments", reply_id, static_cast<int>(out.calls.size()), call)) {
      out.content += text.substr(at, start - at);
      out.calls.push_back(std::move(call));
    } else {
      out.content += text.substr(at, end + close.size() - at);
    }
    at = end + close.size();
  }
  if (at < text.size()) out.content += text.substr(at);
  if (!out.calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

parsed_reply llama3_json(std::string_view text, uint64_t reply_id) {
  std::string_view body = trim(text);
  constexpr std::string_view tag = "<|python_tag|>";
  if (body.starts_with(tag)) body = trim(body.substr(tag.size()));
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

}  // namespace

std::string tool_call_id(uint64_t reply_id, int index) {
  const uint64_t a = mix(reply_id * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index));
  return absl::StrFormat("call_%016x%08x", a, static_cast<uint32_t>(mix(a)));
}

parsed_reply parse_tool_calls(std::string_view text, tool_call_format format, uint64_t reply_id) {
  return format == tool_call_format::hermes ? hermes(text, reply_id) : llama3_json(text, reply_id);
}

}  // namespace troupe::apps
