#include "tasks/fortune_lines.hpp"

#include <set>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.hpp"

namespace troupe::tasks {
namespace {

// Two fortune files: a directory as the fortunes package has it.
task_spec corpus(const testing::temp_dir& dir) {
  dir.write("wisdom",
            "The early bird gets the worm.\n%\nA penny saved is a penny earned.\n"
            "  -- Franklin\n%\nShort line\n%\n");
  dir.write("more", "\tIndented first lines are skipped.\n%\nNever put off till tomorrow.\n%\n");
  task_spec spec;
  spec.name = "fortunes";
  spec.path = dir.path().string();
  spec.prompt_words = 3;
  spec.min_words = 3;
  return spec;
}

TEST(FortuneLines, PromptsAreTheFirstWordsOfFirstLinesThatGoOn) {
  testing::temp_dir dir;
  absl::StatusOr<fortune_lines> task = fortune_lines::load(corpus(dir));
  ASSERT_TRUE(task.ok()) << task.status();
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i)
    seen.insert(task->prompt(7, i));
  // "Short line" has no fourth word and the indented one starts with a tab.
  EXPECT_EQ(seen, (std::set<std::string>{"The early bird ", "A penny saved ", "Never put off "}));
  EXPECT_EQ(task->prompt(7, 11), task->prompt(7, 11)) << "a prompt is a function of (seed, index)";
  EXPECT_EQ(task->max_prompt_bytes(), static_cast<int>(std::string("The early bird ").size()));
}

TEST(FortuneLines, TheScoreIsTheShareOfDistinctKnownWords) {
  testing::temp_dir dir;
  absl::StatusOr<fortune_lines> task = fortune_lines::load(corpus(dir));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_DOUBLE_EQ(task->reward("The early bird ", "gets the worm.", true), 1.0);
  // Case and punctuation at either end do not matter; "wrom" is not a word of the fortunes.
  EXPECT_DOUBLE_EQ(task->reward("p", "\"Gets\" THE wrom!", true), 2.0 / 3);
  EXPECT_DOUBLE_EQ(task->reward("p", "the the the", true), 1.0 / 3) << "repeats earn nothing";
  EXPECT_DOUBLE_EQ(task->reward("p", "gets the worm", false), 0.0) << "the line did not end";
  EXPECT_DOUBLE_EQ(task->reward("p", " ... ", true), 0.0) << "no words";
  EXPECT_DOUBLE_EQ(task->reward("p", "franklin penny worm", true), 1.0)
      << "words of any line count";
  EXPECT_DOUBLE_EQ(task->reward("p", "worm", true), 1.0 / 3) << "fewer than min_words";
}

TEST(FortuneLines, TheWarmUpTextIsTheFortunes) {
  testing::temp_dir dir;
  absl::StatusOr<fortune_lines> task = fortune_lines::load(corpus(dir));
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string text = task->warmup_text(1, 50, false);
  EXPECT_GE(std::count(text.begin(), text.end(), '\n'), 50);
  EXPECT_TRUE(absl::StrContains(text, "A penny saved is a penny earned.\n  -- Franklin\n%\n"));
}

TEST(FortuneLines, RefusesAPathWithoutPromptsOrFiles) {
  testing::temp_dir dir;
  task_spec spec;
  spec.path = dir.write("short", "One two\n%\nthree\n%\n");
  absl::StatusOr<fortune_lines> none = fortune_lines::load(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::StrContains(none.status().message(), "first line of more than 3 words"))
      << none.status();
  spec.path = dir.file("missing");
  absl::StatusOr<fortune_lines> missing = fortune_lines::load(spec);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StartsWith(missing.status().message(), "path: ")) << missing.status();
}

}  // namespace
}  // namespace troupe::tasks

namespace troupe::tasks {
namespace {

// A fortunes example is a prompt and the rest of its fortune's first line, with the newline.
TEST(FortuneLines, ExamplesAreTheRestOfTheirFirstLine) {
  testing::temp_dir dir;
  dir.write("wisdom", "The early bird gets the worm.\n%\nA penny saved is a penny earned.\n%\n");
  task_spec spec;
  spec.name = "fortunes";
  spec.path = dir.path().string();
  absl::StatusOr<fortune_lines> task = fortune_lines::load(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  std::set<std::string> seen;
  for (int i = 0; i < 40; ++i) {
    const text_task::example e = task->example_at(1, i);
    seen.insert(e.prompt + e.response);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"The early bird gets the worm.\n",
                                         "A penny saved is a penny earned.\n"}));
}

}  // namespace
}  // namespace troupe::tasks
