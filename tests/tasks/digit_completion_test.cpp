#include "tasks/digit_completion.hpp"

#include <set>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace troupe::tasks {
namespace {

TEST(DigitCompletion, AnswersContinueTheSequenceModuloMax) {
  EXPECT_EQ(digit_completion::answer("9,10:20,2="), "11,12");  // veRL's example
  EXPECT_EQ(digit_completion::answer("18,19:20,3="), "0,1,2");
  EXPECT_EQ(digit_completion::answer("5,2:6,3="), "5,2,5");  // a difference of -3 is 3 mod 6
  EXPECT_EQ(digit_completion::answer("7,8:20,0="), "");
  EXPECT_EQ(digit_completion::answer("not a prompt"), "");
}

// veRL's dense reward summed: 1 / (len(answer) + 1) per matching character up to the first
// mismatch, and the last share for ending right after the answer.
TEST(DigitCompletion, ScoresArePrefixSharesAndTheEnd) {
  EXPECT_DOUBLE_EQ(digit_completion::score("9,10:20,2=", "11,12", true), 1.0);
  EXPECT_DOUBLE_EQ(digit_completion::score("9,10:20,2=", "11,12", false), 5.0 / 6);
  EXPECT_DOUBLE_EQ(digit_completion::score("9,10:20,2=", "11,13", true), 4.0 / 6);
  EXPECT_DOUBLE_EQ(digit_completion::score("9,10:20,2=", "11,12,13", true), 5.0 / 6);
  EXPECT_DOUBLE_EQ(digit_completion::score("9,10:20,2=", "2", true), 0.0);
  EXPECT_DOUBLE_EQ(digit_completion::score("7,8:20,0=", "", true), 1.0);
  EXPECT_DOUBLE_EQ(digit_completion::score("7,8:20,0=", "E000", true), 0.0);
  EXPECT_DOUBLE_EQ(digit_completion::score("junk", "11", true), 0.0);
}

TEST(DigitCompletion, PromptsAreAFunctionOfSeedAndIndex) {
  const digit_completion task({});
  std::set<std::string> distinct;
  for (int i = 0; i < 200; ++i) {
    const std::string p = task.prompt(7, i);
    EXPECT_EQ(p, task.prompt(7, i));
    EXPECT_EQ(p.back(), '=');
    EXPECT_LE(static_cast<int>(digit_completion::answer(p).size()) + 1, task.max_response_bytes())
        << p;
    distinct.insert(p);
  }
  EXPECT_GT(distinct.size(), 100u);
  EXPECT_NE(task.prompt(7, 0) + task.prompt(7, 1), task.prompt(8, 0) + task.prompt(8, 1));
}

// The format warm-up teaches the format: prompts, n numbers below max, a newline; not the
// answers. The answers warm-up is the task's own examples.
TEST(DigitCompletion, TheFormatWarmupHasTheFormatButNotTheAnswers) {
  const digit_completion task({});
  const std::string text = task.warmup_text(3, 300, false);
  int right = 0, lines = 0;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::string_view line(l.data(), l.size());
    ++lines;
    const size_t eq = line.find('=');
    ASSERT_NE(eq, std::string_view::npos) << line;
    const std::string_view prompt = line.substr(0, eq + 1), response = line.substr(eq + 1);
    const int n = prompt[prompt.size() - 2] - '0';
    const std::vector<std::string> numbers =
        absl::StrSplit(absl::string_view(response.data(), response.size()), ',', absl::SkipEmpty());
    EXPECT_EQ(static_cast<int>(numbers.size()), n) << line;
    for (const std::string& v : numbers)
      EXPECT_LT(std::stoi(v), 20) << line;
    if (n > 0 && digit_completion::score(prompt, response, true) == 1.0) ++right;
  }
  EXPECT_EQ(lines, 300);
  EXPECT_LT(right, 10) << "the warm-up must not teach the answers";
  const std::string answers = task.warmup_text(3, 300, true);
  lines = 0;
  for (absl::string_view l : absl::StrSplit(answers, '\n', absl::SkipEmpty())) {
    const std::string_view line(l.data(), l.size());
    const size_t eq = line.find('=');
    ASSERT_NE(eq, std::string_view::npos) << line;
    EXPECT_NEAR(digit_completion::score(line.substr(0, eq + 1), line.substr(eq + 1), true), 1.0,
                1e-12)
        << line;
    ++lines;
  }
  EXPECT_GT(lines, 200) << "lines with n = 0 are the prompt and the newline alone";
  EXPECT_EQ(digit_completion::validate({.max_num_in_response = 10}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::tasks

namespace troupe::tasks {
namespace {

// Supervised examples (troupe data sft): a prompt of the warm-up's stream, not the RL prompts',
// and its answer ended by the newline, which the rule scores 1.
TEST(DigitCompletion, ExamplesAreAnsweredPromptsOfTheirOwnStream) {
  const digit_completion task({});
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    const text_task::example e = task.example_at(3, i);
    ASSERT_EQ(e.response.back(), '\n');
    const std::string answer = e.response.substr(0, e.response.size() - 1);
    EXPECT_EQ(answer, digit_completion::answer(e.prompt)) << e.prompt;
    EXPECT_DOUBLE_EQ(task.reward(e.prompt, answer, true), 1.0) << e.prompt;
    differ += e.prompt != task.prompt(3, i) ? 1 : 0;
  }
  EXPECT_GT(differ, 25) << "the RL prompts are another stream";
  EXPECT_EQ(task.example_at(3, 7).prompt, task.example_at(3, 7).prompt);
}

}  // namespace
}  // namespace troupe::tasks
