#include "models/tokenizer/utf8.hpp"

#include <gtest/gtest.h>

namespace troupe::tokenizers {
namespace {

TEST(Utf8, ValidTextIsKeptAsItIs) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(to_valid_utf8(text), text);
}

// The cases of Unicode's "U+FFFD substitution of maximal subparts" (table 3-8), which Rust's
// from_utf8_lossy and the WHATWG decoder follow.
TEST(Utf8, EachMaximalInvalidSubpartBecomesOneReplacementCharacter) {
  const std::string r(replacement_character);
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), r + r);                  // overlong lead: each byte
  EXPECT_EQ(to_valid_utf8("\xE0\x80\xAF"), r + r + r);          // E0 needs A0..BF next
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), r + r + r);          // a surrogate
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // past U+10FFFF
  EXPECT_EQ(to_valid_utf8("\xE4\xB8"
                          "a"),
            r + "a");                           // a cut-off character: one
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"), r);  // cut off by the end: one
  EXPECT_EQ(to_valid_utf8("\x80\xBF"), r + r);  // lone continuation bytes
  EXPECT_EQ(to_valid_utf8("\xFF"
                          "b\xFE"),
            r + "b" + r);
}

TEST(Utf8, CompletePrefixStopsBeforeACharacterStillBeingWritten) {
  EXPECT_EQ(complete_prefix_length("ab\xE4\xB8"), 2u);
  EXPECT_EQ(complete_prefix_length("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(complete_prefix_length("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(complete_prefix_length("ab\xFF"), 3u);  // broken, not pending
  EXPECT_EQ(complete_prefix_length("ab\xE4"
                                   "c"),
            4u);  // broken by 'c', not pending
  EXPECT_EQ(complete_prefix_length(""), 0u);
}

TEST(Utf8, EncodesAndDecodesCodePoints) {
  for (char32_t cp : {U'a', U'\u00E9', U'\u4E2D', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    size_t n = 0;
    EXPECT_EQ(decode_utf8(s, n), cp);
    EXPECT_EQ(n, s.size());
    EXPECT_TRUE(is_valid_utf8(s));
  }
}

}  // namespace
}  // namespace troupe::tokenizers
