#pragma once

// pretrain.data.tokenizer: text read as a real vocabulary's ids instead of bytes, and the
// vocabulary trained from the training text first when the config asks for it.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "actors/data_loader.hpp"
#include "apps/pretrain/pretrain_options.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace troupe::apps {

/// What `troupe check` can say before any process starts: with data.tokenizer, the format is
/// text and the directory's tokenizer.json (unless data.train_tokenizer will write it) loads
/// and has at most `vocab` ids; train_tokenizer needs a tokenizer directory.
[[nodiscard]] absl::Status check_corpus_tokenizer(const data_spec& d, int vocab);

/// data.tokenizer's tokenizer. With data.train_tokenizer and no tokenizer.json there yet, the
/// first caller trains a byte-level BPE of `vocab` ids on the corpus's training text (records
/// split at '%' lines, as `troupe tokenizer train` reads them) and writes it; callers that start
/// together take turns (a lock on data.path), so the others read it. `trained` says whether
/// this call trained it.
[[nodiscard]] absl::StatusOr<std::unique_ptr<tokenizers::tokenizer>> corpus_tokenizer(
    const data_spec& d, const actors::text_corpus& corpus, int vocab, bool* trained);

/// The corpus's training and held-out text as `tokenizer`'s ids (text_corpus::attach_tokens).
[[nodiscard]] absl::Status tokenize_corpus(actors::text_corpus& corpus,
                                           const tokenizers::tokenizer& tokenizer, int ctx,
                                           const std::string& origin);

}  // namespace troupe::apps
