#include "runtime/base/suggest.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe {
namespace {

size_t edit_distance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> nearest_match(absl::string_view word,
                                         const std::vector<std::string>& candidates) {
  const size_t allowed = std::max<size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string suggestion_text(absl::string_view word, const std::vector<std::string>& candidates,
                            absl::string_view what) {
  std::string text;
  if (auto near = nearest_match(word, candidates))
    absl::StrAppend(&text, "Did you mean '", *near, "'? ");
  if (candidates.empty()) {
    absl::StrAppend(&text, "There are no valid ", what, ".");
  } else {
    absl::StrAppend(&text, "Valid ", what, ": ", absl::StrJoin(candidates, ", "), ".");
  }
  return text;
}

}  // namespace troupe
