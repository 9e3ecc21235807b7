#include "models/gguf/gguf_vocab.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/tokenizer/byte_level.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models::gguf {
namespace {

using json = nlohmann::json;

// The pre-tokenizer regexes llama.cpp knows, as tokenizer.json writes them, by the name GGUF
// gives them (llama-vocab.cpp's pre types).
struct known_pre_tokenizer {
  const char* name;
  const char* regex;
  const char* models;
};
constexpr known_pre_tokenizer known_pre_tokenizers[] = {
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "Llama 3, and troupe tokenizer train"},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "Qwen 2 and 3"},
};

absl::StatusOr<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded())
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not JSON"));
  return j;
}

// llama.cpp's name for a tokenizer.json's pre_tokenizer: a Split on a regex it knows followed by
// a ByteLevel without its own regex, or GPT-2's ByteLevel with its regex.
absl::StatusOr<std::string> pre_tokenizer_name(const json& pre, const std::string& where) {
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const json& step : pre["pretokenizers"])
      steps.push_back(step);
  } else if (pre.is_object()) {
    steps.push_back(pre);
  }
  const auto is_byte_level = [](const json& step, bool own_regex) {
    return step.is_object() && step.value("type", "") == "ByteLevel" &&
           step.value("use_regex", true) == own_regex;
  };
  if (steps.size() == 1 && is_byte_level(steps[0], true)) return std::string("gpt-2");
  std::string found = "its pre_tokenizer";
  if (steps.size() == 2 && is_byte_level(steps[1], false) &&
      steps[0].value("type", "") == "Split" && steps[0].contains("pattern") &&
      steps[0]["pattern"].contains("Regex")) {
    const std::string regex = steps[0]["pattern"]["Regex"].get<std::string>();
    for (const known_pre_tokenizer& known : known_pre_tokenizers) {
      if (regex == known.regex) return std::string(known.name);
    }
    found = absl::StrCat("its pre_tokenizer's Split regex '", regex, "'");
  }
  std::vector<std::string> names{"gpt-2 (GPT-2's ByteLevel regex)"};
  for (const known_pre_tokenizer& known : known_pre_tokenizers)
    names.push_back(absl::StrCat(known.name, " (", known.models, ")"));
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": pre_tokenizer: ", found,
      " is not one llama.cpp knows by name, so a GGUF could not say how to split text; troupe "
      "exports the byte-level pre-tokenizers ",
      absl::StrJoin(names, ", ")));
}

// The chat template a tokenizer directory ships: chat_template.jinja, else
// tokenizer_config.json's chat_template (a text, or the "default" of a list of named ones).
std::string chat_template_of(const std::filesystem::path& dir, const json& config) {
  if (std::ifstream in(dir / "chat_template.jinja"); in) {
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  const json t = config.value("chat_template", json());
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t) {
      if (named.value("name", "") == "default") return named.value("template", "");
    }
  }
  return "";
}

// A special token of tokenizer_config.json ("eos_token": "<|end|>" or {"content": ...}).
std::optional<int32_t> special_token_id(const json& config, const char* key,
                                        const tokenizers::tokenizer& tokenizer) {
  json token = config.value(key, json());
  if (token.is_object()) token = token.value("content", json());
  if (!token.is_string()) return std::nullopt;
  return tokenizer.token_to_id(token.get<std::string>());
}

}  // namespace

absl::StatusOr<gguf_vocab> vocab_of_tokenizer_dir(const std::string& dir, int vocab_size,
                                                  std::optional<int32_t> bos,
                                                  std::optional<int32_t> eos) {
  namespace fs = std::filesystem;
  const fs::path tokenizer_path = fs::path(dir) / "tokenizer.json";
  const std::string where = tokenizer_path.string();
  TROUPE_ASSIGN_OR_RETURN(const auto tokenizer, tokenizers::tokenizer::load(where));
  TROUPE_ASSIGN_OR_RETURN(const json file, read_json(tokenizer_path));
  json config = json::object();
  if (fs::exists(fs::path(dir) / "tokenizer_config.json")) {
    TROUPE_ASSIGN_OR_RETURN(config, read_json(fs::path(dir) / "tokenizer_config.json"));
  }

  const json& model = file["model"];
  const json& decoder = file.value("decoder", json());
  if (model.value("type", "BPE") != "BPE" || model.value("byte_fallback", false) ||
      !decoder.is_object() || decoder.value("type", "") != "ByteLevel") {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": model: not a byte-level BPE (its decoder is not ByteLevel); troupe exports GGUF "
        "vocabularies of GPT-2, Llama 3 and Qwen 2/3's kind, not SentencePiece-style ones "
        "(Llama 2, Mistral)"));
  }
  if (tokenizer->vocab_size() > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", tokenizer->vocab_size(),
                                                   " ids, more than the model's vocab of ",
                                                   vocab_size, " (config.json's vocab_size)"));
  }
  gguf_vocab out;
  TROUPE_ASSIGN_OR_RETURN(out.pre, pre_tokenizer_name(file.value("pre_tokenizer", json()), where));
  out.tokens.resize(vocab_size);
  out.token_types.assign(vocab_size, static_cast<int32_t>(token_type::unused));
  std::vector<bool> seen(vocab_size, false);
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int64_t id = id_json.get<int64_t>();
    out.tokens[id] = token;
    out.token_types[id] = static_cast<int32_t>(token_type::normal);
    seen[id] = true;
  }
  for (const json& added : file.value("added_tokens", json::array())) {
    const int64_t id = added["id"].get<int64_t>();
    out.tokens[id] = added["content"].get<std::string>();
    out.token_types[id] = static_cast<int32_t>(
        added.value("special", false) ? token_type::control : token_type::user_defined);
    seen[id] = true;
  }
  for (int id = 0; id < vocab_size; ++id) {
    if (!seen[id]) out.tokens[id] = absl::StrCat("[PAD", id, "]");
  }
  for (const json& merge : model["merges"]) {
    out.merges.push_back(merge.is_string() ? merge.get<std::string>()
                                           : absl::StrCat(merge[0].get<std::string>(), " ",
                                                          merge[1].get<std::string>()));
  }
  out.bos = bos ? bos : special_token_id(config, "bos_token", *tokenizer);
  out.eos = eos ? eos : special_token_id(config, "eos_token", *tokenizer);
  out.add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
                    ? config["add_bos_token"].get<bool>()
                    : !tokenizer->encode("", /*add_special_tokens=*/true).empty();
  out.chat_template = chat_template_of(dir, config);
  return out;
}

gguf_vocab byte_vocab(int vocab_size) {
  gguf_vocab out;
  out.pre = "gpt-2";  // with no merges every byte stays a token whatever the split
  out.add_bos = false;
  for (int id = 0; id < vocab_size; ++id) {
    if (id < 256) {
      out.tokens.emplace_back(tokenizers::byte_level_char(static_cast<uint8_t>(id)));
      out.token_types.push_back(static_cast<int32_t>(token_type::normal));
    } else {
      out.tokens.push_back(absl::StrCat("[PAD", id, "]"));
      out.token_types.push_back(static_cast<int32_t>(token_type::unused));
    }
  }
  return out;
}

void set_vocab(gguf_writer& writer, const gguf_vocab& vocab) {
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", vocab.pre);
  writer.set_strings("tokenizer.ggml.tokens", vocab.tokens);
  writer.set_i32s("tokenizer.ggml.token_type", vocab.token_types);
  writer.set_strings("tokenizer.ggml.merges", vocab.merges);
  if (vocab.bos) writer.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*vocab.bos));
  if (vocab.eos) writer.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*vocab.eos));
  if (vocab.add_bos) writer.set_bool("tokenizer.ggml.add_bos_token", *vocab.add_bos);
  if (!vocab.chat_template.empty())
    writer.set_string("tokenizer.chat_template", vocab.chat_template);
}

}  // namespace troupe::models::gguf
