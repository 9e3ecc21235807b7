#include "apps/pretrain/corpus_tokenizer.hpp"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "models/tokenizer/bpe_trainer.hpp"
#include "runtime/base/file_lock.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps {
namespace {

std::string tokenizer_file(const data_spec& d) {
  return (std::filesystem::path(d.tokenizer) / "tokenizer.json").string();
}

absl::StatusOr<std::unique_ptr<tokenizers::tokenizer>> load_fitting(const data_spec& d, int vocab) {
  TROUPE_ASSIGN_OR_RETURN(auto t, tokenizers::tokenizer::load(tokenizer_file(d)));
  if (t->vocab_size() > vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.tokenizer: ", tokenizer_file(d), " has ", t->vocab_size(),
        " ids, more than model.vocab ", vocab, "; set model.vocab to at least ", t->vocab_size()));
  }
  return t;
}

}  // namespace

absl::Status check_corpus_tokenizer(const data_spec& d, int vocab) {
  if (d.tokenizer.empty()) {
    if (d.train_tokenizer) {
      return absl::InvalidArgumentError(
          "data.train_tokenizer is set without data.tokenizer: name the directory to train it "
          "into");
    }
    return absl::OkStatus();
  }
  if (d.format != "text") {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.tokenizer is set, but data.format is ", d.format,
        ": supervised examples and preference pairs are byte-level so far; remove it"));
  }
  if (d.train_tokenizer && !std::filesystem::exists(tokenizer_file(d))) {
    return absl::OkStatus();  // trained at launch, with model.vocab ids
  }
  if (!std::filesystem::exists(tokenizer_file(d))) {
    return absl::NotFoundError(absl::StrCat(
        "data.tokenizer: ", tokenizer_file(d),
        " does not exist; train one (troupe tokenizer train, or data.train_tokenizer: true)"));
  }
  return load_fitting(d, vocab).status();
}

absl::StatusOr<std::unique_ptr<tokenizers::tokenizer>> corpus_tokenizer(
    const data_spec& d, const actors::text_corpus& corpus, int vocab, bool* trained) {
  *trained = false;
  if (!d.train_tokenizer) return load_fitting(d, vocab);
  const file_lock lock(d.path);  // the ranks that start together: the first one trains
  if (!lock.held()) {
    return absl::NotFoundError(absl::StrCat("cannot open ", d.path, " to lock it"));
  }
  if (!std::filesystem::exists(tokenizer_file(d))) {
    std::vector<std::string> records;
    actors::split_records(corpus.train(), "%", records);
    tokenizers::bpe_training_options options;
    options.vocab_size = vocab;
    TROUPE_ASSIGN_OR_RETURN(const nlohmann::json json,
                            tokenizers::train_byte_level_bpe(records, options));
    TROUPE_RETURN_IF_ERROR(tokenizers::write_trained_tokenizer(d.tokenizer, json, options));
    *trained = true;
  }
  return load_fitting(d, vocab);
}

absl::Status tokenize_corpus(actors::text_corpus& corpus, const tokenizers::tokenizer& tokenizer,
                             int ctx, const std::string& origin) {
  return corpus.attach_tokens(tokenizer.encode(corpus.train()), tokenizer.encode(corpus.val()), ctx,
                              origin);
}

}  // namespace troupe::apps
