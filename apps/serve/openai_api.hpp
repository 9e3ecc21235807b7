#pragma once

// The OpenAI-compatible HTTP API of the serving app, without a server: request bodies parsed and
// checked into generation requests, and responses, stream chunks and errors rendered as the
// OpenAI clients expect them, with vLLM's /tokenize and /detokenize. Text becomes tokens and
// back through the model's vocabulary (troupe's byte vocabulary by default).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "apps/serve/tool_calls.hpp"
#include "models/vocab/model_vocabulary.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::apps {

/// An API error: the HTTP status and OpenAI's {"error": {"message", "type", "code"}}.
struct api_error {
  int http_status = 400;
  std::string type;  ///< "invalid_request_error", "authentication_error", ...
  std::string code;  ///< machine-readable, e.g. "context_length_exceeded"; may be empty
  std::string message;
};

/// The JSON body of an error.
[[nodiscard]] std::string error_body(const api_error& e);

/// What the served model allows.
struct api_limits {
  std::string model;  ///< the name clients must ask for
  int ctx = 128;      ///< prompt + output tokens
  int default_max_tokens = 16;
  /// The model's end-of-sequence tokens (generation_config.json's eos_token_id): every request
  /// stops at them unless it asks for ignore_eos.
  std::vector<int32_t> stop_token_ids;
  /// How the model writes tool calls (its chat template's convention).
  tool_call_format tool_format = tool_call_format::hermes;
  /// Embeddings (serve.pooler_config, vLLM's): how the hidden states are pooled, and whether
  /// the vectors are scaled to unit length.
  actor::pooling_type pooling = actor::pooling_type::last;
  bool normalize_embeddings = true;
};

/// A parsed /v1/completions or /v1/chat/completions call.
struct completion_call {
  /// What every choice asks for; id left 0 (the server numbers requests), prompt empty.
  actor::generation_request request;
  /// The prompts: one, or a batch (completions' list of texts or of token-id lists). Choice
  /// p × n + k is the k-th generation of prompt p, seeded seed + k.
  std::vector<std::vector<int32_t>> prompts;
  bool stream = false;
  bool chat = false;
  int n = 1;                   ///< generations per prompt
  bool logprobs = false;       ///< each token's log-prob (and request.top_logprobs alternatives)
  bool seeded = false;         ///< the call gave a seed (0 included); else the server draws one
  bool echo = false;           ///< completions: each choice's text starts with its prompt's
  bool include_usage = false;  ///< stream_options.include_usage: a last chunk with the usage
  /// Chat's tools (OpenAI's definitions, rendered by the chat template; null: none), and how the
  /// reply may call them: not at all, as it chooses (its calls parsed from its text), or the
  /// named function, whose arguments the reply is (guided by its parameters' schema).
  nlohmann::json tools;
  /// none; automatic (the model chooses); named (the reply is that function's arguments);
  /// required (the reply is a list of one or more calls, [{"name", "parameters"}], as vLLM's).
  enum class tool_use { none, automatic, named, required } tool_choice = tool_use::none;
  std::string named_tool;

  [[nodiscard]] int choices() const { return static_cast<int>(prompts.size()) * n; }
  [[nodiscard]] const std::vector<int32_t>& prompt_of(int choice) const {
    return prompts[choice / n];
  }
  [[nodiscard]] int prompt_tokens() const;  ///< over the prompts, each counted once
};

/// What one choice generated: its tokens, with their log-probs when asked for, and why it ended.
struct choice_output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<int32_t> top_tokens;  ///< request.top_logprobs per token
  std::vector<float> top_values;
  actor::finish_reason reason = actor::finish_reason::length;

  /// Appends an event's tokens and log-probs.
  void add(const actor::generation_event& e);
};

/// A choice's text as the API shows it: when it ended on a stop string that the call keeps out,
/// cut where the stop string begins (the engine keeps a token that holds text before the stop
/// string, as vLLM keeps the token ids and cuts the text).
[[nodiscard]] std::string cut_at_stop(std::string text, const completion_call& call,
                                      actor::finish_reason reason);

/// Parses and checks a request body. `prompt` is a text, a list of token ids, or a batch: a list
/// of texts or of token-id lists (as the OpenAI API allows). A chat message's content is a text
/// or a list of text parts, joined with newlines (vLLM's "string" content format). Malformed
/// JSON, unknown fields and bad values (a token id outside the vocabulary) are 400s naming the
/// field; another model is 404; a prompt that leaves no room in the context is 413. Besides
/// OpenAI's fields, vLLM's stop_token_ids, ignore_eos, min_tokens, repetition_penalty and
/// include_stop_str_in_output are read; the request stops at limits.stop_token_ids unless
/// ignore_eos.
[[nodiscard]] std::variant<completion_call, api_error> parse_completion(
    absl::string_view body, const api_limits& limits, bool chat,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary());

/// A parsed POST /v1/embeddings call (OpenAI's): each input's token ids, and how the vectors go
/// back.
struct embedding_call {
  std::vector<std::vector<int32_t>> inputs;
  bool base64 = false;  ///< encoding_format "base64" (the OpenAI Node client's), else "float"
};

/// OpenAI's embeddings request: model, input (a text, a list of token ids, or a batch of
/// either, as a completion's prompt), encoding_format ("float" or "base64") and user;
/// `dimensions` is refused (the vectors have the model's width). 400 naming the field, 404 for
/// another model, 413 for an input as long as the context.
[[nodiscard]] std::variant<embedding_call, api_error> parse_embeddings(
    absl::string_view body, const api_limits& limits,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary());
/// The body of an embeddings answer: `vectors[i]` for input i (scaled to unit length when
/// limits.normalize_embeddings), as floats or as the base64 of its little-endian f32 bytes, and
/// the prompt tokens counted in the usage.
[[nodiscard]] std::string embeddings_body(const api_limits& limits, const embedding_call& call,
                                          std::vector<std::vector<float>> vectors);

/// vLLM's POST /tokenize: {"prompt": text, "add_special_tokens": true} or {"messages": [...],
/// "add_generation_prompt": true, "add_special_tokens": false} (and an optional "model") to
/// the body {"tokens": [...], "count": n, "max_model_len": ctx}, or a 400 naming the field.
[[nodiscard]] std::variant<std::string, api_error> tokenize(
    absl::string_view body, const api_limits& limits,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary());
/// vLLM's POST /detokenize: {"tokens": [...]} to {"prompt": text}, or a 400 naming the token.
[[nodiscard]] std::variant<std::string, api_error> detokenize(
    absl::string_view body, const api_limits& limits,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary());

/// The body of a finished, non-streamed completion: one choice per output, with OpenAI's
/// `logprobs` when the call asked for them (completions: tokens, token_logprobs, top_logprobs,
/// text_offset; chat: content[{token, logprob, bytes, top_logprobs}]).
[[nodiscard]] std::string completion_body(
    const std::string& id, const api_limits& limits, int64_t created, const completion_call& call,
    const std::vector<choice_output>& choices,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary());

/// A chat choice's assistant message for its whole `text` (stop strings already cut): the
/// content, or the tool calls it makes (call ids from `reply_id` and the choice), with the
/// finish reason OpenAI gives it ("tool_calls" when the reply chose to call).
struct chat_reply {
  nlohmann::json message;
  std::string finish_reason;
};
[[nodiscard]] chat_reply chat_reply_of(const completion_call& call, const api_limits& limits,
                                       const std::string& text, actor::finish_reason reason,
                                       uint64_t reply_id);

/// A stream's chunk of a named tool_choice's call, as OpenAI streams one: the `first` announces
/// it (role, the call's id, type and name, with `arguments` so far), each later one carries the
/// next piece of its arguments; `reason` ends it.
[[nodiscard]] std::string stream_tool_call_chunk(const std::string& id, const api_limits& limits,
                                                 int64_t created, const completion_call& call,
                                                 int index, const std::string& arguments,
                                                 bool first, const actor::finish_reason* reason);

/// A choice's seed of tool-call ids: its reply's id ("chatcmpl-...") and index.
[[nodiscard]] uint64_t reply_seed(const std::string& id, size_t choice);

/// How the reply of an automatic or required tool_choice is read for calls (reply_id: the
/// choice's reply_seed).
[[nodiscard]] tool_call_stream tool_call_stream_of(const completion_call& call,
                                                   const api_limits& limits, uint64_t reply_id);

/// A stream's chunk of an automatic or required tool_choice's reply: `piece`, the content and
/// calls that `calls` has just read (the calls numbered after those before them); the choice's
/// `first` chunk also says the role; `reason` ends it ("tool_calls" when it made calls). Empty
/// when there is nothing to send.
[[nodiscard]] std::string stream_reply_chunk(const std::string& id, const api_limits& limits,
                                             int64_t created, const completion_call& call,
                                             int index, const parsed_reply& piece,
                                             const tool_call_stream& calls, bool first,
                                             const actor::finish_reason* reason);

/// A completion choice's echoed prompt (call.echo): the text its stream or body starts with.
[[nodiscard]] std::string echoed_prompt(const completion_call& call, int choice,
                                        const models::model_vocabulary& vocabulary);

/// One Server-Sent Events chunk ("data: {...}\n\n") of a streamed completion: choice `index`'s
/// `text`, the log-probs of `piece`'s tokens when the call asked for them, and the finish reason
/// on its last chunk. A chat choice's `first` chunk also says the role, as OpenAI's do.
[[nodiscard]] std::string stream_chunk(
    const std::string& id, const api_limits& limits, int64_t created, const completion_call& call,
    int index, const std::string& text, const choice_output& piece,
    const actor::finish_reason* reason,
    const models::model_vocabulary& vocabulary = models::byte_vocabulary(), bool first = false);

/// stream_options.include_usage's last chunk: no choices, and the usage of `choices`.
[[nodiscard]] std::string stream_usage_chunk(const std::string& id, const api_limits& limits,
                                             int64_t created, const completion_call& call,
                                             int completion_tokens);

/// The stream's end: "data: [DONE]\n\n".
[[nodiscard]] std::string stream_done();

}  // namespace troupe::apps
