#include "models/tokenizer/text_pattern.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace troupe::tokenizers {

struct text_pattern::compiled {
  pcre2_code* code = nullptr;
  ~compiled() { pcre2_code_free(code); }
};

namespace {

// One match-data block per thread and pattern size class; pcre2_match_data is not shareable.
struct match_data_deleter {
  void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
};

pcre2_match_data* thread_match_data() {
  // Our patterns' matches need only the whole match's offsets (one pair).
  thread_local std::unique_ptr<pcre2_match_data, match_data_deleter> data(
      pcre2_match_data_create(1, nullptr));
  return data.get();
}

}  // namespace

text_pattern text_pattern::literal(std::string text) {
  text_pattern p;
  p.source_ = std::move(text);
  return p;
}

absl::StatusOr<text_pattern> text_pattern::regex(const std::string& expression) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expression.data()), expression.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return absl::InvalidArgumentError(absl::StrCat("the regex '", expression,
                                                   "' does not compile at offset ", offset, ": ",
                                                   reinterpret_cast<const char*>(message)));
  }
  // JIT where the platform has it; the interpreter otherwise (same results).
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto c = std::make_shared<compiled>();
  c->code = code;
  text_pattern p;
  p.source_ = expression;
  p.literal_ = false;
  p.regex_ = std::move(c);
  return p;
}

std::vector<std::pair<size_t, size_t>> text_pattern::find_all(absl::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_) {
    if (source_.empty()) return out;
    for (size_t at = s.find(source_); at != absl::string_view::npos;
         at = s.find(source_, at + source_.size())) {
      out.emplace_back(at, at + source_.size());
    }
    return out;
  }
  pcre2_match_data* data = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    // The subject was checked once (the tokenizer's input is valid UTF-8 by then).
    const int rc =
        pcre2_match(regex_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc < 0) break;  // no match (or a resource limit: the rest is one unmatched piece)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {  // an empty match: on to the next character
      start = b + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        ++start;
    }
  }
  return out;
}

std::string text_pattern::replace_all(absl::string_view s, absl::string_view with) const {
  std::string out;
  size_t prev = 0;
  for (const auto& [b, e] : find_all(s)) {
    absl::StrAppend(&out, s.substr(prev, b - prev), with);
    prev = e;
  }
  absl::StrAppend(&out, s.substr(prev));
  return out;
}

}  // namespace troupe::tokenizers
