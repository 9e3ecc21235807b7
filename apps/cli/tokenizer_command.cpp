// `troupe tokenizer train`: a real vocabulary for pretraining from scratch.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "apps/cli/commands.hpp"
#include "models/tokenizer/bpe_trainer.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace troupe::cli {

int tokenizer_train_command(const tokenizer_train_args& args) {
  const char* name = "troupe tokenizer train";
  auto files = actors::text_files(args.corpus);
  if (!files.ok()) return fail(name, exit_usage_error, std::string(files.status().message()));
  std::vector<std::string> texts;
  for (const auto& path : *files) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) return fail(name, exit_runtime_failure, absl::StrCat(path, ": cannot read"));
    actors::split_records(text.str(), "%", texts);
  }
  const auto start = std::chrono::steady_clock::now();
  tokenizers::bpe_training_options options;
  options.vocab_size = args.vocab_size;
  options.min_frequency = args.min_frequency;
  options.special_tokens = args.special_tokens;
  auto trained = tokenizers::train_byte_level_bpe(texts, options);
  if (!trained.ok()) return fail(name, exit_usage_error, std::string(trained.status().message()));
  if (absl::Status s = tokenizers::write_trained_tokenizer(args.out, *trained, options); !s.ok())
    return fail(name, exit_runtime_failure, std::string(s.message()));
  const std::string tokenizer_path = args.out + "/tokenizer.json";
  // What was written must load and encode: read it back as any user would.
  auto loaded = tokenizers::tokenizer::load(tokenizer_path);
  if (!loaded.ok()) return fail(name, exit_runtime_failure, std::string(loaded.status().message()));
  size_t bytes = 0, tokens = 0;
  for (size_t i = 0; i < texts.size() && i < 2000; ++i) {
    bytes += texts[i].size();
    tokens += (*loaded)->encode(texts[i]).size();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s\n", nlohmann::json{{"tokenizer", tokenizer_path},
                                     {"vocab_size", (*loaded)->vocab_size()},
                                     {"records", texts.size()},
                                     {"bytes_per_token", tokens ? double(bytes) / tokens : 0.0},
                                     {"seconds", seconds}}
                          .dump()
                          .c_str());
  return exit_ok;
}

}  // namespace troupe::cli
