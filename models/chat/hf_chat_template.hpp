#pragma once

// A model's own chat template, as Hugging Face ships it (tokenizer_config.json's
// "chat_template", or chat_template.jinja beside it), rendered as transformers'
// apply_chat_template renders it: the variables messages, tools, documents,
// add_generation_prompt, the special tokens (bos_token, eos_token, ...) and any extra
// template arguments (enable_thinking, date_string, ...).

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/chat/jinja_template.hpp"
#include "nlohmann/json.hpp"

namespace troupe::chat {

/// What a conversation is rendered with, besides its messages.
struct chat_render_options {
  bool add_generation_prompt = false;
  /// OpenAI-style tool definitions ([{"type": "function", "function": {...}}]); null for none.
  nlohmann::json tools = nullptr;
  /// Extra template arguments (an object), e.g. {"enable_thinking": false}.
  nlohmann::json extra = nlohmann::json::object();
};

class hf_chat_template {
 public:
  /// The template of a model directory: chat_template.jinja when present, else
  /// tokenizer_config.json's "chat_template" (a text, or a list of {name, template} whose
  /// "default" is used, and "tool_use" when tools are given). NOT_FOUND when the model ships
  /// none; INVALID_ARGUMENT naming the file for one that does not parse.
  [[nodiscard]] static absl::StatusOr<hf_chat_template> load(const std::string& model_dir);
  /// The same from tokenizer_config.json's contents; `where` names it in errors.
  [[nodiscard]] static absl::StatusOr<hf_chat_template> from_config(const nlohmann::json& config,
                                                                    const std::string& where);
  /// A template given as text, with the special tokens of `config` (may be empty).
  [[nodiscard]] static absl::StatusOr<hf_chat_template> from_source(const std::string& source,
                                                                    const nlohmann::json& config,
                                                                    const std::string& where);

  /// The text of `messages` (a JSON list of {"role", "content", ...}). Errors name what
  /// failed: a message the template refuses (raise_exception), or a value it cannot use.
  [[nodiscard]] absl::StatusOr<std::string> render(const nlohmann::json& messages,
                                                   const chat_render_options& options) const;

  /// The special tokens the template sees, e.g. {"bos_token": "<|begin_of_text|>", ...}.
  [[nodiscard]] const nlohmann::json& special_tokens() const { return special_tokens_; }

 private:
  std::string where_;
  jinja::jinja_template default_;
  std::optional<jinja::jinja_template> tool_use_;
  nlohmann::json special_tokens_ = nlohmann::json::object();
};

}  // namespace troupe::chat
