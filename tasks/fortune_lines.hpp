#pragma once

// The text task for the fortunes model (the quickstart's): the prompt is the first words of a
// fortune's first line, the response the rest of that line, ended by a newline. The rule reward
// is the share of the response's words that are distinct words of the fortunes themselves,
// counting at least `min_words` words: (distinct known words) / max(words, min_words), 0 for a
// line that does not end within the length limit. Repeating a word earns nothing more ("the the
// the" scores 1/3 with min_words 3), nor does a line shorter than min_words.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "tasks/text_task.hpp"

namespace troupe::tasks {

class fortune_lines final : public text_task {
 public:
  /// Reads the fortunes under `spec.path` (a file or a directory of fortune files, records
  /// separated by "%" lines). INVALID_ARGUMENT when none has a first line longer than
  /// `spec.prompt_words` words, or when prompt_words or max_response are out of range.
  [[nodiscard]] static absl::StatusOr<fortune_lines> load(const task_spec& spec);

  [[nodiscard]] std::string prompt(uint64_t seed, int64_t index) const override;
  [[nodiscard]] double reward(std::string_view prompt, std::string_view response,
                              bool ended) const override;
  [[nodiscard]] int max_prompt_bytes() const override { return max_prompt_bytes_; }
  [[nodiscard]] int max_response_bytes() const override { return max_response_; }
  /// The fortunes themselves (with or without `answers`), from a shuffled start.
  [[nodiscard]] std::string warmup_text(uint64_t seed, int lines, bool answers) const override;
  [[nodiscard]] example example_at(uint64_t seed, int64_t index) const override;

  /// The words of `text`: split at whitespace, stripped of punctuation at either end, lowercase;
  /// what is left empty is dropped.
  [[nodiscard]] static std::vector<std::string> words(std::string_view text);

 private:
  fortune_lines() = default;
  std::vector<std::string> prompts_;  // each fortune's first words, with the space after them
  std::vector<std::string> rests_;    // the rest of each prompt's line, and its newline
  std::vector<std::string> texts_;    // the fortunes
  std::unordered_set<std::string> dictionary_;
  int max_prompt_bytes_ = 0;
  int max_response_ = 64;
  int min_words_ = 5;
};

}  // namespace troupe::tasks
