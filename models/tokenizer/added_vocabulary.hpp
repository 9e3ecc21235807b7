#pragma once

// tokenizer.json's "added_tokens": tokens matched in the text before the model sees it (the
// special tokens of chat templates, <think>, tool-call markers), each kept whole. Tokens with
// "normalized": false match the raw input, the others its normalized pieces; the leftmost,
// then longest, match wins, as in HF tokenizers.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace troupe::tokenizers {

/// One entry of "added_tokens".
struct added_token {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;       ///< takes the whitespace before it
  bool rstrip = false;       ///< takes the whitespace after it
  bool single_word = false;  ///< matches only with no word character next to it
};

/// A text cut at added tokens: [begin, end) with the token's id, or -1 for text between.
struct text_segment {
  size_t begin = 0, end = 0;
  int32_t id = -1;
};

/// The added tokens, matched by a byte trie (leftmost-longest).
class added_vocabulary {
 public:
  added_vocabulary() = default;
  /// `normalize` gives a normalized token's matching form (its content, normalized).
  template <class Normalize>
  added_vocabulary(std::vector<added_token> tokens, Normalize normalize)
      : tokens_(std::move(tokens)) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const added_token& t = tokens_[i];
      add_to_trie(t.normalized ? normalized_ : raw_,
                  t.normalized ? std::string(normalize(t.content)) : t.content,
                  static_cast<int32_t>(i));
      by_id_.insert_or_assign(t.id, static_cast<int32_t>(i));
      by_content_.insert_or_assign(t.content, static_cast<int32_t>(i));
    }
  }

  /// Cuts `text` at the tokens that match raw input (`normalized` false) or normalized text.
  /// Covers the whole text; empty text gives no segment.
  [[nodiscard]] std::vector<text_segment> split(absl::string_view text, bool normalized) const;

  /// The added token with this id, or nullptr.
  [[nodiscard]] const added_token* find(int32_t id) const;
  /// The added token spelt `content`, or nullptr.
  [[nodiscard]] const added_token* find(absl::string_view content) const;
  [[nodiscard]] const std::vector<added_token>& tokens() const { return tokens_; }

 private:
  // Node 0 is the root; an edge is (node << 8 | byte) → child.
  struct trie {
    absl::flat_hash_map<uint64_t, int32_t> edges;
    std::vector<int32_t> token{-1};  // per node: index into tokens_ of the token ending there
    bool first_byte[256] = {};       // bytes that start some token
  };
  void add_to_trie(trie& t, absl::string_view key, int32_t token);
  // The longest token of `t` that starts at `at`, as (index, end); index -1 where none does.
  [[nodiscard]] std::pair<int32_t, size_t> longest_at(const trie& t, absl::string_view text,
                                                      size_t at) const;

  std::vector<added_token> tokens_;
  trie raw_, normalized_;
  absl::flat_hash_map<int32_t, int32_t> by_id_;
  absl::flat_hash_map<std::string, int32_t> by_content_;
};

}  // namespace troupe::tokenizers
