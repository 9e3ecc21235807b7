#pragma once

// tokenizer.json's "model" of type BPE: a vocabulary and ranked merges. A word starts as one
// symbol per character (per byte for a byte-level vocabulary) and the pair with the lowest rank
// is merged until none applies, as HF tokenizers' BPE does (ties go to the leftmost pair).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace troupe::tokenizers {

/// The options of a BPE model, as tokenizer.json names them.
struct bpe_options {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;  ///< a character missing from the vocabulary as its <0xXX> bytes
  bool ignore_merges = false;  ///< a word that is itself in the vocabulary is that one token
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  /// The vocabulary's strings are in the byte-level alphabet (byte_level.hpp), and words are
  /// raw bytes: each byte is a first symbol.
  bool byte_level = false;
};

/// A BPE vocabulary and its merges. Encoding is thread-safe (a shared, bounded cache of words).
class bpe_model {
 public:
  /// `vocab`: token → id; `merges`: pairs of tokens, in rank order. A merge whose parts or
  /// result are not in the vocabulary, an unk_token missing from it, or (byte-level) a byte
  /// without a token is INVALID_ARGUMENT naming it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<bpe_model>> create(
      std::vector<std::pair<std::string, int32_t>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, bpe_options options);

  /// Appends the ids of `word` (raw bytes for a byte-level model, else valid UTF-8). A
  /// character with no token, no byte fallback and no unk_token is dropped, as in HF.
  void encode_word(absl::string_view word, std::vector<int32_t>& out) const;

  /// The token called `token` (in the vocabulary's own spelling), if any.
  [[nodiscard]] std::optional<int32_t> token_to_id(absl::string_view token) const;
  /// The token of `id`, or nullptr when no token has it.
  [[nodiscard]] const std::string* id_to_token(int32_t id) const;
  /// One more than the largest id.
  [[nodiscard]] int32_t id_bound() const { return static_cast<int32_t>(tokens_.size()); }
  [[nodiscard]] const bpe_options& options() const { return options_; }

 private:
  bpe_model() = default;
  // The word's first symbols (ids): per byte, or per character with byte fallback and unk.
  void first_symbols(absl::string_view word, std::vector<int32_t>& symbols) const;
  void merge(std::vector<int32_t>& symbols) const;

  bpe_options options_;
  // Lookups by the word's own spelling: raw bytes for a byte-level model.
  absl::flat_hash_map<std::string, int32_t> ids_;
  std::vector<std::string> tokens_;  // by id, in the vocabulary's spelling; "" where none
  std::vector<bool> has_token_;
  int32_t byte_ids_[256];  // byte-level: each byte's token
  struct merge_result {
    int32_t rank, id;
  };
  absl::flat_hash_map<uint64_t, merge_result> merges_;  // (left id << 32 | right id)
  std::optional<int32_t> unk_id_;

  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace troupe::tokenizers
