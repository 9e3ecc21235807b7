#include "models/tokenizer/decoder.hpp"

#include <optional>

#include "absl/strings/str_join.h"
#include "models/tokenizer/byte_level.hpp"
#include "models/tokenizer/utf8.hpp"
#include "runtime/base/overloaded.hpp"

namespace troupe::tokenizers {

namespace {

std::vector<std::string> byte_level(std::vector<std::string> tokens) {
  std::string bytes;
  for (const auto& t : tokens) {
    // A token outside the alphabet (an added token spelt as itself) stands for its own bytes.
    if (auto b = byte_level_bytes(t)) {
      bytes += *b;
    } else {
      bytes += t;
    }
  }
  return {to_valid_utf8(bytes)};
}

std::optional<uint8_t> fallback_byte(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t.back() != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  auto flush = [&] {
    if (bytes.empty()) return;
    if (is_valid_utf8(bytes)) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < bytes.size(); ++i)
        out.emplace_back(replacement_character);
    }
    bytes.clear();
  };
  for (auto& t : tokens) {
    if (const auto b = fallback_byte(t)) {
      bytes.push_back(static_cast<char>(*b));
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  return out;
}

// Removes up to `count` copies of `c` from the front (or back) of a token, by characters.
std::vector<std::string> strip(std::vector<std::string> tokens, const strip_decode& s) {
  for (auto& t : tokens) {
    size_t begin = 0, end = t.size();
    for (int i = 0; i < s.start && t.compare(begin, s.content.size(), s.content) == 0 &&
                    begin + s.content.size() <= end;
         ++i) {
      begin += s.content.size();
    }
    for (int i = 0; i < s.stop && end >= begin + s.content.size() &&
                    t.compare(end - s.content.size(), s.content.size(), s.content) == 0;
         ++i) {
      end -= s.content.size();
    }
    t = t.substr(begin, end - begin);
  }
  return tokens;
}

std::vector<std::string> metaspace(std::vector<std::string> tokens, const metaspace_decode& m) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string out;
    const std::string& t = tokens[i];
    for (size_t at = 0; at < t.size();) {
      if (t.compare(at, m.replacement.size(), m.replacement) == 0) {
        if (!(i == 0 && m.prepends)) out.push_back(' ');
        at += m.replacement.size();
      } else {
        out.push_back(t[at++]);
      }
    }
    tokens[i] = std::move(out);
  }
  return tokens;
}

}  // namespace

std::string decoder::apply(std::vector<std::string> tokens) const {
  if (steps_.empty()) return absl::StrJoin(tokens, " ");
  for (const auto& step : steps_) {
    tokens = std::visit(
        overloaded{
            [&](const byte_level_decode&) { return byte_level(std::move(tokens)); },
            [&](const byte_fallback_decode&) { return byte_fallback(std::move(tokens)); },
            [&](const fuse_decode&) { return std::vector<std::string>{absl::StrJoin(tokens, "")}; },
            [&](const strip_decode& s) { return strip(std::move(tokens), s); },
            [&](const replace_decode& r) {
              for (auto& t : tokens)
                t = r.pattern.replace_all(t, r.content);
              return std::move(tokens);
            },
            [&](const metaspace_decode& m) { return metaspace(std::move(tokens), m); },
        },
        step);
  }
  return absl::StrJoin(tokens, "");
}

std::string decoder::token_bytes(std::string token) const {
  bool fused = false;  // after a Fuse, the steps see the whole text, not this token
  for (const auto& step : steps_) {
    std::visit(
        overloaded{
            [&](const byte_level_decode&) {
              if (auto b = byte_level_bytes(token)) token = *std::move(b);
            },
            [&](const byte_fallback_decode&) {
              if (const auto b = fallback_byte(token)) token = std::string(1, char(*b));
            },
            [&](const fuse_decode&) { fused = true; },
            [&](const strip_decode& strip_step) {
              if (!fused) token = strip({std::move(token)}, strip_step)[0];
            },
            [&](const replace_decode& r) { token = r.pattern.replace_all(token, r.content); },
            [&](const metaspace_decode& m) {
              token = metaspace({std::move(token)}, {m.replacement, false})[0];
            },
        },
        step);
  }
  return token;
}

}  // namespace troupe::tokenizers
