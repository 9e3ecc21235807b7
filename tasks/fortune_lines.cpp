#include "tasks/fortune_lines.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "kernels/sampling.hpp"

namespace troupe::tasks {
namespace {

constexpr int longest_prompt = 48;  // bytes: room for the response in the quickstart's ctx

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// An index in [0, n) from (seed, counter).
size_t draw(uint64_t seed, uint64_t counter, size_t n) {
  const auto v =
      static_cast<size_t>(kernels::seeded_uniform(seed, counter) * static_cast<float>(n));
  return std::min(v, n - 1);
}

// The first `k` words of `line` and the whitespace after them, if the line goes on after them
// and starts with a word; empty otherwise.
std::string opening(std::string_view line, int k) {
  if (line.empty() || is_space(line[0])) return "";
  size_t at = 0;
  for (int w = 0; w < k; ++w) {
    while (at < line.size() && !is_space(line[at]))
      ++at;                            // the word
    if (at == line.size()) return "";  // the line ends with it
    while (at < line.size() && is_space(line[at]))
      ++at;  // the space after it
  }
  if (at == line.size()) return "";
  return std::string(line.substr(0, at));
}

}  // namespace

std::vector<std::string> fortune_lines::words(std::string_view text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && is_space(text[at]))
      ++at;
    size_t end = at;
    while (end < text.size() && !is_space(text[end]))
      ++end;
    std::string_view word = text.substr(at, end - at);
    const auto punct = [](char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; };
    while (!word.empty() && punct(word.front()))
      word.remove_prefix(1);
    while (!word.empty() && punct(word.back()))
      word.remove_suffix(1);
    if (!word.empty()) {
      std::string lower(word);
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.push_back(std::move(lower));
    }
    at = end;
  }
  return out;
}

absl::StatusOr<fortune_lines> fortune_lines::load(const task_spec& spec) {
  if (spec.prompt_words < 1 || spec.prompt_words > 8) {
    return task_setting_error("prompt_words",
                              absl::StrCat("is ", spec.prompt_words, "; it must be in [1, 8]"));
  }
  if (spec.min_words < 1) {
    return task_setting_error("min_words",
                              absl::StrCat("is ", spec.min_words, "; it must be at least 1"));
  }
  if (spec.max_response < 2) {
    return task_setting_error("max_response",
                              absl::StrCat("is ", spec.max_response, "; it must be at least 2"));
  }
  absl::StatusOr<std::vector<std::string>> files = actors::text_files(spec.path);
  if (!files.ok()) {
    return task_setting_error("path", files.status().message());
  }
  fortune_lines task;
  task.max_response_ = spec.max_response;
  task.min_words_ = spec.min_words;
  for (const std::string& file : *files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return task_setting_error("path", absl::StrCat("cannot read ", file));
    }
    actors::split_records(text.str(), "%", task.texts_);
  }
  for (const std::string& fortune : task.texts_) {
    for (std::string& w : words(fortune))
      task.dictionary_.insert(std::move(w));
    const std::string_view line = std::string_view(fortune).substr(0, fortune.find('\n'));
    std::string p = opening(line, spec.prompt_words);
    if (p.empty() || static_cast<int>(p.size()) > longest_prompt) continue;
    task.max_prompt_bytes_ = std::max(task.max_prompt_bytes_, static_cast<int>(p.size()));
    task.rests_.push_back(std::string(line.substr(p.size())) + "\n");
    task.prompts_.push_back(std::move(p));
  }
  if (task.prompts_.empty()) {
    return task_setting_error(
        "path",
        absl::StrCat("no fortune under ", spec.path, " has a first line of more than ",
                     spec.prompt_words, " words (records are separated by lines of \"%\")"));
  }
  return task;
}

std::string fortune_lines::prompt(uint64_t seed, int64_t index) const {
  return prompts_[draw(seed, static_cast<uint64_t>(index), prompts_.size())];
}

double fortune_lines::reward(std::string_view, std::string_view response, bool ended) const {
  if (!ended) return 0.0;
  const std::vector<std::string> all = words(response);
  std::unordered_set<std::string> known;
  for (const std::string& w : all) {
    if (dictionary_.contains(w)) known.insert(w);
  }
  const size_t counted = std::max(all.size(), static_cast<size_t>(min_words_));
  return static_cast<double>(known.size()) / static_cast<double>(counted);
}

fortune_lines::example fortune_lines::example_at(uint64_t seed, int64_t index) const {
  const size_t i = draw(seed ^ 0x5eedf00dull, static_cast<uint64_t>(index), prompts_.size());
  return {prompts_[i], rests_[i]};
}

std::string fortune_lines::warmup_text(uint64_t seed, int lines, bool) const {
  std::string text;
  int written = 0;
  const uint64_t stream = seed ^ 0x5eedf00dull;  // not the RL prompts' stream
  for (uint64_t i = 0; written < lines; ++i) {
    const std::string& fortune = texts_[draw(stream, i, texts_.size())];
    absl::StrAppend(&text, fortune, "\n%\n");
    written += 1 + static_cast<int>(std::count(fortune.begin(), fortune.end(), '\n')) + 1;
  }
  return text;
}

}  // namespace troupe::tasks
