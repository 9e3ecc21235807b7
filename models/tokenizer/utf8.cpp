#include "models/tokenizer/utf8.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::tokenizers {

namespace {

// The second byte's range for a lead byte (Unicode table 3-7, well-formed byte sequences);
// later continuation bytes are always 0x80..0xBF.
struct lead_rule {
  int length;
  uint8_t second_low, second_high;
};

lead_rule rule_of(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};  // at most U+10FFFF
  return {0, 0, 0};                          // 0x80..0xC1, 0xF5..0xFF never start a character
}

// How many bytes of `s` (not empty) belong to the character it starts: `complete` is false
// where `s` ends before the character does, and the count is then those bytes that are valid so
// far (a maximal subpart where the character is broken instead).
size_t prefix_of_character(absl::string_view s, bool& complete) {
  const auto lead = static_cast<uint8_t>(s[0]);
  const lead_rule r = rule_of(lead);
  complete = r.length > 0;
  if (r.length <= 1) return 1;
  for (int i = 1; i < r.length; ++i) {
    if (static_cast<size_t>(i) >= s.size()) {
      complete = false;
      return i;
    }
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t low = i == 1 ? r.second_low : 0x80, high = i == 1 ? r.second_high : 0xBF;
    if (b < low || b > high) {
      complete = false;
      return i;
    }
  }
  return r.length;
}

}  // namespace

size_t valid_sequence_length(absl::string_view s) {
  bool complete = false;
  const size_t n = prefix_of_character(s, complete);
  return complete ? n : 0;
}

bool is_valid_utf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence_length(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(absl::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    bool complete = false;
    const size_t n = prefix_of_character(s.substr(i), complete);
    if (complete) {
      absl::StrAppend(&out, s.substr(i, n));
    } else {
      absl::StrAppend(&out, replacement_character);  // the maximal subpart, or a lone invalid byte
    }
    i += n;
  }
  return out;
}

size_t complete_prefix_length(absl::string_view s) {
  // Only the last (at most three) bytes can be the start of a character still being written.
  const size_t from = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = from; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a lead byte
    bool complete = false;
    const size_t n = prefix_of_character(s.substr(i), complete);
    if (!complete && i + n == s.size()) return i;  // valid so far, cut off by the end
  }
  return s.size();
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t decode_utf8(absl::string_view s, size_t& length) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  length = static_cast<size_t>(rule_of(b0).length);
  char32_t cp = b0 & (0xFF >> (length + 1));
  for (size_t i = 1; i < length; ++i)
    cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
  return cp;
}

}  // namespace troupe::tokenizers
