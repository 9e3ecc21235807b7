#include "models/tokenizer/bpe_trainer.hpp"

#include <filesystem>
#include <fstream>
#include <queue>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/tokenizer/byte_level.hpp"
#include "models/tokenizer/text_pattern.hpp"
#include "models/tokenizer/utf8.hpp"
#include "runtime/base/status.hpp"

namespace troupe::tokenizers {

namespace {

using nlohmann::json;

// Llama 3's pre-tokenizer regex (numbers in runs of up to three digits).
constexpr const char* word_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

uint64_t key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

}  // namespace

absl::StatusOr<json> train_byte_level_bpe(const std::vector<std::string>& texts,
                                          const bpe_training_options& options) {
  const int specials = static_cast<int>(options.special_tokens.size());
  if (options.vocab_size <= specials + 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-size ", options.vocab_size, " leaves no room for merges: the ",
                     specials, " special tokens and the 256 bytes take ", specials + 256, " ids"));
  }
  absl::flat_hash_set<std::string> seen;
  for (const auto& s : options.special_tokens) {
    if (s.empty() || !seen.insert(s).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("special token '", s, "' is empty or repeated"));
    }
  }
  // The words and how often each occurs; a byte's symbol is its value.
  const auto regex = text_pattern::regex(word_regex);
  if (!regex.ok()) return regex.status();
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const auto& text : texts) {
    const std::string valid = to_valid_utf8(text);
    for (const auto& [b, e] : regex->find_all(valid))
      ++counts[valid.substr(b, e - b)];
  }
  std::vector<word> words;
  words.reserve(counts.size());
  for (const auto& [w, n] : counts) {
    word x;
    for (unsigned char c : w)
      x.symbols.push_back(c);
    x.count = n;
    words.push_back(std::move(x));
  }
  // Symbols 0..255 are bytes; merges get 256 on. Pair counts, the words holding each pair, and
  // a queue of (count, pair) whose stale entries are skipped.
  absl::flat_hash_map<uint64_t, int64_t> pair_count;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<int32_t>> where;
  for (int32_t w = 0; w < static_cast<int32_t>(words.size()); ++w) {
    const auto& s = words[w].symbols;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      pair_count[key(s[i], s[i + 1])] += words[w].count;
      where[key(s[i], s[i + 1])].insert(w);
    }
  }
  struct entry {
    int64_t count;
    uint64_t pair;
    bool operator<(const entry& o) const {  // the most frequent first, then the smaller pair
      return count != o.count ? count < o.count : pair > o.pair;
    }
  };
  std::priority_queue<entry> queue;
  for (const auto& [p, n] : pair_count)
    queue.push({n, p});
  std::vector<std::string> bytes_of(256);  // each symbol's bytes
  absl::flat_hash_map<std::string, int32_t> symbol_of;
  for (int b = 0; b < 256; ++b) {
    bytes_of[b] = std::string(1, static_cast<char>(b));
    symbol_of[bytes_of[b]] = b;
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  const size_t max_symbols = static_cast<size_t>(options.vocab_size - specials);
  while (bytes_of.size() < max_symbols && !queue.empty()) {
    const entry top = queue.top();
    queue.pop();
    const auto current = pair_count.find(top.pair);
    if (current == pair_count.end() || current->second != top.count) continue;  // stale
    if (top.count < options.min_frequency) break;
    const auto a = static_cast<int32_t>(top.pair >> 32),
               b = static_cast<int32_t>(top.pair & 0xFFFFFFFF);
    // Two pairs may spell one token ("ab"+"c" and "a"+"bc"): it keeps its one id, as in HF.
    const std::string spelt = bytes_of[a] + bytes_of[b];
    auto [known, fresh] = symbol_of.try_emplace(spelt, static_cast<int32_t>(bytes_of.size()));
    if (fresh) bytes_of.push_back(spelt);
    const int32_t merged = known->second;
    merges.emplace_back(a, b);
    // Each word holding the pair: its pairs out, the merge applied, its pairs back in.
    const auto holders = where[top.pair];
    absl::flat_hash_set<uint64_t> touched;
    for (int32_t w : holders) {
      auto& s = words[w].symbols;
      const int64_t n = words[w].count;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = key(s[i], s[i + 1]);
        pair_count[k] -= n;
        where[k].erase(w);
        touched.insert(k);
      }
      std::vector<int32_t> next;
      next.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      s = std::move(next);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = key(s[i], s[i + 1]);
        pair_count[k] += n;
        where[k].insert(w);
        touched.insert(k);
      }
    }
    for (uint64_t k : touched) {
      const auto it = pair_count.find(k);
      if (it == pair_count.end()) continue;
      if (it->second <= 0) {
        pair_count.erase(it);
        where.erase(k);
      } else {
        queue.push({it->second, k});
      }
    }
  }

  // tokenizer.json: specials first, then the bytes, then the merges' results.
  auto spelling = [&](int32_t symbol) {
    std::string s;
    for (unsigned char c : bytes_of[symbol])
      absl::StrAppend(&s, byte_level_char(c));
    return s;
  };
  json vocab = json::object(), added = json::array(), merge_list = json::array();
  for (int i = 0; i < specials; ++i) {
    vocab[options.special_tokens[i]] = i;
    added.push_back({{"id", i},
                     {"content", options.special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  for (int32_t symbol = 0; symbol < static_cast<int32_t>(bytes_of.size()); ++symbol)
    vocab[spelling(symbol)] = specials + symbol;
  for (const auto& [a, b] : merges)
    merge_list.push_back({spelling(a), spelling(b)});
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}};
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", word_regex}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

absl::Status check_tokenizer_config(const bpe_training_options& options,
                                    const tokenizer_config_options& config) {
  if (config.eos_token.empty() || absl::c_linear_search(options.special_tokens, config.eos_token))
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the eos token '", config.eos_token, "' is not one of the special tokens (",
                   absl::StrJoin(options.special_tokens, ", "), "); add it to them"));
}

absl::Status write_trained_tokenizer(const std::string& dir, const nlohmann::json& tokenizer,
                                     const bpe_training_options& options,
                                     const tokenizer_config_options& files) {
  TROUPE_RETURN_IF_ERROR(check_tokenizer_config(options, files));
  const std::vector<std::string>& specials = options.special_tokens;
  nlohmann::json eos = specials.empty() ? nlohmann::json(nullptr) : nlohmann::json(specials[0]);
  if (!files.eos_token.empty()) eos = files.eos_token;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": ", ec.message()));
  nlohmann::json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                           {"eos_token", eos},
                           {"bos_token", nullptr},
                           {"clean_up_tokenization_spaces", false},
                           {"model_max_length", 1 << 30}};
  if (!files.chat_template.empty()) config["chat_template"] = files.chat_template;
  for (const auto& [path, j] :
       {std::pair{dir + "/tokenizer.json", tokenizer}, {dir + "/tokenizer_config.json", config}}) {
    std::ofstream out(path, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return absl::UnavailableError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::tokenizers
