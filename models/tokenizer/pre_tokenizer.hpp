#pragma once

// tokenizer.json's "pre_tokenizer": how a normalized text is cut into the words that the model
// encodes one by one. A list of steps applied in order (a "Sequence" is flattened into it); each
// step cuts every piece the step before left.

#include <string>
#include <variant>
#include <vector>

#include "models/tokenizer/text_pattern.hpp"

namespace troupe::tokenizers {

/// A piece of the text on its way to the model.
struct text_piece {
  std::string text;
  bool at_start = false;  ///< starts where the input started (Metaspace's "first" scheme)
};

/// What a Split does with the pattern's matches (HF's SplitDelimiterBehavior).
enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

/// Cuts each piece at the matches of `pattern` (with `invert`, at what lies between them).
struct split_step {
  text_pattern pattern;
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
};

/// Byte-level BPE's pre-tokenizer: a space before a piece that has none (add_prefix_space),
/// then GPT-2's word regex (use_regex). The bytes' mapping to the byte-level alphabet is the
/// model's (it looks up raw bytes), so this step must come last.
struct byte_level_step {
  bool add_prefix_space = false;
  bool use_regex = true;
};

/// SentencePiece's spaces: each ' ' becomes `replacement`, which is prepended to a piece
/// (always, never, or only to the input's first), and the piece optionally split before each.
struct metaspace_step {
  enum class prepend { always, first, never };
  std::string replacement = "\xE2\x96\x81";  // U+2581
  prepend scheme = prepend::always;
  bool split = true;
};

using pre_tokenizer_step = std::variant<split_step, byte_level_step, metaspace_step>;

/// The steps of a pre-tokenizer.
class pre_tokenizer {
 public:
  pre_tokenizer() = default;
  explicit pre_tokenizer(std::vector<pre_tokenizer_step> steps) : steps_(std::move(steps)) {}

  /// Appends to `out` the non-empty words of `piece`.
  void apply(text_piece piece, std::vector<text_piece>& out) const;
  /// Whether the last step is byte_level_step: the model then reads raw bytes.
  [[nodiscard]] bool byte_level() const;

 private:
  std::vector<pre_tokenizer_step> steps_;
};

/// The regex GPT-2's ByteLevel pre-tokenizer splits with (use_regex).
[[nodiscard]] const text_pattern& gpt2_word_pattern();

}  // namespace troupe::tokenizers
