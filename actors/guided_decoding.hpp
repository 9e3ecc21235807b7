#pragma once

// Guided decoding for structured output: each guided request's position in its JSON grammar
// (json_grammar), the mask of the tokens that keep its output inside the grammar, and the end of
// the output once the value is whole. A token is allowed when the grammar accepts all its bytes.
// The vocabulary's tokens are laid out as a trie of their bytes, so that one walk from the
// request's position finds every token it allows. Inside a string most tokens are plain text
// (no quote, backslash or control byte; whole UTF-8 characters): those are allowed by their
// character count against the string's room, and only the others are walked, in a trie of their
// own. A stop token (the model's end of sequence) is allowed exactly when the value is whole.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "actors/json_grammar.hpp"

namespace troupe::actors {

class guided_decoding {
 public:
  /// `token_text[t]`: token t's bytes as they appear in the output (empty for a special token,
  /// which structured output never draws); null: troupe's byte vocabulary of `vocab` tokens.
  guided_decoding(std::shared_ptr<const std::vector<std::string>> token_text, int vocab);
  ~guided_decoding();

  /// Starts request `id` at the beginning of `grammar`'s value (json_grammar::compile of its
  /// schema).
  void add(uint64_t id, std::shared_ptr<const json_grammar> grammar);
  [[nodiscard]] bool guides(uint64_t id) const { return matchers_.contains(id); }

  /// Sets to -infinity the logits[vocab] of request `id`'s next token that would leave the
  /// grammar, and of its stop tokens unless the value is whole. False when no token is left
  /// (the vocabulary cannot write what the grammar needs): the caller ends the output. Safe to
  /// call for different requests at once.
  [[nodiscard]] bool mask(uint64_t id, float* logits, std::span<const int32_t> stop_tokens) const;
  /// Moves request `id` past `token`; false when the value is whole and nothing may follow, so
  /// that the output ends there.
  [[nodiscard]] bool advance(uint64_t id, int32_t token);
  void forget(uint64_t id) { matchers_.erase(id); }

 private:
  class token_trie;
  [[nodiscard]] std::string_view text(int32_t token) const;

  std::shared_ptr<const std::vector<std::string>> token_text_;
  int vocab_;
  // Built with the first guided request: every token's trie, the trie of the tokens that are
  // not plain string text, and the plain ones by character count.
  void build();
  std::unique_ptr<token_trie> trie_, special_trie_;
  std::vector<std::pair<int, int32_t>> plain_;  // (characters, token), fewest first
  struct guided_request {
    std::shared_ptr<const json_grammar> grammar;
    json_matcher position;  // in *grammar
  };
  absl::flat_hash_map<uint64_t, guided_request> matchers_;
};

}  // namespace troupe::actors
