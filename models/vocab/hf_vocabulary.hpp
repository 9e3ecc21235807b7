#pragma once

// A Hugging Face model's serving vocabulary: its tokenizer.json, and the chat template it ships
// (tokenizer_config.json's or chat_template.jinja; troupe's own only when it ships none).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/chat/hf_chat_template.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/vocab/model_vocabulary.hpp"

namespace troupe::models {

class hf_vocabulary final : public model_vocabulary {
 public:
  /// The vocabulary of the model in `model_dir`, whose config.json says `model_vocab` (the
  /// embedding's rows: often more than the tokenizer's ids, the rest padding). Errors name the
  /// file: tokenizer.json absent or unreadable, a template that does not parse, a tokenizer with
  /// more ids than the model has rows.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<hf_vocabulary>> load(
      const std::string& model_dir, int32_t model_vocab);

  std::vector<int32_t> encode(absl::string_view text, bool add_special_tokens) const override;
  absl::StatusOr<std::string> render_chat(const nlohmann::json& messages,
                                          bool add_generation_prompt,
                                          const nlohmann::json& tools = nullptr) const override;
  /// Special tokens are left out of the text, as vLLM's skip_special_tokens does by default.
  absl::StatusOr<std::string> decode(std::span<const int32_t> tokens) const override;
  std::unique_ptr<token_stream> stream() const override;
  int32_t vocab_size() const override { return model_vocab_; }
  std::string token_text(int32_t token) const override;
  std::vector<int> token_bytes(int32_t token) const override;
  bool chat_model() const override { return true; }

  /// The bytes of every id below vocab_size() as the output's text holds them (empty for
  /// padding ids and special tokens, which decode skips): the engine matches stop strings and
  /// structured output on them.
  [[nodiscard]] std::vector<std::string> token_texts() const;

 private:
  hf_vocabulary(std::unique_ptr<tokenizers::tokenizer> tokenizer,
                std::optional<chat::hf_chat_template> chat, int32_t model_vocab);

  std::unique_ptr<tokenizers::tokenizer> tokenizer_;
  std::optional<chat::hf_chat_template> chat_;  // none: troupe's template
  int32_t model_vocab_;
};

}  // namespace troupe::models
