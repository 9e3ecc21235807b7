#pragma once

// The patterns of tokenizer.json's Split pre-tokenizers and Replace normalizers and decoders:
// {"String": s} (the literal text) or {"Regex": r}. HF tokenizers compiles regexes with
// Oniguruma; troupe with PCRE2 (UTF, Unicode properties, JIT), whose syntax agrees with it on
// what tokenizer files use (\p{..} classes, (?i:..), look-ahead, \s, {m,n}).

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::tokenizers {

/// A compiled pattern; immutable and safe to share between threads.
class text_pattern {
 public:
  /// A literal pattern.
  [[nodiscard]] static text_pattern literal(std::string text);
  /// A regular expression; INVALID_ARGUMENT with PCRE2's message and offset where it does not
  /// compile.
  [[nodiscard]] static absl::StatusOr<text_pattern> regex(const std::string& expression);

  /// The non-overlapping matches in `s` (valid UTF-8), left to right, as [begin, end) byte
  /// offsets. An empty match is skipped (the search goes on one character later).
  [[nodiscard]] std::vector<std::pair<size_t, size_t>> find_all(absl::string_view s) const;

  /// `s` with every match replaced by `with`.
  [[nodiscard]] std::string replace_all(absl::string_view s, absl::string_view with) const;

 private:
  struct compiled;
  std::string source_;
  bool literal_ = true;
  std::shared_ptr<const compiled> regex_;
};

}  // namespace troupe::tokenizers
