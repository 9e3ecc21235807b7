#pragma once

// The logic of the role reward/{{name}}, without troupe's actors: what {{name}}_test.cpp tests.

#include <string_view>

namespace {{name}}_plugin {

/// The score of `response` to `prompt`: the share of the response's bytes that are letters,
/// less 0.5 when it ran out of tokens before the task's end string (`ended` false). troupe
/// calls it one response at a time; the score must be finite.
inline double score(std::string_view prompt, std::string_view response, bool ended) {
  (void)prompt;
  if (response.empty()) return ended ? 0.0 : -0.5;
  int letters = 0;
  for (char c : response)
    letters += (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return static_cast<double>(letters) / static_cast<double>(response.size()) - (ended ? 0 : 0.5);
}

}  // namespace {{name}}_plugin
