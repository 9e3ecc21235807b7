#include "models/vocab/chat_tokens.hpp"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::models {
namespace {

using json = nlohmann::json;

json first(const json& messages, size_t n) {
  return json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(n));
}

absl::Status check_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError(
        "messages must be a non-empty list of {\"role\": ..., \"content\": ...}");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object() || !messages[i].contains("role") ||
        !messages[i]["role"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "] is not an object with a string \"role\""));
    }
  }
  if (messages[0]["role"] == "assistant") {
    return absl::InvalidArgumentError(
        "messages[0] is the assistant's: a conversation starts with a system or user message "
        "that the reply answers");
  }
  return absl::OkStatus();
}

// The template's rendering of `messages`, which must begin with `prefix`: a part of the
// conversation that the whole renders alike.
absl::StatusOr<std::string> render_after(const model_vocabulary& vocabulary, const json& messages,
                                         bool add_generation_prompt, const std::string& whole,
                                         size_t message) {
  TROUPE_ASSIGN_OR_RETURN(std::string text,
                          vocabulary.render_chat(messages, add_generation_prompt));
  if (!absl::StartsWith(whole, text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "messages[", message,
        "]: the chat template renders the conversation up to this assistant message otherwise "
        "than as the start of the whole one, so the tokens of the reply cannot be told apart (a "
        "template may rewrite an earlier turn once later ones follow it); split the "
        "conversation into examples that end at each assistant message"));
  }
  return text;
}

void append(const model_vocabulary& vocabulary, std::string_view text, bool trained,
            trained_tokens& out) {
  if (text.empty()) return;
  const std::vector<int32_t> ids =
      vocabulary.encode(absl::string_view(text.data(), text.size()), /*add_special_tokens=*/false);
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  out.trained.insert(out.trained.end(), ids.size(), trained ? 1 : 0);
}

}  // namespace

size_t trained_tokens::first_trained() const {
  return static_cast<size_t>(std::find(trained.begin(), trained.end(), 1) - trained.begin());
}

std::vector<int32_t> trained_tokens::trained_ids() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (trained[i]) out.push_back(ids[i]);
  }
  return out;
}

absl::StatusOr<trained_tokens> encode_conversation(const model_vocabulary& vocabulary,
                                                   const json& messages) {
  TROUPE_RETURN_IF_ERROR(check_messages(messages));
  TROUPE_ASSIGN_OR_RETURN(const std::string whole, vocabulary.render_chat(messages, false));
  trained_tokens out;
  size_t done = 0;  // the bytes of `whole` tokenized so far
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    TROUPE_ASSIGN_OR_RETURN(const std::string prompt,
                            render_after(vocabulary, first(messages, i), true, whole, i));
    TROUPE_ASSIGN_OR_RETURN(const std::string turn,
                            render_after(vocabulary, first(messages, i + 1), false, whole, i));
    if (prompt.size() < done || turn.size() < prompt.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i,
          "]: the chat template's generation prompt is not where the assistant's message "
          "begins, so the tokens of the reply cannot be told apart"));
    }
    append(vocabulary, std::string_view(whole).substr(done, prompt.size() - done), false, out);
    append(vocabulary, std::string_view(whole).substr(prompt.size(), turn.size() - prompt.size()),
           true, out);
    done = turn.size();
  }
  if (done == 0) {
    return absl::InvalidArgumentError(
        "messages has no assistant message after the first: there is nothing to train on");
  }
  append(vocabulary, std::string_view(whole).substr(done), false, out);
  return out;
}

absl::StatusOr<trained_tokens> encode_example(const model_vocabulary& vocabulary,
                                              std::string_view prompt, std::string_view response) {
  if (vocabulary.chat_model()) {
    return encode_conversation(
        vocabulary, json::array({{{"role", "user"}, {"content", std::string(prompt)}},
                                 {{"role", "assistant"}, {"content", std::string(response)}}}));
  }
  trained_tokens out;
  append(vocabulary, prompt, false, out);
  append(vocabulary, response, true, out);
  return out;
}

absl::StatusOr<std::vector<int32_t>> encode_prompt(const model_vocabulary& vocabulary,
                                                   std::string_view prompt) {
  if (!vocabulary.chat_model()) {
    return vocabulary.encode(absl::string_view(prompt.data(), prompt.size()), false);
  }
  TROUPE_ASSIGN_OR_RETURN(
      const std::string text,
      vocabulary.render_chat(json::array({{{"role", "user"}, {"content", std::string(prompt)}}}),
                             /*add_generation_prompt=*/true));
  return vocabulary.encode(text, /*add_special_tokens=*/false);
}

}  // namespace troupe::models
