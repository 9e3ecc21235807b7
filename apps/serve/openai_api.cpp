#include "apps/serve/openai_api.hpp"

// Rendering the OpenAI API's responses, stream chunks and errors.

#include <bit>
#include <cmath>
#include <optional>

#include "absl/strings/escaping.h"
#include "apps/serve/openai_json.hpp"

namespace troupe::apps {

using openai_json::dump;
using openai_json::json;

namespace {

const char* finish_name(actor::finish_reason r) {
  return r == actor::finish_reason::stop ? "stop" : "length";
}

}  // namespace

std::string error_body(const api_error& e) {
  return dump({{"error",
                {{"message", e.message},
                 {"type", e.type},
                 {"param", nullptr},
                 {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

std::string cut_at_stop(std::string text, const completion_call& call,
                        actor::finish_reason reason) {
  if (reason != actor::finish_reason::stop || call.request.include_stop_str_in_output) {
    return text;
  }
  size_t at = text.size();
  for (const auto& stop : call.request.stop) {
    if (!stop.empty()) at = std::min(at, text.find(stop));
  }
  text.resize(at);
  return text;
}

void choice_output::add(const actor::generation_event& e) {
  tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
  logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  top_tokens.insert(top_tokens.end(), e.top_tokens.begin(), e.top_tokens.end());
  top_values.insert(top_values.end(), e.top_values.begin(), e.top_values.end());
  if (e.finished) reason = e.reason;
}

namespace {

// OpenAI's logprobs object of `c`'s tokens, whose text starts at byte `offset` of the choice.
json logprobs_json(const choice_output& c, bool chat, size_t offset,
                   const models::model_vocabulary& vocabulary) {
  const size_t n = std::min(c.tokens.size(), c.logprobs.size());
  const size_t k = n == 0 ? 0 : c.top_tokens.size() / c.tokens.size();
  const auto token_text = [&](int32_t t) { return vocabulary.token_text(t); };
  if (chat) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) {
      json top = json::array();
      for (size_t a = 0; a < k; ++a) {
        const int32_t t = c.top_tokens[i * k + a];
        top.push_back({{"token", token_text(t)},
                       {"logprob", c.top_values[i * k + a]},
                       {"bytes", vocabulary.token_bytes(t)}});
      }
      content.push_back({{"token", token_text(c.tokens[i])},
                         {"logprob", c.logprobs[i]},
                         {"bytes", vocabulary.token_bytes(c.tokens[i])},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < n; ++i) {
    tokens.push_back(token_text(c.tokens[i]));
    values.push_back(c.logprobs[i]);
    offsets.push_back(offset + i);
    json top = json::object();
    for (size_t a = 0; a < k; ++a)
      top[token_text(c.top_tokens[i * k + a])] = c.top_values[i * k + a];
    tops.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", k > 0 ? std::move(tops) : json(nullptr)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace

std::string echoed_prompt(const completion_call& call, int choice,
                          const models::model_vocabulary& vocabulary) {
  if (!call.echo) return {};
  return vocabulary.decode(call.prompt_of(choice)).value_or(std::string());
}

namespace {

json usage_json(const completion_call& call, int completion_tokens) {
  const int prompt_tokens = call.prompt_tokens();
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

}  // namespace

uint64_t reply_seed(const std::string& id, size_t choice) {
  return std::hash<std::string>{}(id) ^ (choice * 0x9e3779b97f4a7c15ull);
}

namespace {

// OpenAI's tool_calls; a stream's also number them, from `first_index`.
json tool_calls_json(const std::vector<tool_call>& calls, std::optional<int> first_index = {}) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"id", calls[i].id},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
    if (first_index) out.back()["index"] = *first_index + static_cast<int>(i);
  }
  return out;
}

// A reply that made calls and stopped by itself ends with "tool_calls".
std::string tool_reply_finish(actor::finish_reason reason, bool called) {
  return called && reason == actor::finish_reason::stop ? "tool_calls" : finish_name(reason);
}

}  // namespace

chat_reply chat_reply_of(const completion_call& call, const api_limits& limits,
                         const std::string& text, actor::finish_reason reason, uint64_t reply_id) {
  using tool_use = completion_call::tool_use;
  if (call.tool_choice == tool_use::named) {  // the reply is the named function's arguments
    return {{{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls", tool_calls_json({{tool_call_id(reply_id, 0), call.named_tool, text}})}},
            finish_name(reason)};
  }
  if (call.tool_choice == tool_use::required || call.tool_choice == tool_use::automatic) {
    const parsed_reply parsed = tool_call_stream_of(call, limits, reply_id).finish(text);
    if (!parsed.calls.empty()) {
      return {{{"role", "assistant"},
               {"content", parsed.content.empty() ? json(nullptr) : json(parsed.content)},
               {"tool_calls", tool_calls_json(parsed.calls)}},
              tool_reply_finish(reason, true)};
    }
  }
  return {{{"role", "assistant"}, {"content", text}}, finish_name(reason)};
}

std::string embeddings_body(const api_limits& limits, const embedding_call& call,
                            std::vector<std::vector<float>> vectors) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    std::vector<float>& v = vectors[i];
    if (limits.normalize_embeddings) {
      double norm = 0;
      for (float x : v)
        norm += double{x} * x;
      norm = std::sqrt(norm);
      if (norm > 0) {
        for (float& x : v)
          x = static_cast<float>(x / norm);
      }
    }
    json embedding;
    if (call.base64) {  // little-endian f32 bytes, as OpenAI sends them
      static_assert(std::endian::native == std::endian::little);
      embedding = absl::Base64Escape(
          absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    } else {
      embedding = v;
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  int tokens = 0;
  for (const auto& input : call.inputs)
    tokens += static_cast<int>(input.size());
  return dump({{"object", "list"},
               {"data", std::move(data)},
               {"model", limits.model},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

std::string completion_body(const std::string& id, const api_limits& limits, int64_t created,
                            const completion_call& call, const std::vector<choice_output>& choices,
                            const models::model_vocabulary& vocabulary) {
  json out = json::array();
  int completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const choice_output& c = choices[i];
    completion_tokens += static_cast<int>(c.tokens.size());
    // The engine's tokens are the model's own: they always decode.
    const std::string text =
        echoed_prompt(call, static_cast<int>(i), vocabulary) +
        cut_at_stop(vocabulary.decode(c.tokens).value_or(std::string()), call, c.reason);
    json choice = {{"index", i}, {"finish_reason", finish_name(c.reason)}};
    if (call.chat) {
      chat_reply reply = chat_reply_of(call, limits, text, c.reason, reply_seed(id, i));
      choice["message"] = std::move(reply.message);
      choice["finish_reason"] = std::move(reply.finish_reason);
    } else {
      choice["text"] = text;
    }
    choice["logprobs"] = call.logprobs ? logprobs_json(c, call.chat, 0, vocabulary) : json(nullptr);
    out.push_back(std::move(choice));
  }
  return dump({{"id", id},
               {"object", call.chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", limits.model},
               {"choices", std::move(out)},
               {"usage", usage_json(call, completion_tokens)}});
}

namespace {

std::string sse(const std::string& id, const api_limits& limits, int64_t created,
                const completion_call& call, json choices, json usage) {
  json chunk = {{"id", id},
                {"object", call.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", limits.model},
                {"choices", std::move(choices)}};
  // With include_usage every chunk has a usage, null but on the last (OpenAI's stream).
  if (call.include_usage) chunk["usage"] = std::move(usage);
  return "data: " + dump(chunk) + "\n\n";
}

}  // namespace

std::string stream_chunk(const std::string& id, const api_limits& limits, int64_t created,
                         const completion_call& call, int index, const std::string& text,
                         const choice_output& piece, const actor::finish_reason* reason,
                         const models::model_vocabulary& vocabulary, bool first) {
  json choice = {{"index", index},
                 {"finish_reason", reason ? json(finish_name(*reason)) : json(nullptr)}};
  if (call.chat) {
    json delta = reason && text.empty() && !first ? json::object() : json{{"content", text}};
    if (first) delta["role"] = "assistant";
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] =
      call.logprobs ? logprobs_json(piece, call.chat, 0, vocabulary) : json(nullptr);
  return sse(id, limits, created, call, json::array({choice}), nullptr);
}

std::string stream_tool_call_chunk(const std::string& id, const api_limits& limits, int64_t created,
                                   const completion_call& call, int index,
                                   const std::string& arguments, bool first,
                                   const actor::finish_reason* reason) {
  json function = {{"arguments", arguments}};
  json tool_call = {{"index", 0}};
  json delta = json::object();
  if (first) {
    function["name"] = call.named_tool;
    tool_call["id"] = tool_call_id(reply_seed(id, static_cast<size_t>(index)), 0);
    tool_call["type"] = "function";
    delta = {{"role", "assistant"}, {"content", nullptr}};
  }
  tool_call["function"] = std::move(function);
  delta["tool_calls"] = json::array({std::move(tool_call)});
  json choice = {{"index", index},
                 {"delta", std::move(delta)},
                 {"finish_reason", reason ? json(finish_name(*reason)) : json(nullptr)},
                 {"logprobs", nullptr}};
  return sse(id, limits, created, call, json::array({std::move(choice)}), nullptr);
}

tool_call_stream tool_call_stream_of(const completion_call& call, const api_limits& limits,
                                     uint64_t reply_id) {
  return call.tool_choice == completion_call::tool_use::required
             ? tool_call_stream::call_list(reply_id)
             : tool_call_stream(limits.tool_format, reply_id);
}

std::string stream_reply_chunk(const std::string& id, const api_limits& limits, int64_t created,
                               const completion_call& call, int index, const parsed_reply& piece,
                               const tool_call_stream& calls, bool first,
                               const actor::finish_reason* reason) {
  if (piece.content.empty() && piece.calls.empty() && !reason && !first) return {};
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!piece.content.empty()) delta["content"] = piece.content;
  if (!piece.calls.empty()) {
    delta["tool_calls"] =
        tool_calls_json(piece.calls, calls.calls() - static_cast<int>(piece.calls.size()));
  }
  json choice = {{"index", index},
                 {"delta", std::move(delta)},
                 {"finish_reason",
                  reason ? json(tool_reply_finish(*reason, calls.calls() > 0)) : json(nullptr)},
                 {"logprobs", nullptr}};
  return sse(id, limits, created, call, json::array({std::move(choice)}), nullptr);
}

std::string stream_usage_chunk(const std::string& id, const api_limits& limits, int64_t created,
                               const completion_call& call, int completion_tokens) {
  return sse(id, limits, created, call, json::array(), usage_json(call, completion_tokens));
}

std::string stream_done() {
  return "data: [DONE]\n\n";
}

}  // namespace troupe::apps
