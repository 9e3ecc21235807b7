#include "models/vocab/hf_vocabulary.hpp"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "models/decoder/chat_template.hpp"
#include "models/tokenizer/incremental_detokenizer.hpp"
#include "models/tokenizer/utf8.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

namespace {

class hf_token_stream final : public token_stream {
 public:
  explicit hf_token_stream(const tokenizers::tokenizer& t) : tokenizer_(t), detokenizer_(t, {}) {}
  // The engine's tokens are the model's own; one the tokenizer lacks (a padding row the model
  // sampled) has no text.
  std::string push(std::span<const int32_t> tokens) override {
    std::string out;
    for (int32_t t : tokens) {
      if (tokenizer_.id_to_token(t)) out += detokenizer_.push(t).value_or(std::string());
    }
    return out;
  }
  std::string finish() override { return detokenizer_.finish().value_or(std::string()); }

 private:
  const tokenizers::tokenizer& tokenizer_;
  tokenizers::incremental_detokenizer detokenizer_;
};

}  // namespace

hf_vocabulary::hf_vocabulary(std::unique_ptr<tokenizers::tokenizer> tokenizer,
                             std::optional<chat::hf_chat_template> chat, int32_t model_vocab)
    : tokenizer_(std::move(tokenizer)), chat_(std::move(chat)), model_vocab_(model_vocab) {}

absl::StatusOr<std::unique_ptr<hf_vocabulary>> hf_vocabulary::load(const std::string& model_dir,
                                                                   int32_t model_vocab) {
  const std::string path = model_dir + "/tokenizer.json";
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat(
        path,
        " is absent: troupe reads and writes a model's text with the tokenizer it ships (HF "
        "tokenizers' tokenizer.json); copy it into the model directory"));
  }
  TROUPE_ASSIGN_OR_RETURN(auto tokenizer, tokenizers::tokenizer::load(path));
  if (tokenizer->vocab_size() > model_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ids up to ", tokenizer->vocab_size() - 1, ", but ", model_dir,
        "/config.json's vocab_size is ", model_vocab, ": the tokenizer is not this model's"));
  }
  std::optional<chat::hf_chat_template> chat;
  if (auto loaded = chat::hf_chat_template::load(model_dir); loaded.ok()) {
    chat = *std::move(loaded);
  } else if (loaded.status().code() != absl::StatusCode::kNotFound) {
    return loaded.status();
  }
  return std::unique_ptr<hf_vocabulary>(
      new hf_vocabulary(std::move(tokenizer), std::move(chat), model_vocab));
}

std::vector<int32_t> hf_vocabulary::encode(absl::string_view text, bool add_special_tokens) const {
  return tokenizer_->encode(text, add_special_tokens);
}

absl::StatusOr<std::string> hf_vocabulary::render_chat(const nlohmann::json& messages,
                                                       bool add_generation_prompt,
                                                       const nlohmann::json& tools) const {
  if (!chat_) return byte_vocabulary().render_chat(messages, add_generation_prompt, tools);
  if (!messages.is_array()) return absl::InvalidArgumentError("'messages' must be a list");
  chat::chat_render_options options;
  options.add_generation_prompt = add_generation_prompt;
  options.tools = tools;
  return chat_->render(messages, options);
}

absl::StatusOr<std::string> hf_vocabulary::decode(std::span<const int32_t> tokens) const {
  // Ids of the model's padding rows have no text (HF's decode skips ids it has no token for).
  std::vector<int32_t> known;
  known.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= model_vocab_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " (at index ", i, ") is outside the vocabulary of ", model_vocab_));
    }
    if (tokenizer_->id_to_token(tokens[i])) known.push_back(tokens[i]);
  }
  return tokenizer_->decode(known, /*skip_special_tokens=*/true);
}

std::unique_ptr<token_stream> hf_vocabulary::stream() const {
  return std::make_unique<hf_token_stream>(*tokenizer_);
}

std::string hf_vocabulary::token_text(int32_t token) const {
  return tokenizers::to_valid_utf8(tokenizer_->token_bytes(token));
}

std::vector<int> hf_vocabulary::token_bytes(int32_t token) const {
  const std::string bytes = tokenizer_->token_bytes(token);
  return std::vector<int>(reinterpret_cast<const uint8_t*>(bytes.data()),
                          reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size());
}

std::vector<std::string> hf_vocabulary::token_texts() const {
  std::vector<std::string> out(model_vocab_);
  // A special token has no text in the output (decode skips it, as vLLM's does).
  for (int32_t id = 0; id < model_vocab_; ++id) {
    if (!tokenizer_->is_special(id)) out[id] = tokenizer_->token_bytes(id);
  }
  return out;
}

}  // namespace troupe::models
