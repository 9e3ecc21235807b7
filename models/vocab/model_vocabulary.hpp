#pragma once

// How an app turns text into a model's tokens and back, and conversations into a prompt: a
// Hugging Face model's tokenizer and chat template, or troupe's byte vocabulary for its own
// GPTs. The serving API speaks to the model only through this, and so do fine-tuning's data
// (chat_tokens.hpp) and the RL tasks' prompts.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// One generated sequence's text as its tokens arrive: never half a character.
class token_stream {
 public:
  virtual ~token_stream() = default;
  /// The text that `tokens` complete (empty while a character is still incomplete).
  [[nodiscard]] virtual std::string push(std::span<const int32_t> tokens) = 0;
  /// What is still held back, at the end of the sequence.
  [[nodiscard]] virtual std::string finish() = 0;
};

class model_vocabulary {
 public:
  virtual ~model_vocabulary() = default;

  /// The tokens of `text`, with the tokenizer's special tokens (a BOS) when asked.
  [[nodiscard]] virtual std::vector<int32_t> encode(absl::string_view text,
                                                    bool add_special_tokens) const = 0;
  /// The prompt text of `messages` (a JSON list of {"role", "content", ...}), with `tools`
  /// (OpenAI's tool definitions, null for none) as the template renders them; an error names
  /// the message the template refuses.
  [[nodiscard]] virtual absl::StatusOr<std::string> render_chat(
      const nlohmann::json& messages, bool add_generation_prompt,
      const nlohmann::json& tools = nullptr) const = 0;
  /// The text of `tokens`; INVALID_ARGUMENT naming an id outside the vocabulary.
  [[nodiscard]] virtual absl::StatusOr<std::string> decode(
      std::span<const int32_t> tokens) const = 0;
  /// A stream that releases `decode` of the tokens pushed so far, whole characters only.
  [[nodiscard]] virtual std::unique_ptr<token_stream> stream() const = 0;
  /// Ids are [0, vocab_size()).
  [[nodiscard]] virtual int32_t vocab_size() const = 0;
  /// How OpenAI's logprobs show one token: its text, and its bytes.
  [[nodiscard]] virtual std::string token_text(int32_t token) const = 0;
  [[nodiscard]] virtual std::vector<int> token_bytes(int32_t token) const = 0;
  /// Whether a task's prompt is a user's message that the chat template renders, the reply
  /// the assistant's turn (a Hugging Face model), rather than raw text that the model continues
  /// as it is (troupe's byte GPT).
  [[nodiscard]] virtual bool chat_model() const = 0;
};

/// troupe's own GPTs' vocabulary: a token is a byte; chat goes through troupe's template
/// (models/decoder/chat_template).
[[nodiscard]] const model_vocabulary& byte_vocabulary();

}  // namespace troupe::models
