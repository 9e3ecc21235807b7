// Speculative decoding by prompt lookup on an input-grounded task, in one run: a byte-level Llama
// trained here (by `troupe launch`, about six minutes on two cores) to copy a text it is given
// (fortunes, each followed by "\n=\n" and itself), then asked to copy held-out texts (paragraphs
// of the GPL, which it never saw), greedily, as an edit or a quote of its input is written.
// The engine decodes with serve.engine.speculative_config's prompt lookup and without (the
// baseline), on the same weights and prompts. Lines:
//   decode_tokens_per_s   one stream (each text alone, its first token's step excluded), and
//                         16 streams at once (aggregate output tokens over the whole run);
//                         with the drafts' acceptance rate, the tokens a step gains, whether
//                         the greedy outputs are the baseline's (they must be), and how many
//                         outputs are exact copies (the model's skill, not the engine's).
//
//   speculative_bench [--run-dir DIR] [--steps 3000] [--tokens 6] [--lookup-min 2]
//                     [--lookup-max 4] [--repeats 3]
// A --run-dir that already holds the trained run is reused.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "actors/inference_engine.hpp"
#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "kernels/sampling.hpp"
#include "models/decoder/decoder_source.hpp"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using troupe::actors::generation_request;
using troupe::actors::inference_engine;

// The model train() writes into the config, as the pretrain app reads it.
troupe::config::model_spec copy_model() {
  troupe::config::model_spec m;
  m.arch = "llama";
  m.vocab = 256, m.ctx = 256, m.layers = 2, m.dim = 128, m.heads = 4, m.kv_heads = 2;
  return m;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whitespace runs as one space, trimmed.
std::string collapse(const std::string& s) {
  std::string out = std::regex_replace(s, std::regex("\\s+"), " ");
  const size_t a = out.find_first_not_of(' '), b = out.find_last_not_of(' ');
  return a == std::string::npos ? "" : out.substr(a, b - a + 1);
}

// At most `n` bytes of `s`, cut at a space.
std::string cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  const size_t at = s.rfind(' ', n);
  return s.substr(0, at == std::string::npos ? n : at);
}

// Fisher-Yates by the seeded uniform draws of (seed, i).
template <class T>
void shuffle(std::vector<T>& v, uint64_t seed) {
  for (size_t i = v.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(troupe::kernels::seeded_uniform(seed, i) * i);
    std::swap(v[i - 1], v[std::min(j, i - 1)]);
  }
}

// The training text: each fortune of 20 bytes or more (ASCII, cut to 100), then "\n=\n" and the
// same again, in a seeded order; two in three with their words shuffled, which can only be
// copied, not recalled.
void write_copy_corpus(const fs::path& out) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator("/usr/share/games/fortunes")) {
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> items;
  for (const auto& f : files) {
    std::stringstream all(read_text(f));
    std::string item, line;
    auto flush = [&] {
      const std::string t = cut(collapse(item), 100);
      item.clear();
      const bool ascii = std::all_of(t.begin(), t.end(), [](char c) { return c > 0; });
      if (t.size() >= 20 && ascii) items.push_back(t);
    };
    while (std::getline(all, line)) {
      if (line == "%") {
        flush();
      } else {
        item += line + "\n";
      }
    }
    flush();
  }
  shuffle(items, 1);
  std::ofstream text(out);
  for (size_t n = 0; n < items.size(); ++n) {
    std::string t = items[n];
    if (n % 3 != 0) {
      std::vector<std::string> words;
      std::stringstream ws(t);
      for (std::string w; ws >> w;)
        words.push_back(w);
      shuffle(words, 1000 + n);
      t.clear();
      for (const auto& w : words)
        t += (t.empty() ? "" : " ") + w;
    }
    text << t << "\n=\n" << t << "\n\n";
  }
}

// Trains the copying model into run_dir/run unless it is there; false when training failed.
bool train(const fs::path& run_dir, int steps) {
  const fs::path run = run_dir / "run";
  if (fs::exists(run / "checkpoints")) {
    std::fprintf(stderr, "speculative_bench: reusing the model trained in %s\n", run.c_str());
    return true;
  }
  fs::create_directories(run_dir);
  write_copy_corpus(run_dir / "copy.txt");
  std::ofstream(run_dir / "train.yaml")
      << "app: pretrain\ncluster: {local_workers: 2}\n"
      << "model: {arch: llama, vocab: 256, ctx: 256, layers: 2, dim: 128, heads: 4, kv_heads: 2}\n"
      << "roles:\n  trainer: {kind: trainer, impl: gpt, elastic: {min: 1, max: 8}}\n"
      << "pretrain:\n  train: {steps: " << steps
      << ", batch: 16, lr: 4.0e-3, warmup: 30, min_lr_ratio: 0.1, weight_decay: 0.1, "
         "grad_clip: 1.0, seed: 1}\n"
      << "  data: {path: " << (run_dir / "copy.txt").string()
      << ", val_fraction: 0.05, eval_every: 500}\n"
      << "  checkpoint: {every_steps: " << steps << ", keep: 1}\n";
  std::fprintf(stderr, "speculative_bench: training the copying model (%d steps) in %s\n", steps,
               run.c_str());
  const std::string summary = troupe::bench::read_command(
      std::string(TROUPE_BINARY) + " launch " + (run_dir / "train.yaml").string() + " --run-dir " +
      run.string() + " 2>/dev/null");
  if (summary.find("\"succeeded\"") == std::string::npos) {
    std::fprintf(stderr, "speculative_bench: training failed: %s\n", summary.c_str());
    return false;
  }
  return true;
}

// 16 held-out texts of at most 100 bytes: the GPL's paragraphs.
std::vector<std::string> held_out_texts() {
  std::vector<std::string> texts;
  std::stringstream gpl(read_text("/usr/share/common-licenses/GPL-3"));
  std::string paragraph, line;
  while (std::getline(gpl, line) && texts.size() < 16) {
    if (!collapse(line).empty()) {
      paragraph += line + " ";
      continue;
    }
    const std::string t = cut(collapse(paragraph), 100);
    paragraph.clear();
    if (t.size() >= 60) texts.push_back(t);
  }
  return texts;
}

struct run_result {
  double tokens_per_s = 0;
  std::map<uint64_t, std::vector<int32_t>> outputs;
  inference_engine::speculation_counts speculation;
};

generation_request copy_request(uint64_t id, const std::string& text) {
  generation_request r;
  r.id = id;
  for (unsigned char c : text + "\n=\n")
    r.prompt.push_back(c);
  r.temperature = 0;
  r.max_tokens = static_cast<int>(text.size()) + 8;
  r.stop_token_ids = {'\n'};
  return r;
}

// Copies `texts` `streams` at a time (1: each alone, timed from its first token on; else all at
// once, timed whole).
run_result copy_texts(const troupe::models::decoder_layout& layout,
                      const std::vector<float>& params, const std::vector<std::string>& texts,
                      bool alone, troupe::actors::speculative_options speculative) {
  inference_engine::options o{.scheduler = {.ctx = 256,
                                            .max_batch_tokens = 256,
                                            .max_sequences = 32,
                                            .prefix_caching = false},
                              .kv_blocks = 300,
                              .block_size = 16};
  o.speculative = speculative;
  auto engine = inference_engine::create(layout, params.data(), o);
  if (!engine.ok()) {
    std::fprintf(stderr, "speculative_bench: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  run_result r;
  double seconds = 0;
  int64_t tokens = 0;
  auto run = [&](size_t first, size_t count) {
    for (size_t i = first; i < first + count; ++i)
      (void)(*engine)->add(copy_request(i, texts[i]));
    auto start = clock_type::now();
    bool timing = !alone;
    while (!(*engine)->idle()) {
      auto events = (*engine)->step();
      if (!events.ok()) std::exit(1);
      for (const auto& e : *events) {
        auto& out = r.outputs[e.id];
        if (alone && !timing && !e.tokens.empty()) {  // the prompt's step: not decode
          timing = true;
          start = clock_type::now();
          out.insert(out.end(), e.tokens.begin(), e.tokens.end());
          tokens -= static_cast<int64_t>(e.tokens.size());
        } else {
          out.insert(out.end(), e.tokens.begin(), e.tokens.end());
        }
        tokens += static_cast<int64_t>(e.tokens.size());
      }
    }
    seconds += std::chrono::duration<double>(clock_type::now() - start).count();
  };
  if (alone) {
    for (size_t i = 0; i < texts.size(); ++i)
      run(i, 1);
  } else {
    run(0, texts.size());
  }
  r.tokens_per_s = static_cast<double>(tokens) / seconds;
  r.speculation = (*engine)->speculation();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path run_dir = fs::temp_directory_path() / "troupe-speculative-bench";
  int steps = 3000, repeats = 3;
  troupe::actors::speculative_options spec{
      .num_speculative_tokens = 6, .prompt_lookup_min = 2, .prompt_lookup_max = 4};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--run-dir")
      run_dir = v, ++i;
    else if (a == "--steps")
      steps = std::atoi(v), ++i;
    else if (a == "--tokens")
      spec.num_speculative_tokens = std::atoi(v), ++i;
    else if (a == "--lookup-min")
      spec.prompt_lookup_min = std::atoi(v), ++i;
    else if (a == "--lookup-max")
      spec.prompt_lookup_max = std::atoi(v), ++i;
    else if (a == "--repeats")
      repeats = std::atoi(v), ++i;
    else
      return troupe::bench::unknown_argument("speculative_bench", a);
  }
  if (!train(run_dir, steps)) return 1;
  const auto config = troupe::models::decoder_config_of(copy_model());
  if (!config.ok()) return 1;
  const troupe::models::decoder_layout layout(*config, troupe::models::layer_range::all(*config));
  auto params =
      troupe::models::read_decoder_weights(layout, (run_dir / "run").string(), "--run-dir");
  if (!params.ok()) {
    std::fprintf(stderr, "speculative_bench: %s\n", std::string(params.status().message()).c_str());
    return 1;
  }
  const std::vector<std::string> texts = held_out_texts();
  for (const bool alone : {true, false}) {
    std::vector<double> ours, theirs;
    run_result last;
    bool identical = true;
    for (int rep = 0; rep < repeats; ++rep) {
      const run_result plain = copy_texts(layout, *params, texts, alone, {});
      last = copy_texts(layout, *params, texts, alone, spec);
      identical = identical && last.outputs == plain.outputs;
      theirs.push_back(plain.tokens_per_s);
      ours.push_back(last.tokens_per_s);
    }
    int copies = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto& out = last.outputs[i];
      copies += std::string(out.begin(), out.end()) == texts[i];
    }
    const auto& s = last.speculation;
    troupe::bench::report(
        "speculative_bench", "decode_tokens_per_s", ours, "tokens/s", "no speculation", theirs,
        troupe::bench::better::higher,
        {{"streams", alone ? 1 : static_cast<int>(texts.size())},
         {"num_speculative_tokens", spec.num_speculative_tokens},
         {"prompt_lookup", {spec.prompt_lookup_min, spec.prompt_lookup_max}},
         {"acceptance_rate", s.draft_tokens ? double(s.accepted_tokens) / s.draft_tokens : 0.0},
         {"tokens_per_step_with_drafts",
          s.drafts ? 1.0 + double(s.accepted_tokens) / s.drafts : 0.0},
         {"greedy_output_identical", identical},
         {"exact_copies", copies},
         {"texts", texts.size()}});
  }
  return 0;
}
