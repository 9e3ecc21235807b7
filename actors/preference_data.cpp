#include "actors/data_loader.hpp"

// Preference pairs (app: reward_model, data.format: pairs): JSONL lines {"prompt", "chosen",
// "rejected"}, each response after the prompt in the model's tokens (models/vocab/chat_tokens). The
// loader that serves them is data_loader.cpp's.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "actors/jsonl_examples.hpp"
#include "models/vocab/chat_tokens.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

// The pair of one JSONL line; INVALID_ARGUMENT saying what is wrong with it (the caller adds
// FILE:LINE).
absl::StatusOr<preference_example> pair_of(const std::string& line, int ctx,
                                           const models::model_vocabulary& vocabulary) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "not a JSON object; each line is {\"prompt\": ..., \"chosen\": ..., \"rejected\": ...}");
  }
  for (const char* field : {"prompt", "chosen", "rejected"}) {
    if (!j.contains(field) || !j[field].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field,
                       " is missing or not a string; each line is {\"prompt\": ..., "
                       "\"chosen\": ..., \"rejected\": ...}"));
    }
    // A chat model's empty reply is still a response: its template's end of turn.
    if (j[field].get_ref<const std::string&>().empty() &&
        !(vocabulary.chat_model() && std::string_view(field) != "prompt")) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is empty: ",
                       std::string_view(field) == "prompt"
                           ? "a response's first token is predicted from the prompt's last"
                           : "an empty response has no tokens to score"));
    }
  }
  const std::string& prompt = j["prompt"].get_ref<const std::string&>();
  TROUPE_ASSIGN_OR_RETURN(
      models::trained_tokens chosen,
      models::encode_example(vocabulary, prompt, j["chosen"].get_ref<const std::string&>()));
  TROUPE_ASSIGN_OR_RETURN(
      models::trained_tokens rejected,
      models::encode_example(vocabulary, prompt, j["rejected"].get_ref<const std::string&>()));
  // Each response is tokenized after the prompt's own tokens (chat_tokens.hpp), so the two
  // share them.
  preference_example pair{std::move(chosen.ids), std::move(rejected.ids)};
  pair.prompt_tokens = static_cast<int>(chosen.first_trained());
  if (j.contains("margin")) {
    if (!j["margin"].is_number() || !std::isfinite(j["margin"].get<double>())) {
      return absl::InvalidArgumentError(
          "margin is not a number; it is how much more the chosen response must score");
    }
    pair.margin = j["margin"].get<float>();
  }
  if (pair.chosen == pair.rejected) {
    return absl::InvalidArgumentError(
        "chosen and rejected are the same response: the pair prefers nothing");
  }
  for (const auto& [field, text] :
       {std::pair{"chosen", &pair.chosen}, {"rejected", &pair.rejected}}) {
    if (text->size() > static_cast<size_t>(ctx)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt + ", field, " is ", text->size(), " tokens, longer than model.ctx = ", ctx,
          "; shorten it, or raise model.ctx (troupe does not cut a sequence silently)"));
    }
  }
  return pair;
}

}  // namespace

absl::StatusOr<text_corpus> text_corpus::load_pairs(const std::string& path, double val_fraction,
                                                    int ctx,
                                                    const models::model_vocabulary& vocabulary) {
  TROUPE_RETURN_IF_ERROR(check_val_fraction(val_fraction));
  TROUPE_ASSIGN_OR_RETURN(auto split,
                          read_jsonl_examples<preference_example>(
                              path, val_fraction, [ctx, &vocabulary](const std::string& line) {
                                return pair_of(line, ctx, vocabulary);
                              }));
  return text_corpus(std::move(split.first), std::move(split.second));
}

}  // namespace troupe::actors
