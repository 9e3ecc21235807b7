#pragma once

// troupe's GPTs are byte-level: a text's tokens are its bytes (0..255), and the text of tokens
// is those bytes. Every app that turns text into tokens or back (serving, RLHF) uses these.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::models {

/// The tokens of `text`: its bytes.
[[nodiscard]] inline std::vector<int32_t> tokens_of(std::string_view text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text)
    tokens.push_back(c);
  return tokens;
}

/// The bytes of `tokens` (not necessarily valid UTF-8).
[[nodiscard]] inline std::string text_of(const std::vector<int32_t>& tokens) {
  std::string s;
  s.reserve(tokens.size());
  for (int32_t t : tokens)
    s.push_back(static_cast<char>(t));
  return s;
}

}  // namespace troupe::models
