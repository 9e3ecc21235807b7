#include "models/tokenizer/bpe_model.hpp"

#include <queue>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/tokenizer/byte_level.hpp"
#include "models/tokenizer/utf8.hpp"

namespace troupe::tokenizers {

namespace {

// Words up to this many bytes are cached, up to this many words (HF's limits are alike).
constexpr size_t cache_word_bytes = 256;
constexpr size_t cache_words = 100000;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<bpe_model>> bpe_model::create(
    std::vector<std::pair<std::string, int32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, bpe_options options) {
  std::unique_ptr<bpe_model> m(new bpe_model());
  m->options_ = std::move(options);
  int32_t bound = 0;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab: token '", token, "' has a negative id (", id, ")"));
    }
    bound = std::max(bound, id + 1);
  }
  m->tokens_.assign(bound, std::string());
  m->has_token_.assign(bound, false);
  // The vocabulary's spelling → the spelling of lookups (raw bytes when byte-level).
  absl::flat_hash_map<std::string, int32_t> by_spelling;
  by_spelling.reserve(vocab.size());
  m->ids_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (m->has_token_[id]) {
      return absl::InvalidArgumentError(absl::StrCat("model.vocab: id ", id, " is given to both '",
                                                     m->tokens_[id], "' and '", token, "'"));
    }
    m->has_token_[id] = true;
    if (m->options_.byte_level) {
      // A token outside the alphabet (an added token spelt as itself) is never a word's part.
      if (auto bytes = byte_level_bytes(token)) m->ids_.emplace(std::move(*bytes), id);
    } else {
      m->ids_.emplace(token, id);
    }
    by_spelling.emplace(token, id);
    m->tokens_[id] = std::move(token);
  }
  if (m->options_.byte_level) {
    for (int b = 0; b < 256; ++b) {
      const auto it = by_spelling.find(byte_level_char(static_cast<uint8_t>(b)));
      if (it == by_spelling.end()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "model.vocab has no token for byte 0x%02X ('%s'), which a byte-level vocabulary needs",
            b, byte_level_char(static_cast<uint8_t>(b))));
      }
      m->byte_ids_[b] = it->second;
    }
  }
  if (m->options_.unk_token) {
    const auto it = by_spelling.find(*m->options_.unk_token);
    if (it == by_spelling.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.unk_token '", *m->options_.unk_token, "' is not in model.vocab"));
    }
    m->unk_id_ = it->second;
  }
  const std::string& prefix = m->options_.continuing_subword_prefix;
  m->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = by_spelling.find(left), r = by_spelling.find(right);
    // The merged token drops the right part's continuing-subword prefix.
    const std::string joined = absl::StrCat(
        left, absl::StartsWith(right, prefix) ? absl::string_view(right).substr(prefix.size())
                                              : absl::string_view(right));
    const auto j = by_spelling.find(joined);
    if (l == by_spelling.end() || r == by_spelling.end() || j == by_spelling.end()) {
      const std::string& missing =
          l == by_spelling.end() ? left : (r == by_spelling.end() ? right : joined);
      return absl::InvalidArgumentError(absl::StrCat("model.merges[", rank, "] ('", left, "' '",
                                                     right, "'): '", missing,
                                                     "' is not in model.vocab"));
    }
    // Of two identical merges the later one ranks (as HF's map, built in order, keeps it).
    m->merges_.insert_or_assign(pair_key(l->second, r->second),
                                merge_result{static_cast<int32_t>(rank), j->second});
  }
  return m;
}

std::optional<int32_t> bpe_model::token_to_id(absl::string_view token) const {
  if (options_.byte_level) {
    const auto bytes = byte_level_bytes(token);
    if (!bytes) return std::nullopt;
    const auto it = ids_.find(*bytes);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* bpe_model::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_bound() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void bpe_model::first_symbols(absl::string_view word, std::vector<int32_t>& symbols) const {
  if (options_.byte_level) {
    for (unsigned char b : word)
      symbols.push_back(byte_ids_[b]);
    return;
  }
  // Characters, with the subword prefix after the first and the suffix on the last; a missing
  // one as its bytes' tokens (byte fallback) or as unk (consecutive ones fused with fuse_unk).
  std::optional<int32_t> pending_unk;
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::max<size_t>(1, valid_sequence_length(word.substr(i)));
    key.clear();
    if (i > 0) key += options_.continuing_subword_prefix;
    absl::StrAppend(&key, word.substr(i, n));
    if (i + n == word.size()) key += options_.end_of_word_suffix;
    i += n;
    if (const auto it = ids_.find(key); it != ids_.end()) {
      if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
      symbols.push_back(it->second);
      continue;
    }
    if (options_.byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : key) {
        const auto it = ids_.find(absl::StrFormat("<0x%02X>", b));
        if (it == ids_.end()) break;
        bytes.push_back(it->second);
      }
      if (bytes.size() == key.size()) {
        // (HF adds a pending unk only before the next known token; a byte run leaves it.)
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !options_.fuse_unk) symbols.push_back(*pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void bpe_model::merge(std::vector<int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  // A doubly linked list over the symbols; a queue of candidate merges by (rank, position).
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<bool> removed(n, false);
  struct candidate {
    int32_t rank;
    int pos;
    int32_t id;
    bool operator>(const candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<candidate, std::vector<candidate>, std::greater<>> queue;
  auto consider = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    const auto it = merges_.find(pair_key(symbols[pos], symbols[next[pos]]));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (int i = 0; i + 1 < n; ++i)
    consider(i);
  while (!queue.empty()) {
    const candidate top = queue.top();
    queue.pop();
    if (removed[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    // Stale: the pair at this position has changed since it was queued.
    const auto it = merges_.find(pair_key(symbols[top.pos], symbols[right]));
    if (it == merges_.end() || it->second.id != top.id) continue;
    symbols[top.pos] = top.id;
    removed[right] = true;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    consider(prev[top.pos]);
    consider(top.pos);
  }
  int kept = 0;
  for (int i = 0; i < n; ++i)
    if (!removed[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

void bpe_model::encode_word(absl::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto it = ids_.find(word); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= cache_word_bytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  first_symbols(word, symbols);
  merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    if (cache_.size() < cache_words) cache_.emplace(word, std::move(symbols));
  }
}

}  // namespace troupe::tokenizers
