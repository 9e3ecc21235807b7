#include "tasks/digit_completion.hpp"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/sampling.hpp"

namespace troupe::tasks {
namespace {

// A uniform integer in [0, bound) from (seed, counter).
int draw(uint64_t seed, uint64_t counter, int bound) {
  const int v =
      static_cast<int>(kernels::seeded_uniform(seed, counter) * static_cast<float>(bound));
  return v < bound ? v : bound - 1;
}

struct parsed_prompt {
  int first = 0, second = 0, max = 0, count = 0;
};

// "a,b:max,n=" -> its numbers; false when it is not of that form.
bool parse(std::string_view text, parsed_prompt& p) {
  if (text.empty() || text.back() != '=') return false;
  const absl::string_view prompt(text.data(), text.size() - 1);
  const std::vector<absl::string_view> halves = absl::StrSplit(prompt, ':');
  if (halves.size() != 2) return false;
  const std::vector<absl::string_view> pair = absl::StrSplit(halves[0], ',');
  const std::vector<absl::string_view> info = absl::StrSplit(halves[1], ',');
  return pair.size() == 2 && info.size() == 2 && absl::SimpleAtoi(pair[0], &p.first) &&
         absl::SimpleAtoi(pair[1], &p.second) && absl::SimpleAtoi(info[0], &p.max) &&
         absl::SimpleAtoi(info[1], &p.count) && p.max > 0 && p.count >= 0 && p.count < 10;
}

}  // namespace

absl::Status digit_completion::validate(const digit_completion_options& o) {
  if (o.max_number < 1) {
    return task_setting_error("max_number",
                              absl::StrCat("is ", o.max_number, "; it must be at least 1"));
  }
  if (o.max_diff < 1) {
    return task_setting_error("max_diff",
                              absl::StrCat("is ", o.max_diff, "; it must be at least 1"));
  }
  if (o.max_num_in_response < 1 || o.max_num_in_response > 9) {
    return task_setting_error("max_num_in_response",
                              absl::StrCat("is ", o.max_num_in_response, "; it must be in [1, 9]"));
  }
  return absl::OkStatus();
}

std::string digit_completion::prompt(uint64_t seed, int64_t index) const {
  const uint64_t base = static_cast<uint64_t>(index) * 3;
  const int first = draw(seed, base, o_.max_number + 1);
  const int diff = draw(seed, base + 1, o_.max_diff + 1);
  const int count = draw(seed, base + 2, o_.max_num_in_response + 1);
  return absl::StrCat(first, ",", (first + diff) % o_.max_number, ":", o_.max_number, ",", count,
                      "=");
}

std::string digit_completion::answer(std::string_view prompt) {
  parsed_prompt p;
  if (!parse(prompt, p)) return "";
  const int diff = ((p.second - p.first) % p.max + p.max) % p.max;
  std::vector<int> numbers;
  int last = p.second;
  for (int i = 0; i < p.count; ++i) {
    last = (last + diff) % p.max;
    numbers.push_back(last);
  }
  return absl::StrJoin(numbers, ",");
}

double digit_completion::score(std::string_view prompt, std::string_view response, bool ended) {
  parsed_prompt p;
  if (!parse(prompt, p)) return 0.0;
  const std::string want = answer(prompt);
  const double share = 1.0 / static_cast<double>(want.size() + 1);  // the newline's share too
  size_t matched = 0;
  while (matched < want.size() && matched < response.size() && response[matched] == want[matched])
    ++matched;
  double s = share * static_cast<double>(matched);
  if (matched == want.size() && response.size() == want.size() && ended) s += share;
  return s;
}

int digit_completion::max_prompt_bytes() const {
  return static_cast<int>(
      absl::StrCat(o_.max_number, ",", o_.max_number, ":", o_.max_number, ",9=").size());
}

int digit_completion::max_response_bytes() const {
  const int digits = static_cast<int>(std::to_string(o_.max_number).size());
  return o_.max_num_in_response * (digits + 1);  // numbers, commas and the newline
}

digit_completion::example digit_completion::example_at(uint64_t seed, int64_t index) const {
  std::string q = prompt(seed ^ 0x5eedf00dull, index);  // the warm-up's stream
  std::string a = answer(q) + "\n";
  return {std::move(q), std::move(a)};
}

std::string digit_completion::warmup_text(uint64_t seed, int lines, bool answers) const {
  std::string text;
  const uint64_t stream = seed ^ 0x5eedf00dull;  // not the RL prompts' stream
  for (int i = 0; i < lines; ++i) {
    const std::string q = prompt(stream, i);
    if (answers) {
      absl::StrAppend(&text, q, answer(q), "\n");
      continue;
    }
    parsed_prompt p;
    parse(q, p);
    std::vector<int> numbers;
    for (int k = 0; k < p.count; ++k)
      numbers.push_back(
          draw(stream, (uint64_t{1} << 40) + static_cast<uint64_t>(i) * 16 + k, o_.max_number));
    absl::StrAppend(&text, q, absl::StrJoin(numbers, ","), "\n");
  }
  return text;
}

}  // namespace troupe::tasks
