#include "models/tokenizer/pre_tokenizer.hpp"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "runtime/base/overloaded.hpp"
#include "runtime/base/status.hpp"

namespace troupe::tokenizers {

namespace {

// [begin, end) of a piece, and whether it is a match of the pattern.
struct span {
  size_t begin, end;
  bool match;
};

std::vector<span> matches_of(const text_pattern& pattern, absl::string_view s, bool invert) {
  std::vector<span> out;
  size_t prev = 0;
  for (const auto& [b, e] : pattern.find_all(s)) {
    if (prev != b) out.push_back({prev, b, invert});
    out.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != s.size()) out.push_back({prev, s.size(), invert});
  return out;
}

// Applies a Split's behaviour: the spans to keep, in order.
std::vector<span> apply_behavior(std::vector<span> spans, split_behavior behavior) {
  std::vector<span> out;
  switch (behavior) {
    case split_behavior::isolated:
      return spans;
    case split_behavior::removed:
      for (const span& s : spans)
        if (!s.match) out.push_back(s);
      return out;
    case split_behavior::contiguous: {
      bool previous = false;
      for (const span& s : spans) {
        if (!out.empty() && s.match == previous) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous = s.match;
      }
      return out;
    }
    case split_behavior::merged_with_previous: {
      bool previous = false;
      for (const span& s : spans) {
        if (!out.empty() && s.match && !previous) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous = s.match;
      }
      return out;
    }
    case split_behavior::merged_with_next: {
      bool previous = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (!out.empty() && it->match && !previous) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous = it->match;
      }
      return {out.rbegin(), out.rend()};
    }
  }
  return spans;
}

void split_into(const text_piece& piece, const text_pattern& pattern, split_behavior behavior,
                bool invert, std::vector<text_piece>& out) {
  for (const span& s : apply_behavior(matches_of(pattern, piece.text, invert), behavior)) {
    if (s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
  }
}

void run_step(const pre_tokenizer_step& step, text_piece piece, std::vector<text_piece>& out) {
  std::visit(
      overloaded{
          [&](const split_step& s) { split_into(piece, s.pattern, s.behavior, s.invert, out); },
          [&](const byte_level_step& s) {
            if (s.add_prefix_space && !piece.text.starts_with(' '))
              piece.text = absl::StrCat(" ", piece.text);
            if (s.use_regex) {
              split_into(piece, gpt2_word_pattern(), split_behavior::isolated, false, out);
            } else {
              out.push_back(std::move(piece));
            }
          },
          [&](const metaspace_step& s) {
            std::string text;
            text.reserve(piece.text.size());
            for (char c : piece.text) {
              if (c == ' ') {
                text += s.replacement;
              } else {
                text.push_back(c);
              }
            }
            const bool prepend = !text.starts_with(s.replacement) &&
                                 (s.scheme == metaspace_step::prepend::always ||
                                  (s.scheme == metaspace_step::prepend::first && piece.at_start));
            if (prepend) text = absl::StrCat(s.replacement, text);
            text_piece whole{std::move(text), piece.at_start};
            if (s.split) {
              split_into(whole, text_pattern::literal(s.replacement),
                         split_behavior::merged_with_next, false, out);
            } else if (!whole.text.empty()) {
              out.push_back(std::move(whole));
            }
          },
      },
      step);
}

}  // namespace

const text_pattern& gpt2_word_pattern() {
  static const text_pattern pattern = *text_pattern::regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return pattern;
}

bool pre_tokenizer::byte_level() const {
  return !steps_.empty() && std::holds_alternative<byte_level_step>(steps_.back());
}

void pre_tokenizer::apply(text_piece piece, std::vector<text_piece>& out) const {
  if (piece.text.empty()) return;
  if (steps_.empty()) {
    out.push_back(std::move(piece));
    return;
  }
  std::vector<text_piece> current{std::move(piece)}, next;
  for (size_t i = 0; i < steps_.size(); ++i) {
    std::vector<text_piece>& into = i + 1 == steps_.size() ? out : next;
    for (auto& p : current)
      run_step(steps_[i], std::move(p), into);
    if (&into == &next) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace troupe::tokenizers
