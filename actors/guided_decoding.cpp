#include "actors/guided_decoding.hpp"

#include <array>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

// The tokens' bytes as a trie: node 0 is the empty prefix; each node lists its children by
// byte and the tokens whose bytes end there.
class guided_decoding::token_trie {
 public:
  explicit token_trie(const std::function<std::string_view(int32_t)>& text, int vocab) {
    nodes_.emplace_back();
    for (int32_t t = 0; t < vocab; ++t) {
      const std::string_view bytes = text(t);
      if (bytes.empty()) continue;  // a special token: never part of structured output
      int at = 0;
      for (char c : bytes)
        at = child(at, static_cast<uint8_t>(c));
      nodes_[at].tokens.push_back(t);
    }
  }

  // allowed[t] = 1 for every token whose bytes `m` accepts whole.
  void allowed(const json_matcher& m, std::vector<uint8_t>& allowed) const { walk(0, m, allowed); }

 private:
  struct trie_node {
    std::vector<std::pair<uint8_t, int>> children;
    std::vector<int32_t> tokens;
  };

  int child(int at, uint8_t b) {
    for (auto [byte, next] : nodes_[at].children) {
      if (byte == b) return next;
    }
    nodes_.emplace_back();
    nodes_[at].children.emplace_back(b, static_cast<int>(nodes_.size()) - 1);
    return static_cast<int>(nodes_.size()) - 1;
  }

  void walk(int at, const json_matcher& m, std::vector<uint8_t>& allowed) const {
    for (auto [b, next] : nodes_[at].children) {
      json_matcher after = m;
      if (!after.accept(b)) continue;  // nothing below this prefix either
      for (int32_t t : nodes_[next].tokens)
        allowed[t] = 1;
      walk(next, after, allowed);
    }
  }

  std::vector<trie_node> nodes_;
};

guided_decoding::guided_decoding(std::shared_ptr<const std::vector<std::string>> token_text,
                                 int vocab)
    : token_text_(std::move(token_text)), vocab_(vocab) {}

guided_decoding::~guided_decoding() = default;

std::string_view guided_decoding::text(int32_t token) const {
  static const std::array<char, 256> bytes = [] {
    std::array<char, 256> b{};
    for (int i = 0; i < 256; ++i)
      b[i] = static_cast<char>(i);
    return b;
  }();
  if (token_text_ == nullptr) return token < 256 ? std::string_view(&bytes[token], 1) : "";
  return token < static_cast<int32_t>(token_text_->size()) ? std::string_view((*token_text_)[token])
                                                           : std::string_view();
}

absl::Status guided_decoding::add(uint64_t id, const std::string& schema) {
  auto grammar = json_grammar::compile(schema);
  if (!grammar.ok()) return grammar.status();
  if (trie_ == nullptr) {
    trie_ = std::make_unique<token_trie>([this](int32_t t) { return text(t); }, vocab_);
  }
  matchers_.insert_or_assign(id, json_matcher(*std::move(grammar)));
  return absl::OkStatus();
}

bool guided_decoding::mask(uint64_t id, float* logits, std::span<const int32_t> stop_tokens) const {
  const json_matcher& m = matchers_.at(id);
  thread_local std::vector<uint8_t> allowed;
  allowed.assign(vocab_, 0);
  trie_->allowed(m, allowed);
  const bool whole = m.complete();
  for (int32_t t : stop_tokens)
    allowed[t] = whole ? 1 : 0;
  bool any = false;
  for (int t = 0; t < vocab_; ++t) {
    if (allowed[t]) {
      any = true;
    } else {
      logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
  return any;
}

bool guided_decoding::advance(uint64_t id, int32_t token) {
  json_matcher& m = matchers_.at(id);
  const std::string_view bytes = text(token);
  if (bytes.empty()) return false;  // a stop token: the value was whole
  json_matcher next = m;
  if (!next.accept(bytes)) return false;  // cannot happen for a masked draw
  m = std::move(next);
  return m.can_continue();
}

}  // namespace troupe::actors
