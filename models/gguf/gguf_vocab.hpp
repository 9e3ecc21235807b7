#pragma once

// A model's vocabulary as GGUF carries it for llama.cpp (its tokenizer.ggml.* keys): the
// byte-level BPE of GPT-2, Llama 3 and Qwen 2/3 as model "gpt2" with every id's token, its type,
// the merges and the pre-tokenizer llama.cpp knows by name; or troupe's byte vocabulary (a
// token per byte, no merges).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gguf/gguf_writer.hpp"

namespace troupe::models::gguf {

/// llama.cpp's token types (llama.h's llama_token_type).
enum class token_type : int32_t { normal = 1, control = 3, user_defined = 4, unused = 5 };

struct gguf_vocab {
  std::string pre;                  ///< llama.cpp's pre-tokenizer: llama-bpe, qwen2 or gpt-2
  std::vector<std::string> tokens;  ///< every id's, in the byte-level alphabet
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  ///< "left right", highest priority first
  std::optional<int32_t> bos, eos;
  std::optional<bool> add_bos;
  std::string chat_template;  ///< empty: none
};

/// The vocabulary of the tokenizer in `dir` (tokenizer.json, and tokenizer_config.json or
/// chat_template.jinja for the chat template and special tokens) for a model of `vocab_size`
/// ids: ids the tokenizer lacks (a padded embedding) become unused "[PADn]" tokens, as
/// llama.cpp's converter writes them. Generation stops at `eos` (the model's first end token)
/// when given. Errors name the file and key: a vocabulary larger than the model's, a model
/// that is not byte-level BPE, or a pre-tokenizer llama.cpp has no name for.
[[nodiscard]] absl::StatusOr<gguf_vocab> vocab_of_tokenizer_dir(const std::string& dir,
                                                                int vocab_size,
                                                                std::optional<int32_t> bos,
                                                                std::optional<int32_t> eos);

/// troupe's byte vocabulary (models/decoder/byte_vocab.hpp): id b is byte b, ids from 256 unused.
[[nodiscard]] gguf_vocab byte_vocab(int vocab_size);

/// Sets the tokenizer.ggml.* keys (and tokenizer.chat_template) of `vocab`.
void set_vocab(gguf_writer& writer, const gguf_vocab& vocab);

}  // namespace troupe::models::gguf
