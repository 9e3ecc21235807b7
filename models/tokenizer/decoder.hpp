#pragma once

// tokenizer.json's "decoder": how tokens become text again. A list of steps over the token
// strings (a "Sequence" is flattened into it), whose results are joined.

#include <string>
#include <variant>
#include <vector>

#include "models/tokenizer/text_pattern.hpp"

namespace troupe::tokenizers {

/// Byte-level tokens back to their bytes, then the whole as UTF-8 (invalid bytes as U+FFFD).
struct byte_level_decode {};
/// Runs of <0xXX> tokens back to their bytes: the text where they are valid UTF-8, one U+FFFD
/// per byte where not.
struct byte_fallback_decode {};
/// Every token joined into one.
struct fuse_decode {};
/// Up to `start` leading and `stop` trailing `content` characters off each token.
struct strip_decode {
  std::string content = " ";
  int start = 0, stop = 0;
};
/// Every match of `pattern` in each token becomes `content`.
struct replace_decode {
  text_pattern pattern;
  std::string content;
};
/// SentencePiece's `replacement` back to spaces; the first token's dropped unless the
/// pre-tokenizer never prepends one.
struct metaspace_decode {
  std::string replacement = "\xE2\x96\x81";
  bool prepends = true;
};

using decoder_step = std::variant<byte_level_decode, byte_fallback_decode, fuse_decode,
                                  strip_decode, replace_decode, metaspace_decode>;

/// The steps of a decoder; without any, tokens are joined with spaces (as in HF).
class decoder {
 public:
  decoder() = default;
  explicit decoder(std::vector<decoder_step> steps) : steps_(std::move(steps)) {}

  [[nodiscard]] std::string apply(std::vector<std::string> tokens) const;
  /// The bytes one token stands for inside a text (not at its start, so that no leading space
  /// is stripped), without making them valid UTF-8: a byte-level or <0xXX> token may hold part
  /// of a character. What stop strings are matched on.
  [[nodiscard]] std::string token_bytes(std::string token) const;

 private:
  std::vector<decoder_step> steps_;
};

}  // namespace troupe::tokenizers
