#include "actors/guided_decoding.hpp"

#include <algorithm>
#include <functional>
#include <limits>

#include "actors/token_text.hpp"

namespace troupe::actors {

// The tokens' bytes as a trie: node 0 is the empty prefix; each node lists its children by
// byte and the tokens whose bytes end there.
class guided_decoding::token_trie {
 public:
  // The tokens of [0, vocab) with text that `keep` keeps.
  token_trie(const std::function<std::string_view(int32_t)>& text, int vocab,
             const std::function<bool(int32_t)>& keep) {
    nodes_.emplace_back();
    for (int32_t t = 0; t < vocab; ++t) {
      const std::string_view bytes = text(t);
      if (bytes.empty() || !keep(t)) continue;  // a special token: never structured output
      int at = 0;
      for (char c : bytes)
        at = child(at, static_cast<uint8_t>(c));
      nodes_[at].tokens.push_back(t);
      depth_ = std::max(depth_, static_cast<int>(bytes.size()));
    }
  }

  // allowed[t] = 1 for every token whose bytes `m` accepts whole.
  void allowed(const json_matcher& m, std::vector<uint8_t>& allowed) const {
    std::vector<json_matcher> states(depth_ + 1, m);  // states[d]: after d bytes of the path
    walk(0, 0, states, allowed);
  }

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

  // Depth first, each level's matcher copied into the next level's (whose memory it reuses).
  void walk(int at, int depth, std::vector<json_matcher>& states,
            std::vector<uint8_t>& allowed) const {
    for (auto [b, next] : nodes_[at].children) {
      json_matcher& after = states[depth + 1];
      after = states[depth];
      if (!after.accept(b)) continue;  // nothing below this prefix either
      for (int32_t t : nodes_[next].tokens)
        allowed[t] = 1;
      walk(next, depth + 1, states, allowed);
    }
  }

  std::vector<trie_node> nodes_;
  int depth_ = 0;  // the longest token's bytes
};

guided_decoding::guided_decoding(std::shared_ptr<const std::vector<std::string>> token_text,
                                 int vocab)
    : token_text_(std::move(token_text)), vocab_(vocab) {}

guided_decoding::~guided_decoding() = default;

std::string_view guided_decoding::text(int32_t token) const {
  return token_text_of(token_text_.get(), token);
}

void guided_decoding::build() {
  // A token is plain string text when a string takes all its bytes and is still open after
  // them, between characters.
  const auto string = *json_grammar::compile(std::string(R"({"type": "string"})"));
  json_matcher open(*string);
  (void)open.accept('"');
  std::vector<bool> plain(vocab_, false);
  for (int32_t t = 0; t < vocab_; ++t) {
    json_matcher m = open;
    if (text(t).empty() || !m.accept(text(t)) || m.string_room() < 0) continue;
    plain[t] = true;
    plain_.emplace_back(open.string_room() - m.string_room(), t);
  }
  std::sort(plain_.begin(), plain_.end());
  const auto text_of = [this](int32_t t) { return text(t); };
  trie_ = std::make_unique<token_trie>(text_of, vocab_, [](int32_t) { return true; });
  special_trie_ =
      std::make_unique<token_trie>(text_of, vocab_, [&plain](int32_t t) { return !plain[t]; });
}

void guided_decoding::add(uint64_t id, std::shared_ptr<const json_grammar> grammar) {
  if (trie_ == nullptr) build();
  json_matcher start(*grammar);
  matchers_.insert_or_assign(id, guided_request{std::move(grammar), std::move(start)});
}

bool guided_decoding::mask(uint64_t id, float* logits, std::span<const int32_t> stop_tokens) const {
  const json_matcher& m = matchers_.at(id).position;
  thread_local std::vector<uint8_t> allowed;
  allowed.assign(vocab_, 0);
  if (const int room = m.string_room(); room >= 0) {
    for (auto [chars, t] : plain_) {
      if (chars > room) break;
      allowed[t] = 1;
    }
    special_trie_->allowed(m, allowed);
  } else {
    trie_->allowed(m, allowed);
  }
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
  json_matcher& m = matchers_.at(id).position;
  const std::string_view bytes = text(token);
  if (bytes.empty()) return false;  // a stop token: the value was whole
  json_matcher next = m;
  if (!next.accept(bytes)) return false;  // cannot happen for a masked draw
  m = std::move(next);
  return m.can_continue();
}

}  // namespace troupe::actors
