#pragma once

// Training a byte-level BPE vocabulary from text, for pretraining from scratch with a real
// vocabulary: the result is a tokenizer.json in Hugging Face's format (Llama 3's pre-tokenizer
// regex and GPT-2's byte alphabet), which troupe's tokenizer and HF tokenizers both load and
// encode alike.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::tokenizers {

struct bpe_training_options {
  /// Ids in all: the special tokens, the 256 bytes, then one per merge.
  int vocab_size = 4096;
  /// A pair merges only if it occurs at least this often.
  int min_frequency = 2;
  /// Added as special tokens with the first ids (a document separator, chat markers).
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
};

/// Trains on `texts` (each pre-tokenized on its own): repeatedly merges the most frequent
/// adjacent pair (ties to the smaller pair of ids), counting pairs incrementally, until
/// vocab_size ids or no pair occurs min_frequency times. INVALID_ARGUMENT when vocab_size
/// leaves no room beyond the specials and the bytes, or a special token is empty or repeated.
[[nodiscard]] absl::StatusOr<nlohmann::json> train_byte_level_bpe(
    const std::vector<std::string>& texts, const bpe_training_options& options);

/// What tokenizer_config.json says besides the vocabulary.
struct tokenizer_config_options {
  /// The end-of-sequence token, one of the special tokens; empty: the first of them.
  std::string eos_token;
  /// A Jinja chat template, kept as transformers saves `tokenizer.chat_template`; empty: none.
  std::string chat_template;
};

/// INVALID_ARGUMENT for an eos_token that is not one of `options`' special tokens.
[[nodiscard]] absl::Status check_tokenizer_config(const bpe_training_options& options,
                                                  const tokenizer_config_options& config);

/// Writes a trained `tokenizer` (train_byte_level_bpe's) into `dir`, created if need be, as HF
/// tokenizers expects it: tokenizer.json, and a tokenizer_config.json naming the end-of-sequence
/// token and the chat template of `config` (check_tokenizer_config's errors; others name the
/// file).
[[nodiscard]] absl::Status write_trained_tokenizer(const std::string& dir,
                                                   const nlohmann::json& tokenizer,
                                                   const bpe_training_options& options,
                                                   const tokenizer_config_options& config = {});

}  // namespace troupe::tokenizers
