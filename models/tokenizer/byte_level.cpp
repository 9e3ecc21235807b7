#include "models/tokenizer/byte_level.hpp"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "models/tokenizer/utf8.hpp"

namespace troupe::tokenizers {

namespace {

struct alphabet {
  std::array<std::string, 256> chars;
  absl::flat_hash_map<char32_t, uint8_t> bytes;

  alphabet() {
    std::array<char32_t, 256> cp{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      cp[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    for (int b = 0; b < 256; ++b) {
      append_utf8(chars[b], cp[b]);
      bytes.emplace(cp[b], static_cast<uint8_t>(b));
    }
  }
};

const alphabet& the_alphabet() {
  static const alphabet a;
  return a;
}

}  // namespace

absl::string_view byte_level_char(uint8_t b) {
  return the_alphabet().chars[b];
}

std::optional<std::string> byte_level_bytes(absl::string_view s) {
  const auto& bytes = the_alphabet().bytes;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    if (valid_sequence_length(s.substr(i)) == 0) return std::nullopt;
    const auto it = bytes.find(decode_utf8(s.substr(i), n));
    if (it == bytes.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
    i += n;
  }
  return out;
}

}  // namespace troupe::tokenizers
