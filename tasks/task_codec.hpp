#pragma once

// How an RL task's text meets a model: the tokens a prompt is given as, where a response ends,
// and the text of a response that the task's rule scores. Shared by the RL app's rollout and
// `troupe data preferences` / `troupe eval`.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/vocab/model_vocabulary.hpp"
#include "runtime/actor/message_types.hpp"
#include "runtime/config/app_spec.hpp"

namespace troupe::tasks {

/// troupe's byte GPT reads a prompt's bytes, and a response ends with the task's end string
/// ("\n"). A chat model (a Hugging Face model's vocabulary) reads the prompt as the user's
/// message that its chat template renders with the assistant's turn after it
/// (models::encode_prompt), and a response ends at one of its end-of-turn tokens. Either way the
/// end stays in the output, trained on.
class task_codec {
 public:
  /// troupe's byte GPT, its responses ending with `end_string`.
  explicit task_codec(std::string end_string = "\n") : end_string_(std::move(end_string)) {}
  /// A chat model, its responses ending at one of `end_of_turn`.
  task_codec(std::shared_ptr<const models::model_vocabulary> chat, std::vector<int32_t> end_of_turn)
      : chat_(std::move(chat)), end_of_turn_(std::move(end_of_turn)) {}

  [[nodiscard]] bool chat_model() const { return chat_ != nullptr; }
  /// The tokens of a request for `prompt`; an error names what the chat template refused.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> prompt_tokens(std::string_view prompt) const;
  /// Makes `r` end where a response ends, keeping the end in its output.
  void set_stop(actor::generation_request& r) const;
  /// Whether a response's `tokens` end with the response's end.
  [[nodiscard]] bool ends(const std::vector<int32_t>& tokens) const;
  /// What the rule scores of a response that `ended` (or ran out of tokens): its text without
  /// its end; a chat model's also without an opening <think>...</think> block and the space
  /// after it (its reasoning, as vLLM's reasoning parsers split reasoning_content off).
  [[nodiscard]] std::string response_text(const std::vector<int32_t>& tokens, bool ended) const;
  /// A response as an SFT example or a preference pair records it: troupe's byte text with its
  /// end string (the data's end), a chat model's reply without its end of turn (the template
  /// writes it).
  [[nodiscard]] std::string example_text(const std::vector<int32_t>& tokens, bool ended) const;
  /// The tokens a reward model reads of a response, as its preference pairs were encoded
  /// (models::encode_example): troupe's byte text, with the end string when it `ended`; a chat
  /// model's conversation of the prompt and the reply as its template renders it, whether the
  /// reply ended or not (as veRL renders a response anew for its reward model).
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> reward_tokens(std::string_view prompt,
                                                                   std::string_view response,
                                                                   bool ended) const;
  /// The text of a prompt's or a response's tokens (a chat model's special tokens left out),
  /// for logs.
  [[nodiscard]] std::string text_of(const std::vector<int32_t>& tokens) const;
  /// The most tokens a response of at most `bytes` bytes of text takes (a token holds a byte at
  /// least): a chat model's adds its template's framing of a reply and its end of turn.
  [[nodiscard]] int max_response_tokens(int bytes) const;

 private:
  std::string end_string_;
  std::shared_ptr<const models::model_vocabulary> chat_;
  std::vector<int32_t> end_of_turn_;
};

/// The codec of the model a config's `model:` section describes: a Hugging Face model's at
/// `model.path` (its vocabulary; its end of turn: generation_config.json's eos ids), else
/// troupe's byte GPT's, its responses ending with `end_string`. INVALID_ARGUMENT for a model
/// directory that names no eos id.
[[nodiscard]] absl::StatusOr<task_codec> task_codec_of(
    const std::optional<config::model_spec>& model, const std::string& end_string = "\n");

}  // namespace troupe::tasks
