#pragma once

// GPT-2's byte-level alphabet: each of the 256 bytes as a printable character (the printable
// Latin-1 bytes as themselves, the others from U+0100 on), so that a vocabulary of strings can
// hold any byte sequence. Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, DeepSeek) are
// written in it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace troupe::tokenizers {

/// The character that stands for byte `b`, in UTF-8.
[[nodiscard]] absl::string_view byte_level_char(uint8_t b);

/// The bytes a byte-level string stands for; nullopt where a character of `s` is not in the
/// alphabet (a token that is not byte-level, such as an added token written as itself).
[[nodiscard]] std::optional<std::string> byte_level_bytes(absl::string_view s);

}  // namespace troupe::tokenizers
