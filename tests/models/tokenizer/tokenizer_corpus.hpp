#pragma once

// The texts the tokenizer is checked on against HF tokenizers: real prose (the Debian fortunes),
// code (this repository's sources), and generated text in each hard category: CJK, emoji
// sequences, combining marks, whitespace runs, invalid UTF-8, the tokenizer's own special
// tokens in and around words, and mixed scripts with numbers. Deterministic for a seed.

#include <string>
#include <vector>

namespace troupe::tokenizers::testing {

/// How many texts of each kind tokenizer_corpus makes.
struct corpus_sizes {
  int fortunes = 3000, code = 2000, cjk = 1000, emoji = 1000, combining = 1000, whitespace = 1000,
      invalid_utf8 = 1000, special_tokens = 1000, mixed = 1000;
};

/// The corpus, `special` being the tokenizer's added tokens' contents. Fortunes come from
/// /usr/share/games/fortunes and code from `source_dir`.
[[nodiscard]] std::vector<std::string> tokenizer_corpus(const std::vector<std::string>& special,
                                                        const std::string& source_dir,
                                                        unsigned seed, corpus_sizes sizes = {});

}  // namespace troupe::tokenizers::testing
