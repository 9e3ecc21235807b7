#pragma once

// Fine-tuning data as a model reads it: a conversation, or a prompt and its response, made the
// model's tokens with, per token, whether the loss covers it. A Hugging Face model's text is
// what its own chat template renders; troupe's byte GPT reads a prompt and its response as raw
// text, and conversations through troupe's template.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/vocab/model_vocabulary.hpp"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// Token ids, and per id whether a fine-tuning loss is on predicting it (1) or not (0).
struct trained_tokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
  /// Where the first trained id is (ids.size() when none is).
  [[nodiscard]] size_t first_trained() const;
  /// The trained ids, in order: what the loss predicts.
  [[nodiscard]] std::vector<int32_t> trained_ids() const;
};

/// The tokens of `messages` (a JSON list of {"role", "content", ...}) as the template renders
/// the whole conversation, each assistant message trained on with whatever the template
/// writes after it to end its turn (<|im_end|>, <|eot_id|>, troupe's newline). An assistant
/// message's part is what rendering the conversation up to it adds to rendering the one before
/// it with the generation prompt; the parts are tokenized one by one, as a prompt and the reply
/// generated to it are. INVALID_ARGUMENT naming the message: a list that is not one of objects
/// with a string "role", no assistant message after a first message, or a template that renders
/// a shorter conversation as other than the start of the longer one (Qwen 3 rewrites an earlier
/// assistant turn once a later user message follows it: train on conversations that end at it).
[[nodiscard]] absl::StatusOr<trained_tokens> encode_conversation(const model_vocabulary& vocabulary,
                                                                 const nlohmann::json& messages);

/// A prompt and its response. A chat model's (model_vocabulary::chat_model) is the conversation
/// of the prompt as the user's message and the response as the assistant's; troupe's byte GPT
/// reads the prompt's bytes and then the response's, trained on the response's.
[[nodiscard]] absl::StatusOr<trained_tokens> encode_example(const model_vocabulary& vocabulary,
                                                            std::string_view prompt,
                                                            std::string_view response);

/// What a model is prompted with for a task's `prompt`: a chat model's template rendering it as
/// the user's message followed by the assistant's turn, or troupe's byte GPT its bytes.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> encode_prompt(const model_vocabulary& vocabulary,
                                                                 std::string_view prompt);

}  // namespace troupe::models
