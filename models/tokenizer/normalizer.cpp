#include "models/tokenizer/normalizer.hpp"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "models/tokenizer/utf8.hpp"
#include "runtime/base/overloaded.hpp"

namespace troupe::tokenizers {

namespace {

std::string normalize_form(const std::string& text, unicode_normalization::form form) {
  if (text.empty()) return text;
  // ASCII is already in every normal form.
  bool ascii = true;
  for (char c : text)
    ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return text;
  int options = UTF8PROC_STABLE;
  switch (form) {
    case unicode_normalization::form::nfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case unicode_normalization::form::nfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case unicode_normalization::form::nfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case unicode_normalization::form::nfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) return text;  // only on invalid UTF-8, which the tokenizer never passes
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

bool is_whitespace(char32_t cp) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cp == '\t' || cp == '\n' || cp == '\v' || cp == '\f' || cp == '\r' || cp == 0x85 ||
         category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
         category == UTF8PROC_CATEGORY_ZP;
}

std::string strip(const std::string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      size_t n = 0;
      if (!is_whitespace(decode_utf8(absl::string_view(text).substr(begin), n))) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        --start;
      size_t n = 0;
      if (!is_whitespace(decode_utf8(absl::string_view(text).substr(start), n))) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace

std::string normalizer::apply(std::string text) const {
  for (const auto& step : steps_) {
    text = std::visit(
        overloaded{
            [&](const unicode_normalization& s) { return normalize_form(text, s.kind); },
            [&](const replace_step& s) { return s.pattern.replace_all(text, s.content); },
            [&](const prepend_step& s) { return text.empty() ? text : s.text + text; },
            [&](const strip_step& s) { return strip(text, s.left, s.right); },
        },
        step);
  }
  return text;
}

}  // namespace troupe::tokenizers
