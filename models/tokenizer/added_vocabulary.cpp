#include "models/tokenizer/added_vocabulary.hpp"

#include "models/tokenizer/text_pattern.hpp"

namespace troupe::tokenizers {

namespace {

// Unicode \w and \s, as the regexes HF tokenizers checks single_word, lstrip and rstrip with.
const text_pattern& word_char_first() {
  static const text_pattern p = *text_pattern::regex(R"(\A\w)");
  return p;
}
const text_pattern& word_char_last() {
  static const text_pattern p = *text_pattern::regex(R"(\w\z)");
  return p;
}
const text_pattern& spaces_first() {
  static const text_pattern p = *text_pattern::regex(R"(\A\s+)");
  return p;
}
const text_pattern& spaces_last() {
  static const text_pattern p = *text_pattern::regex(R"(\s+\z)");
  return p;
}

}  // namespace

void added_vocabulary::add_to_trie(trie& t, absl::string_view key, int32_t token) {
  if (key.empty()) return;
  t.first_byte[static_cast<unsigned char>(key[0])] = true;
  int32_t node = 0;
  for (unsigned char c : key) {
    const uint64_t edge = (static_cast<uint64_t>(node) << 8) | c;
    const auto it = t.edges.find(edge);
    if (it != t.edges.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(t.token.size());
      t.token.push_back(-1);
      t.edges.emplace(edge, child);
      node = child;
    }
  }
  // Two entries with one content: the later id wins, as HF's map from content does.
  t.token[node] = token;
}

std::pair<int32_t, size_t> added_vocabulary::longest_at(const trie& t, absl::string_view text,
                                                        size_t at) const {
  std::pair<int32_t, size_t> best{-1, at};
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto it =
        t.edges.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == t.edges.end()) break;
    node = it->second;
    if (t.token[node] >= 0) best = {t.token[node], i + 1};
  }
  return best;
}

std::vector<text_segment> added_vocabulary::split(absl::string_view text, bool normalized) const {
  std::vector<text_segment> out;
  if (text.empty()) return out;
  const trie& t = normalized ? normalized_ : raw_;
  size_t done = 0;  // the end of the last segment
  size_t at = 0;    // where the search goes on
  while (at < text.size()) {
    if (!t.first_byte[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    auto [index, stop] = longest_at(t, text, at);
    if (index < 0) {
      ++at;
      continue;
    }
    const added_token& token = tokens_[index];
    size_t start = at;
    at = stop;
    if (token.single_word) {
      const bool word_before =
          start > 0 && !word_char_last().find_all(text.substr(0, start)).empty();
      const bool word_after =
          stop < text.size() && !word_char_first().find_all(text.substr(stop)).empty();
      if (word_before || word_after) continue;  // not a word of its own
    }
    if (token.lstrip) {
      const auto spaces = spaces_last().find_all(text.substr(done, start - done));
      if (!spaces.empty()) start = done + spaces.front().first;
    }
    if (token.rstrip) {
      const auto spaces = spaces_first().find_all(text.substr(stop));
      if (!spaces.empty()) stop += spaces.front().second;
      at = stop;
    }
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, token.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
  return out;
}

const added_token* added_vocabulary::find(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const added_token* added_vocabulary::find(absl::string_view content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace troupe::tokenizers
