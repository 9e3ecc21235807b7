#include "actors/data_loader.hpp"

// Supervised fine-tuning data (pretrain.data.format: sft): JSONL examples in the model's tokens
// (models/vocab/chat_tokens), whose loss covers the response only. The loader that serves them is
// data_loader.cpp's.

#include "absl/strings/str_cat.h"
#include "actors/jsonl_examples.hpp"
#include "models/vocab/chat_tokens.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

// The example of one JSONL line in `vocabulary`'s tokens; INVALID_ARGUMENT saying what is wrong
// with it (the caller adds FILE:LINE).
absl::StatusOr<sft_example> example_of(const std::string& line,
                                       const models::model_vocabulary& vocabulary) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "not a JSON object; each line is {\"prompt\": ..., \"response\": ...} or "
        "{\"messages\": [{\"role\": ..., \"content\": ...}, ...]}");
  }
  if (j.contains("messages")) {
    TROUPE_ASSIGN_OR_RETURN(models::trained_tokens t,
                            models::encode_conversation(vocabulary, j["messages"]));
    return sft_example{std::move(t.ids), std::move(t.trained)};
  }
  for (const char* field : {"prompt", "response"}) {
    if (!j.contains(field) || !j[field].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field,
          " is missing or not a string; each line is {\"prompt\": ..., \"response\": ...} "
          "or {\"messages\": [...]}"));
    }
    // A chat model's reply is framed by its template and ends with its end of turn, which
    // an empty response still trains on.
    if (j[field].get_ref<const std::string&>().empty() &&
        !(vocabulary.chat_model() && std::string_view(field) == "response")) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is empty: ",
                       std::string_view(field) == "prompt"
                           ? "the response's first token is predicted from the prompt's last"
                           : "there is nothing to train on"));
    }
  }
  TROUPE_ASSIGN_OR_RETURN(
      models::trained_tokens t,
      models::encode_example(vocabulary, j["prompt"].get_ref<const std::string&>(),
                             j["response"].get_ref<const std::string&>()));
  return sft_example{std::move(t.ids), std::move(t.trained)};
}

}  // namespace

int64_t sft_example::trained_targets() const {
  int64_t n = 0;
  for (size_t t = 1; t < trained.size(); ++t)
    n += trained[t];
  return n;
}

absl::StatusOr<text_corpus> text_corpus::load_sft(const std::string& path, double val_fraction,
                                                  int ctx,
                                                  const models::model_vocabulary& vocabulary) {
  TROUPE_RETURN_IF_ERROR(check_val_fraction(val_fraction));
  TROUPE_ASSIGN_OR_RETURN(
      auto split, read_jsonl_examples<sft_example>(
                      path, val_fraction,
                      [ctx, &vocabulary](const std::string& line) -> absl::StatusOr<sft_example> {
                        TROUPE_ASSIGN_OR_RETURN(sft_example e, example_of(line, vocabulary));
                        if (e.tokens.size() > static_cast<size_t>(ctx) + 1) {
                          return absl::InvalidArgumentError(absl::StrCat(
                              "the example is ", e.tokens.size(),
                              " tokens, longer than model.ctx + 1 = ", ctx + 1,
                              "; shorten it, or raise model.ctx (troupe does not cut an example "
                              "silently)"));
                        }
                        return e;
                      }));
  return text_corpus(std::move(split.first), std::move(split.second));
}

}  // namespace troupe::actors
