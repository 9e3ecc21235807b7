#pragma once

// A Hugging Face tokenizer, read from its tokenizer.json: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor and decoder, each as HF tokenizers defines it, so
// that the ids of a text are the ids HF's own implementation gives (tests compare them on real
// tokenizer files). Byte-level BPE (GPT-2, Llama 3, Qwen 2/3, DeepSeek V3) and BPE with byte
// fallback on SentencePiece-style pieces (Llama 2, Mistral, Gemma 3) are read; anything else is
// refused by name.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/tokenizer/added_vocabulary.hpp"
#include "models/tokenizer/bpe_model.hpp"
#include "models/tokenizer/decoder.hpp"
#include "models/tokenizer/normalizer.hpp"
#include "models/tokenizer/pre_tokenizer.hpp"

namespace troupe::tokenizers {

/// What the post-processor puts around a text's ids when special tokens are added (the
/// "single" template of TemplateProcessing): -1 stands for the text's own ids.
using special_template = std::vector<int32_t>;

/// The parts a tokenizer is made of (tokenizer_json.cpp reads them from tokenizer.json).
struct tokenizer_parts {
  std::vector<added_token> added_tokens;
  normalizer normalize;
  pre_tokenizer pre_tokenize;
  std::unique_ptr<bpe_model> model;
  special_template post_process{-1};
  decoder decode;
};

/// A tokenizer. Immutable once made; encode and decode are safe from any number of threads.
class tokenizer {
 public:
  explicit tokenizer(tokenizer_parts parts);

  /// Reads `path` (a tokenizer.json). Errors name the file and the key path ("tokenizer.json:
  /// pre_tokenizer.pretokenizers[1].type: 'Whitespace' is not supported; troupe reads ...").
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<tokenizer>> load(const std::string& path);
  /// The same from the file's text; `where` names it in errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<tokenizer>> from_json(
      absl::string_view json, absl::string_view where);

  /// The ids of `text`. Invalid UTF-8 is read as HF's bindings read it, each maximal invalid
  /// subsequence as U+FFFD. With `add_special_tokens`, the post-processor's (a BOS token).
  [[nodiscard]] std::vector<int32_t> encode(absl::string_view text,
                                            bool add_special_tokens = false) const;
  /// The text of `ids`; INVALID_ARGUMENT naming an id that no token has.
  [[nodiscard]] absl::StatusOr<std::string> decode(std::span<const int32_t> ids,
                                                   bool skip_special_tokens = false) const;

  /// The bytes `id` stands for in a text (decoder::token_bytes; an added token's content); empty
  /// for an id that no token has.
  [[nodiscard]] std::string token_bytes(int32_t id) const;
  /// The id of a token in its tokenizer.json spelling (added tokens first), if any.
  [[nodiscard]] std::optional<int32_t> token_to_id(absl::string_view token) const;
  /// The tokenizer.json spelling of `id`, if any token has it.
  [[nodiscard]] std::optional<std::string> id_to_token(int32_t id) const;
  /// One more than the largest id, added tokens included.
  [[nodiscard]] int32_t vocab_size() const { return vocab_size_; }
  /// Whether `id` is an added token marked special (skipped by skip_special_tokens).
  [[nodiscard]] bool is_special(int32_t id) const;
  [[nodiscard]] const added_vocabulary& added_tokens() const { return added_; }

 private:
  // Appends the ids of a stretch of text with no raw-matched added token in it.
  void encode_stretch(absl::string_view text, bool at_start, std::vector<int32_t>& ids) const;

  added_vocabulary added_;
  normalizer normalize_;
  pre_tokenizer pre_tokenize_;
  std::unique_ptr<bpe_model> model_;
  special_template post_process_;
  decoder decode_;
  absl::flat_hash_set<std::string> special_contents_;
  int32_t vocab_size_ = 0;
};

}  // namespace troupe::tokenizers
