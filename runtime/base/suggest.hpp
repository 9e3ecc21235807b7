#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace troupe {

/// Returns the candidate closest to `word` by edit distance when it is close enough to be a
/// plausible typo (at most a third of the word's length, and at least 2 edits allowed).
[[nodiscard]] std::optional<std::string> nearest_match(absl::string_view word,
                                                       const std::vector<std::string>& candidates);

/// Formats "Did you mean 'x'? " (when a near match exists) followed by "Valid <what>: a, b, c."
[[nodiscard]] std::string suggestion_text(absl::string_view word,
                                          const std::vector<std::string>& candidates,
                                          absl::string_view what);

}  // namespace troupe
