#include "models/tokenizer/tokenizer.hpp"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/utf8.hpp"

namespace troupe::tokenizers {

tokenizer::tokenizer(tokenizer_parts parts)
    : added_(std::move(parts.added_tokens),
             [&](const std::string& content) { return parts.normalize.apply(content); }),
      normalize_(std::move(parts.normalize)),
      pre_tokenize_(std::move(parts.pre_tokenize)),
      model_(std::move(parts.model)),
      post_process_(std::move(parts.post_process)),
      decode_(std::move(parts.decode)) {
  vocab_size_ = model_->id_bound();
  for (const added_token& t : added_.tokens()) {
    vocab_size_ = std::max(vocab_size_, t.id + 1);
    if (t.special) special_contents_.insert(t.content);
  }
}

absl::StatusOr<std::unique_ptr<tokenizer>> tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open the tokenizer file '", path, "'"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), path);
}

void tokenizer::encode_stretch(absl::string_view text, bool at_start,
                               std::vector<int32_t>& ids) const {
  std::string normalized = normalize_.apply(std::string(text));
  std::vector<text_piece> words;
  for (const text_segment& s : added_.split(normalized, /*normalized=*/true)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    words.clear();
    pre_tokenize_.apply({normalized.substr(s.begin, s.end - s.begin), at_start && s.begin == 0},
                        words);
    for (const text_piece& w : words)
      model_->encode_word(w.text, ids);
  }
}

std::vector<int32_t> tokenizer::encode(absl::string_view text, bool add_special_tokens) const {
  const std::string valid = to_valid_utf8(text);
  std::vector<int32_t> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const text_segment& s : added_.split(valid, /*normalized=*/false)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_stretch(absl::string_view(valid).substr(s.begin, s.end - s.begin), s.begin == 0, ids);
    }
  }
  if (!add_special_tokens || (post_process_.size() == 1 && post_process_[0] == -1)) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + post_process_.size());
  for (int32_t item : post_process_) {
    if (item == -1) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else {
      out.push_back(item);
    }
  }
  return out;
}

absl::StatusOr<std::string> tokenizer::decode(std::span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    const std::string* token = nullptr;
    if (const added_token* a = added_.find(id)) {
      token = &a->content;
    } else {
      token = model_->id_to_token(id);
    }
    if (token == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " (at index ", i,
                                                     ") is not in the vocabulary (ids 0 to ",
                                                     vocab_size_ - 1, ")"));
    }
    if (skip_special_tokens && special_contents_.contains(*token)) continue;
    tokens.push_back(*token);
  }
  return decode_.apply(std::move(tokens));
}

std::optional<int32_t> tokenizer::token_to_id(absl::string_view token) const {
  if (const added_token* a = added_.find(token)) return a->id;
  return model_->token_to_id(token);
}

std::optional<std::string> tokenizer::id_to_token(int32_t id) const {
  if (const added_token* a = added_.find(id)) return a->content;
  if (const std::string* t = model_->id_to_token(id)) return *t;
  return std::nullopt;
}

std::string tokenizer::token_bytes(int32_t id) const {
  if (const added_token* a = added_.find(id)) return a->content;
  if (const std::string* t = model_->id_to_token(id)) return decode_.token_bytes(*t);
  return {};
}

bool tokenizer::is_special(int32_t id) const {
  const auto token = id_to_token(id);
  return token && special_contents_.contains(*token);
}

}  // namespace troupe::tokenizers
