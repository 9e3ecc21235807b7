#pragma once

// veRL's end-to-end RL task, digit completion (tests/special_e2e/envs/digit_completion/task.py),
// in bytes: the prompt "a,b:max,n=" asks for the next n numbers of the arithmetic sequence a, b,
// ... modulo max, written "c,d,e" and ended by a newline. The score is veRL's dense reward
// summed over the response: each character that matches the answer earns 1 / (len(answer) + 1)
// until the first mismatch, and the end of the response (the newline) right after the whole
// answer earns the last share, so a perfect response scores 1.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "tasks/text_task.hpp"

namespace troupe::tasks {

struct digit_completion_options {
  int max_number = 20;          ///< the sequence is modulo this
  int max_diff = 3;             ///< the common difference is drawn from [0, max_diff]
  int max_num_in_response = 5;  ///< n is drawn from [0, max_num_in_response]
};

class digit_completion final : public text_task {
 public:
  /// INVALID_ARGUMENT unless max_number > 0, max_diff > 0 and 0 < max_num_in_response < 10
  /// (veRL's bounds).
  [[nodiscard]] static absl::Status validate(const digit_completion_options& o);

  explicit digit_completion(digit_completion_options o) : o_(o) {}

  [[nodiscard]] std::string prompt(uint64_t seed, int64_t index) const override;
  /// The answer to `prompt` (without the newline); empty for a prompt that is not the task's.
  [[nodiscard]] static std::string answer(std::string_view prompt);
  /// The score of `response` (without its newline) in [0, 1]; `ended` says whether the response
  /// ended with the newline rather than running out of tokens.
  [[nodiscard]] static double score(std::string_view prompt, std::string_view response, bool ended);
  [[nodiscard]] double reward(std::string_view prompt, std::string_view response,
                              bool ended) const override {
    return score(prompt, response, ended);
  }
  /// "max,max:max,9=" at most.
  [[nodiscard]] int max_prompt_bytes() const override;
  /// The longest response the task needs, newline included.
  [[nodiscard]] int max_response_bytes() const override;

  /// Text for a warm-up: `lines` examples of prompts (from a stream of their own, not the RL
  /// prompts') each followed by a newline-ended response. With `answers` false the response is n
  /// numbers drawn at random: the warm-up teaches the format, not the sequence. With `answers`
  /// true it is the answer: supervised examples of the task itself.
  [[nodiscard]] std::string warmup_text(uint64_t seed, int lines, bool answers) const override;
  [[nodiscard]] example example_at(uint64_t seed, int64_t index) const override;

 private:
  digit_completion_options o_;
};

}  // namespace troupe::tasks
