#include "models/vocab/model_vocabulary.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/decoder/byte_vocab.hpp"
#include "models/decoder/chat_template.hpp"
#include "models/tokenizer/utf8.hpp"

namespace troupe::models {

namespace {

// Bytes arrive one token each; a character's bytes are released once it is whole.
class byte_stream final : public token_stream {
 public:
  std::string push(std::span<const int32_t> tokens) override {
    for (int32_t t : tokens)
      pending_.push_back(static_cast<char>(t));
    const size_t whole = tokenizers::complete_prefix_length(pending_);
    std::string out = pending_.substr(0, whole);
    pending_.erase(0, whole);
    return out;
  }
  std::string finish() override { return std::exchange(pending_, std::string()); }

 private:
  std::string pending_;
};

class byte_vocabulary_impl final : public model_vocabulary {
 public:
  std::vector<int32_t> encode(absl::string_view text, bool) const override {
    return models::tokens_of(std::string_view(text.data(), text.size()));
  }
  // troupe's template; tools come first, as "<|tools|>\n" and their JSON list on one line.
  absl::StatusOr<std::string> render_chat(const nlohmann::json& messages,
                                          bool add_generation_prompt,
                                          const nlohmann::json& tools = nullptr) const override {
    auto rendered = models::render_chat(messages, add_generation_prompt);
    if (!rendered.ok()) return rendered.status();
    if (tools.is_null()) return std::move(rendered->text);
    return absl::StrCat("<|tools|>\n",
                        tools.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "\n",
                        rendered->text);
  }
  absl::StatusOr<std::string> decode(std::span<const int32_t> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] > 255) {
        return absl::InvalidArgumentError(absl::StrCat("token ", tokens[i], " (at index ", i,
                                                       ") is outside the vocabulary of 256"));
      }
    }
    return models::text_of(std::vector<int32_t>(tokens.begin(), tokens.end()));
  }
  std::unique_ptr<token_stream> stream() const override { return std::make_unique<byte_stream>(); }
  int32_t vocab_size() const override { return 256; }
  std::string token_text(int32_t t) const override {
    // A byte that is not a whole UTF-8 character is shown as OpenAI shows partial tokens.
    return t < 0x80 ? std::string(1, static_cast<char>(t)) : absl::StrFormat("bytes:\\x%02x", t);
  }
  std::vector<int> token_bytes(int32_t t) const override { return {t}; }
  bool chat_model() const override { return false; }
};

}  // namespace

const model_vocabulary& byte_vocabulary() {
  static const byte_vocabulary_impl vocabulary;
  return vocabulary;
}

}  // namespace troupe::models
