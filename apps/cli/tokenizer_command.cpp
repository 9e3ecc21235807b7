// `troupe tokenizer train`: a real vocabulary for pretraining from scratch.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "apps/cli/commands.hpp"
#include "models/chat/hf_chat_template.hpp"
#include "models/tokenizer/bpe_trainer.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "runtime/base/status.hpp"

namespace troupe::cli {

namespace {

// The chat template of `path`, checked before any training: it parses, renders a conversation
// with and without the generation prompt, and ends the assistant's reply with `eos`, the token
// generation stops at.
absl::StatusOr<std::string> read_chat_template(const std::string& path, const std::string& eos) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("--chat-template ", path, ": cannot read"));
  const std::string where = absl::StrCat("--chat-template ", path);
  if (eos.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": a chat model needs an eos token to end its replies; name one with --special "
        "and --eos"));
  }
  TROUPE_ASSIGN_OR_RETURN(
      const chat::hf_chat_template chat,
      chat::hf_chat_template::from_source(text.str(), nlohmann::json{{"eos_token", eos}}, where));
  const nlohmann::json question = {{{"role", "user"}, {"content", "2+2?"}}};
  chat::chat_render_options generation;
  generation.add_generation_prompt = true;
  TROUPE_RETURN_IF_ERROR(chat.render(question, generation).status());
  nlohmann::json answered = question;
  answered.push_back({{"role", "assistant"}, {"content", "4"}});
  TROUPE_ASSIGN_OR_RETURN(const std::string rendered, chat.render(answered, {}));
  const size_t reply = rendered.rfind('4');
  if (reply == std::string::npos || rendered.find(eos, reply) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": an assistant's reply is not followed by the eos token '", eos,
        "', so generation would not stop where the template ends a turn (rendered: ", rendered,
        "); name the template's end-of-turn token with --eos (and --special)"));
  }
  return text.str();
}

}  // namespace

int tokenizer_train_command(const tokenizer_train_args& args) {
  const char* name = "troupe tokenizer train";
  tokenizers::bpe_training_options options;
  options.vocab_size = args.vocab_size;
  options.min_frequency = args.min_frequency;
  options.special_tokens = args.special_tokens;
  tokenizers::tokenizer_config_options config;
  config.eos_token = args.eos_token;
  if (absl::Status s = tokenizers::check_tokenizer_config(options, config); !s.ok())
    return fail(name, exit_usage_error, absl::StrCat("--eos: ", s.message()));
  if (!args.chat_template.empty()) {
    const std::string eos = args.eos_token.empty() && !args.special_tokens.empty()
                                ? args.special_tokens[0]
                                : args.eos_token;
    auto source = read_chat_template(args.chat_template, eos);
    if (!source.ok()) return fail(name, exit_usage_error, std::string(source.status().message()));
    config.chat_template = *std::move(source);
  }
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
  auto trained = tokenizers::train_byte_level_bpe(texts, options);
  if (!trained.ok()) return fail(name, exit_usage_error, std::string(trained.status().message()));
  if (absl::Status s = tokenizers::write_trained_tokenizer(args.out, *trained, options, config);
      !s.ok())
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
