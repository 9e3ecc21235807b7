#include "actors/data_loader.hpp"

// Supervised fine-tuning data (pretrain.data.format: sft): JSONL examples whose loss covers the
// response only. The loader that serves them is data_loader.cpp's.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actors/jsonl_examples.hpp"
#include "models/gpt/chat_template.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

// The example of one JSONL line; INVALID_ARGUMENT saying what is wrong with it (the caller adds
// FILE:LINE).
absl::StatusOr<sft_example> example_of(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "not a JSON object; each line is {\"prompt\": ..., \"response\": ...} or "
        "{\"messages\": [{\"role\": ..., \"content\": ...}, ...]}");
  }
  sft_example e;
  if (j.contains("messages")) {
    absl::StatusOr<models::rendered_chat> chat =
        models::render_chat(j["messages"], /*add_generation_prompt=*/false);
    if (!chat.ok()) return chat.status();
    e.text = std::move(chat->text);
    e.trained = std::move(chat->assistant);
    if (std::find(e.trained.begin(), e.trained.end(), 1) == e.trained.end()) {
      return absl::InvalidArgumentError(
          "messages has no assistant message: there is nothing to train on");
    }
    return e;
  }
  for (const char* field : {"prompt", "response"}) {
    if (!j.contains(field) || !j[field].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field,
          " is missing or not a string; each line is {\"prompt\": ..., \"response\": ...} "
          "or {\"messages\": [...]}"));
    }
    if (j[field].get_ref<const std::string&>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is empty: ",
                       std::string_view(field) == "prompt"
                           ? "the response's first byte is predicted from the prompt's last"
                           : "there is nothing to train on"));
    }
  }
  const std::string& prompt = j["prompt"].get_ref<const std::string&>();
  const std::string& response = j["response"].get_ref<const std::string&>();
  e.text = prompt + response;
  e.trained.assign(prompt.size(), 0);
  e.trained.insert(e.trained.end(), response.size(), 1);
  return e;
}

}  // namespace

int64_t sft_example::trained_targets() const {
  int64_t n = 0;
  for (size_t t = 1; t < trained.size(); ++t)
    n += trained[t];
  return n;
}

absl::StatusOr<text_corpus> text_corpus::load_sft(const std::string& path, double val_fraction,
                                                  int ctx) {
  TROUPE_RETURN_IF_ERROR(check_val_fraction(val_fraction));
  TROUPE_ASSIGN_OR_RETURN(
      auto split,
      read_jsonl_examples<sft_example>(
          path, val_fraction, [ctx](const std::string& line) -> absl::StatusOr<sft_example> {
            TROUPE_ASSIGN_OR_RETURN(sft_example e, example_of(line));
            if (e.text.size() > static_cast<size_t>(ctx) + 1) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "the example is ", e.text.size(), " bytes, longer than model.ctx + 1 = ", ctx + 1,
                  "; shorten it, or raise model.ctx (troupe does not cut an example "
                  "silently)"));
            }
            return e;
          }));
  return text_corpus(std::move(split.first), std::move(split.second));
}

}  // namespace troupe::actors
