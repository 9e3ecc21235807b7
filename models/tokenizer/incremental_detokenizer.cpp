#include "models/tokenizer/incremental_detokenizer.hpp"

#include "absl/strings/match.h"
#include "models/tokenizer/utf8.hpp"

namespace troupe::tokenizers {

namespace {

// How many prompt ids precede the first generated one as its context (vLLM's 5).
constexpr size_t context_ids = 5;

}  // namespace

incremental_detokenizer::incremental_detokenizer(const tokenizer& t,
                                                 std::span<const int32_t> prompt,
                                                 bool skip_special_tokens)
    : tokenizer_(t), skip_special_(skip_special_tokens) {
  const size_t from = prompt.size() > context_ids ? prompt.size() - context_ids : 0;
  window_.assign(prompt.begin() + static_cast<std::ptrdiff_t>(from), prompt.end());
  read_ = window_.size();
}

absl::StatusOr<std::string> incremental_detokenizer::text_since_prefix(size_t end) const {
  return tokenizer_.decode(std::span<const int32_t>(window_).first(end), skip_special_);
}

absl::StatusOr<std::string> incremental_detokenizer::push(int32_t id) {
  window_.push_back(id);
  auto released = text_since_prefix(read_);
  if (!released.ok()) return released.status();
  auto all = text_since_prefix(window_.size());
  if (!all.ok()) {
    window_.pop_back();  // a bad id leaves the stream as it was
    return all.status();
  }
  if (all->size() <= released->size() || absl::EndsWith(*all, replacement_character) ||
      !absl::StartsWith(*all, *released)) {
    return std::string();  // held back until the next token completes it
  }
  std::string fresh = all->substr(released->size());
  // The released ids become the next decode's context; only the last few are kept.
  const size_t drop = read_ > context_ids ? read_ - context_ids : 0;
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(drop));
  read_ = window_.size();
  return fresh;
}

absl::StatusOr<std::string> incremental_detokenizer::finish() {
  auto released = text_since_prefix(read_);
  if (!released.ok()) return released.status();
  auto all = text_since_prefix(window_.size());
  if (!all.ok()) return all.status();
  read_ = window_.size();
  // (Released text is always a prefix of the whole; past the longest common one otherwise.)
  size_t common = 0;
  while (common < released->size() && common < all->size() && (*released)[common] == (*all)[common])
    ++common;
  return all->substr(common);
}

}  // namespace troupe::tokenizers
