#include "tasks/task_codec.hpp"

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/decoder/byte_vocab.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/hf/hf_config.hpp"
#include "models/vocab/chat_tokens.hpp"
#include "runtime/base/status.hpp"

namespace troupe::tasks {

absl::StatusOr<std::vector<int32_t>> task_codec::prompt_tokens(std::string_view prompt) const {
  if (!chat_) return models::tokens_of(prompt);
  return models::encode_prompt(*chat_, prompt);
}

void task_codec::set_stop(actor::generation_request& r) const {
  if (chat_) {
    r.stop_token_ids = end_of_turn_;
  } else {
    r.stop = {end_string_};
  }
  r.include_stop_str_in_output = true;
}

bool task_codec::ends(const std::vector<int32_t>& tokens) const {
  if (chat_) return !tokens.empty() && absl::c_linear_search(end_of_turn_, tokens.back());
  return absl::EndsWith(models::text_of(tokens), end_string_);
}

std::string task_codec::response_text(const std::vector<int32_t>& tokens, bool ended) const {
  if (!chat_) {
    std::string text = models::text_of(tokens);
    if (ended) text.resize(text.size() - end_string_.size());
    return text;
  }
  std::string text =
      chat_->decode(std::span<const int32_t>(tokens.data(), tokens.size() - (ended ? 1 : 0)))
          .value_or(std::string());
  if (absl::StartsWith(text, "<think>")) {
    if (const size_t end = text.find("</think>"); end != std::string::npos) {
      const size_t answer =
          text.find_first_not_of(" \t\r\n", end + std::string_view("</think>").size());
      text.erase(0, answer == std::string::npos ? text.size() : answer);
    }
  }
  return text;
}

std::string task_codec::example_text(const std::vector<int32_t>& tokens, bool ended) const {
  return chat_ ? response_text(tokens, ended) : models::text_of(tokens);
}

absl::StatusOr<std::vector<int32_t>> task_codec::reward_tokens(std::string_view prompt,
                                                               std::string_view response,
                                                               bool ended) const {
  if (!chat_) {
    std::string text(prompt);
    text.append(response).append(ended ? end_string_ : "");
    return models::tokens_of(text);
  }
  TROUPE_ASSIGN_OR_RETURN(models::trained_tokens t,
                          models::encode_example(*chat_, prompt, response));
  return std::move(t.ids);
}

std::string task_codec::text_of(const std::vector<int32_t>& tokens) const {
  return chat_ ? chat_->decode(tokens).value_or(std::string()) : models::text_of(tokens);
}

int task_codec::max_response_tokens(int bytes) const {
  if (!chat_) return bytes;
  // The framing is what an empty reply trains on: Qwen 3's empty <think> block, the end of turn.
  const absl::StatusOr<models::trained_tokens> empty = models::encode_example(*chat_, "x", "");
  return bytes + (empty.ok() ? static_cast<int>(empty->trained_ids().size()) : 0);
}

absl::StatusOr<task_codec> task_codec_of(const std::optional<config::model_spec>& model,
                                         const std::string& end_string) {
  const std::string dir = models::hf_model_dir(model);
  if (dir.empty()) return task_codec(end_string);
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const models::model_vocabulary> chat,
                          models::vocabulary_of(model));
  TROUPE_ASSIGN_OR_RETURN(const models::hf_model_config hf, models::load_hf_config(dir));
  if (hf.eos_token_ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.path: ", dir,
        " names no eos_token_id (config.json, generation_config.json), so a response would "
        "never end; add the model's end-of-turn token ids to generation_config.json"));
  }
  return task_codec(std::move(chat), hf.eos_token_ids);
}

}  // namespace troupe::tasks
