#pragma once

// UTF-8 as the tokenizers need it: lossy decoding with the replacement rules of Rust's
// String::from_utf8_lossy and the WHATWG decoder (which HF tokenizers and its bindings apply to
// their input and to decoded bytes), and the length of a text's complete characters (streaming).

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace troupe::tokenizers {

/// U+FFFD, the replacement character, in UTF-8.
inline constexpr absl::string_view replacement_character = "\xEF\xBF\xBD";

/// The length of the valid UTF-8 sequence that starts `s`, or 0 where none does (an invalid or
/// cut-off one); `s` must not be empty.
[[nodiscard]] size_t valid_sequence_length(absl::string_view s);

/// Whether `s` is entirely valid UTF-8.
[[nodiscard]] bool is_valid_utf8(absl::string_view s);

/// `s` with each maximal invalid subsequence replaced by U+FFFD ("substitution of maximal
/// subparts", Unicode 15 section 3.9; what from_utf8_lossy and the WHATWG decoder do).
[[nodiscard]] std::string to_valid_utf8(absl::string_view s);

/// The length of `s`'s longest prefix that does not end inside an incomplete (but so far valid)
/// character: what a stream may emit before the bytes that may still complete one.
[[nodiscard]] size_t complete_prefix_length(absl::string_view s);

/// Appends code point `cp` (at most U+10FFFF, not a surrogate) in UTF-8.
void append_utf8(std::string& out, char32_t cp);

/// The code point that starts `s` (valid UTF-8, not empty) and its length in bytes.
[[nodiscard]] char32_t decode_utf8(absl::string_view s, size_t& length);

}  // namespace troupe::tokenizers
