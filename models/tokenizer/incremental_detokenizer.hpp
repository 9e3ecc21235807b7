#pragma once

// Streaming text from generated ids, as vLLM's incremental detokenization does: the newest
// tokens are decoded together with a few before them (decoders such as Metaspace or ByteLevel
// depend on their neighbours), and text is released only once it no longer ends in U+FFFD,
// so that a character split over tokens is never emitted in halves.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tokenizer/tokenizer.hpp"

namespace troupe::tokenizers {

/// One sequence's stream. The tokenizer must outlive it.
class incremental_detokenizer {
 public:
  /// `prompt`: the ids before the generated ones, whose last few give the first tokens their
  /// context (their text is never emitted).
  incremental_detokenizer(const tokenizer& t, std::span<const int32_t> prompt,
                          bool skip_special_tokens = true);

  /// The text that `id` completes (often empty while a character is incomplete). The
  /// concatenation of every push and finish() is the decode of the generated ids.
  [[nodiscard]] absl::StatusOr<std::string> push(int32_t id);
  /// What is still held back (an incomplete character decodes as U+FFFD here).
  [[nodiscard]] absl::StatusOr<std::string> finish();

 private:
  // The text released so far is decode(window_[0, read_)) minus decode(window_[0, prefix_)).
  [[nodiscard]] absl::StatusOr<std::string> text_since_prefix(size_t end) const;

  const tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> window_;  // the ids from the prefix offset on
  size_t read_ = 0;              // ids of window_ whose text has been released
};

}  // namespace troupe::tokenizers
