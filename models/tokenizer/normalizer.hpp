#pragma once

// tokenizer.json's "normalizer": what the text becomes before it is split into words. A
// normalizer is a list of steps applied in order (a "Sequence" is flattened into it).

#include <string>
#include <variant>
#include <vector>

#include "models/tokenizer/text_pattern.hpp"

namespace troupe::tokenizers {

/// NFC, NFD, NFKC or NFKD (through utf8proc).
struct unicode_normalization {
  enum class form { nfc, nfd, nfkc, nfkd } kind = form::nfc;
};
/// Every match of `pattern` becomes `content`.
struct replace_step {
  text_pattern pattern;
  std::string content;
};
/// `text` before a non-empty string.
struct prepend_step {
  std::string text;
};
/// Removes whitespace at the start and/or the end.
struct strip_step {
  bool left = true, right = true;
};

using normalizer_step = std::variant<unicode_normalization, replace_step, prepend_step, strip_step>;

/// The steps of a normalizer, applied in order to valid UTF-8.
class normalizer {
 public:
  normalizer() = default;
  explicit normalizer(std::vector<normalizer_step> steps) : steps_(std::move(steps)) {}

  [[nodiscard]] bool empty() const { return steps_.empty(); }
  [[nodiscard]] std::string apply(std::string text) const;

 private:
  std::vector<normalizer_step> steps_;
};

}  // namespace troupe::tokenizers
