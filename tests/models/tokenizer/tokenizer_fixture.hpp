#pragma once

// Small tokenizer.json files written in the tests, in HF's serialization, so that each feature
// is checked on a vocabulary whose ids can be worked out by hand.

#include <string>

#include "nlohmann/json.hpp"

namespace troupe::tokenizers::testing {

/// A byte-level BPE in the style of GPT-2 / Llama 3: the 256 byte tokens (ids 0..255 in byte
/// order), then the merges' results from id 256 on.
inline nlohmann::json byte_level_tokenizer(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  // The byte-level alphabet: printable Latin-1 as itself, the rest from U+0100 on.
  std::vector<std::string> chars(256);
  int next = 256;
  auto utf8 = [](int cp) {
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return s;
  };
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = utf8(printable ? b : next++);
    vocab[chars[b]] = b;
  }
  nlohmann::json merge_list = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back({a, b});
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
  }
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

/// A SentencePiece-style BPE in the style of Llama 2: spaces become U+2581 and one is
/// prepended, byte fallback for characters outside the vocabulary, <s> added by the template.
inline nlohmann::json sentencepiece_tokenizer() {
  const std::string sp = "\xE2\x96\x81";
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const std::string& t : std::vector<std::string>{
           sp, std::string("h"), std::string("i"), std::string("e"), std::string("l"),
           std::string("o"), sp + "h", std::string("hi"), sp + "hi", std::string("ll"),
           std::string("he"), std::string("llo"), std::string("hello"), sp + "hello"}) {
    vocab[t] = id++;
  }
  return {
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", sp}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", {sp + " h", "h i", sp + "h i", "l l", "h e", "ll o", "he llo", sp + " hello"}}}},
  };
}

}  // namespace troupe::tokenizers::testing
