#include "tests/models/tokenizer/tokenizer_corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "models/tokenizer/utf8.hpp"

namespace troupe::tokenizers::testing {

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every fortune, read as the text source reads the fortunes package.
std::vector<std::string> all_fortunes() {
  std::vector<std::string> out;
  const auto files = actors::text_files("/usr/share/games/fortunes");
  if (!files.ok()) return out;
  for (const auto& f : *files)
    actors::split_records(read_file(f), "%", out);
  return out;
}

// Runs of 1 to 12 lines of the repository's source files.
std::vector<std::string> code_chunks(const std::string& source_dir, std::mt19937& rng, int count) {
  std::vector<fs::path> files;
  for (const char* sub : {"models", "kernels", "runtime", "scripts", "bench"}) {
    if (!fs::is_directory(fs::path(source_dir) / sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(source_dir) / sub)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp" || ext == ".cu" || ext == ".py" ||
                                  ext == ".sh" || ext == ".cmake")) {
        files.push_back(e.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  if (files.empty()) return out;
  std::vector<std::vector<std::string>> lines(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    std::istringstream in(read_file(files[i]));
    for (std::string l; std::getline(in, l);)
      lines[i].push_back(l);
  }
  while (static_cast<int>(out.size()) < count) {
    const auto& f = lines[rng() % lines.size()];
    if (f.empty()) continue;
    const size_t first = rng() % f.size(), n = 1 + rng() % 12;
    std::string chunk;
    for (size_t i = first; i < std::min(f.size(), first + n); ++i)
      chunk += f[i] + "\n";
    out.push_back(chunk);
  }
  return out;
}

std::string code_point(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

char32_t in_range(std::mt19937& rng, char32_t first, char32_t last) {
  return first + static_cast<char32_t>(rng() % (last - first + 1));
}

std::string pick(std::mt19937& rng, const std::vector<std::string>& from) {
  return from[rng() % from.size()];
}

const std::vector<std::string> words = {"the",   "model", "token",     "Hello", "world", "it's",
                                        "we'll", "DON'T", "naïve",     "café",  "über",  "x",
                                        "I",     "a",     "tokenizer", "GPU",   "don't", "You're"};

std::string cjk_text(std::mt19937& rng) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 30);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2:
        s += code_point(in_range(rng, 0x4E00, 0x9FA5));
        break;  // Han
      case 3:
        s += code_point(in_range(rng, 0x3041, 0x3096));
        break;  // Hiragana
      case 4:
        s += code_point(in_range(rng, 0x30A1, 0x30FA));
        break;  // Katakana
      case 5:
        s += code_point(in_range(rng, 0xAC00, 0xD7A3));
        break;  // Hangul
      case 6:
        s += pick(rng, {"。", "、", "，", "！", "？", "「", "」", "（", "）", "　", " "});
        break;
      default:
        s += pick(rng, words) + (rng() % 2 ? " " : "");
        break;
    }
  }
  return s;
}

std::string emoji_text(std::mt19937& rng) {
  static const std::vector<std::string> sequences = {
      "\U0001F468\u200D\U0001F469\u200D\U0001F467",  // a family (ZWJ)
      "\U0001F44D\U0001F3FD",                        // a skin tone
      "\U0001F1EB\U0001F1F7",                        // a flag
      "\u2764\uFE0F",                                // a variation selector
      "\U0001F3F3\uFE0F\u200D\U0001F308",
      "1\uFE0F\u20E3",  // a keycap
  };
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 5) {
      case 0:
        s += code_point(in_range(rng, 0x1F600, 0x1F64F));
        break;
      case 1:
        s += code_point(in_range(rng, 0x1F300, 0x1F5FF));
        break;
      case 2:
        s += pick(rng, sequences);
        break;
      case 3:
        s += " ";
        break;
      default:
        s += pick(rng, words);
        break;
    }
  }
  return s;
}

std::string combining_text(std::mt19937& rng) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 20);
  for (int i = 0; i < n; ++i) {
    s += static_cast<char>('a' + rng() % 26);
    // Decomposed accents (NFC composes some), several stacked at times.
    const int marks = static_cast<int>(rng() % 3);
    for (int m = 0; m < marks; ++m)
      s += code_point(in_range(rng, 0x0300, 0x036F));
    if (rng() % 5 == 0) s += code_point(in_range(rng, 0x00C0, 0x00FF));  // precomposed
    if (rng() % 6 == 0) s += " ";
    if (rng() % 15 == 0) s += "\u0915\u094D\u0937";  // Devanagari with a virama
  }
  return s;
}

std::string whitespace_text(std::mt19937& rng) {
  static const std::vector<std::string> spaces = {
      " ",      "  ",     "   ",    "\t",     "\n", "\n\n", "\r\n",     "\r",   " \n ",    "\u00A0",
      "\u3000", "\u2028", "\u0085", "\u2003", "\v", "\f",   "        ", "\t\t", "\n\n\n\n"};
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    const int k = static_cast<int>(rng() % 3);
    for (int j = 0; j <= k; ++j)
      s += pick(rng, spaces);
    if (rng() % 3) s += pick(rng, words);
  }
  return s;
}

std::string invalid_utf8_text(std::mt19937& rng) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 10);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 4) {
      case 0: {  // random bytes
        const int k = 1 + static_cast<int>(rng() % 6);
        for (int j = 0; j < k; ++j)
          s += static_cast<char>(rng() % 256);
        break;
      }
      case 1: {  // a character cut short
        const std::string c = code_point(in_range(rng, 0x0800, 0xFFFD));
        s += c.substr(0, 1 + rng() % (c.size() - 1));
        break;
      }
      case 2:
        s += pick(rng, {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE0\x80\xAF", "\xFF\xFE",
                        "\x80"});
        break;
      default:
        absl::StrAppend(&s, " ", pick(rng, words));
        break;
    }
  }
  return s;
}

std::string special_token_text(std::mt19937& rng, const std::vector<std::string>& special) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) {
    const std::string t = special.empty() ? "<s>" : pick(rng, special);
    switch (rng() % 6) {
      case 0:
        s += t;
        break;
      case 1:
        s += t + t;
        break;  // adjacent
      case 2:
        s += pick(rng, words) + t + pick(rng, words);
        break;  // inside a word
      case 3:
        s += " " + t + " ";
        break;
      case 4:
        s += t.substr(0, t.size() / 2 + 1);
        break;  // a part of one
      default:
        s += pick(rng, words) + (rng() % 2 ? "\n" : " ");
        break;
    }
  }
  return s;
}

std::string mixed_text(std::mt19937& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> scripts = {
      {0x0410, 0x044F},  // Cyrillic
      {0x0391, 0x03C9},  // Greek
      {0x0627, 0x064A},  // Arabic
      {0x0E01, 0x0E30},  // Thai
      {0x0905, 0x0939},  // Devanagari
      {0x05D0, 0x05EA},  // Hebrew
  };
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 10);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 4) {
      case 0: {
        const auto [a, b] = scripts[rng() % scripts.size()];
        const int k = 1 + static_cast<int>(rng() % 8);
        for (int j = 0; j < k; ++j)
          s += code_point(in_range(rng, a, b));
        break;
      }
      case 1:
        s += std::to_string(rng() % (rng() % 2 ? 100 : 100000000));
        break;
      case 2:
        s += pick(rng, {"3.14159", "1,000,000", "٣٤٥", "²³", "½", "Ⅻ", "0x1F", "-42", "1e-9"});
        break;
      default:
        s += pick(rng, words);
        break;
    }
    s += pick(rng, {" ", "", ", ", ". ", "'s ", "'ll ", "\n"});
  }
  return s;
}

}  // namespace

std::vector<std::string> tokenizer_corpus(const std::vector<std::string>& special,
                                          const std::string& source_dir, unsigned seed,
                                          corpus_sizes sizes) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  std::vector<std::string> fortunes = all_fortunes();
  std::shuffle(fortunes.begin(), fortunes.end(), rng);
  fortunes.resize(std::min<size_t>(fortunes.size(), sizes.fortunes));
  out.insert(out.end(), fortunes.begin(), fortunes.end());
  for (auto& c : code_chunks(source_dir, rng, sizes.code))
    out.push_back(std::move(c));
  auto add = [&](int count, auto make) {
    for (int i = 0; i < count; ++i)
      out.push_back(make());
  };
  add(sizes.cjk, [&] { return cjk_text(rng); });
  add(sizes.emoji, [&] { return emoji_text(rng); });
  add(sizes.combining, [&] { return combining_text(rng); });
  add(sizes.whitespace, [&] { return whitespace_text(rng); });
  add(sizes.invalid_utf8, [&] { return invalid_utf8_text(rng); });
  add(sizes.special_tokens, [&] { return special_token_text(rng, special); });
  add(sizes.mixed, [&] { return mixed_text(rng); });
  out.push_back("");
  return out;
}

}  // namespace troupe::tokenizers::testing
