#include "models/chat/jinja_lexer.hpp"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/utf8.hpp"

namespace troupe::jinja {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int lines_in(const std::string& s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to && i < s.size(); ++i)
    n += s[i] == '\n';
  return n;
}

absl::Status error_at(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// Python string escapes inside a quoted literal.
bool unescape(const std::string& body, std::string& out) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '0':
        out.push_back('\0');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\\':
      case '\'':
      case '"':
        out.push_back(c);
        break;
      case '\n':
        break;  // a line continuation
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (size_t d = 1; d <= digits; ++d) {
          if (i + d >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + d])))
            return false;
          cp = cp * 16 + static_cast<char32_t>(std::stoi(std::string(1, body[i + d]), nullptr, 16));
        }
        i += digits;
        tokenizers::append_utf8(out, cp);
        break;
      }
      default:  // an unknown escape keeps its backslash, as in Python
        out.push_back('\\');
        out.push_back(c);
    }
  }
  return true;
}

// The operators, longest first.
const char* const operators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                 "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                 "]",  "{",  "}",  ",",  ".",  ":",  "|"};

}  // namespace

absl::StatusOr<std::vector<token>> lex(const std::string& src) {
  std::vector<token> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;  // the last tag ended a line (or nothing came before)
  bool strip_next = false;    // the last tag ended in '-': strip the whitespace that follows
  while (pos < src.size() || strip_next) {
    // The text up to the next tag.
    size_t tag = src.find('{', pos);
    while (tag != std::string::npos && tag + 1 < src.size() && src[tag + 1] != '{' &&
           src[tag + 1] != '%' && src[tag + 1] != '#') {
      tag = src.find('{', tag + 1);
    }
    if (tag != std::string::npos && tag + 1 >= src.size()) tag = std::string::npos;
    std::string text = src.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
    const int text_line = line;
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k]))
        ++k;
      text.erase(0, k);
      strip_next = false;
    }
    if (tag == std::string::npos) {
      if (!text.empty()) out.push_back({token::kind::text, text, text_line});
      break;
    }
    const char type = src[tag + 1];
    const char sign = tag + 2 < src.size() ? src[tag + 2] : '\0';
    if (sign == '-') {
      while (!text.empty() && is_space(text.back()))
        text.pop_back();
    } else if (sign != '+' && type != '{') {  // lstrip_blocks: a block or comment tag
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (l_pos > 0 || line_starting) {
        bool blank = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k)
          blank = blank && is_space(text[k]);
        if (blank) text.erase(l_pos);
      }
    }
    if (!text.empty()) out.push_back({token::kind::text, text, text_line});
    line += lines_in(src, pos, tag);
    size_t p = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);

    if (type == '#') {  // a comment
      const size_t end = src.find("#}", p);
      if (end == std::string::npos) return error_at(line, "a comment '{#' is never closed");
      line += lines_in(src, tag, end);
      const bool minus = end > p && src[end - 1] == '-';
      pos = end + 2;
      if (minus) {
        strip_next = true;
      } else if (pos < src.size() && src[pos] == '\n') {  // trim_blocks
        ++pos;
        ++line;
      }
      line_starting = pos > 0 && src[pos - 1] == '\n';
      continue;
    }

    const bool block = type == '%';
    const char* close = block ? "%}" : "}}";
    out.push_back({block ? token::kind::block_begin : token::kind::var_begin, "", line});
    const size_t first_token = out.size();
    // The expression tokens up to the closing delimiter.
    bool closed = false;
    while (p < src.size()) {
      const char c = src[p];
      if (is_space(c)) {
        line += c == '\n';
        ++p;
        continue;
      }
      // The closing delimiter, with its '-' or '+'.
      if ((c == '-' || c == '+') && src.compare(p + 1, 2, close) == 0) {
        strip_next = c == '-';
        p += 3;
        closed = true;
      } else if (src.compare(p, 2, close) == 0) {
        p += 2;
        closed = true;
      }
      if (closed) {
        if (block && !strip_next && p < src.size() && src[p] == '\n') {  // trim_blocks
          ++p;
          ++line;
        }
        break;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src.size() &&
               (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_'))
          ++e;
        out.push_back({token::kind::name, src.substr(p, e - p), line});
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = p;
        bool floating = false;
        while (e < src.size() &&
               (std::isdigit(static_cast<unsigned char>(src[e])) || src[e] == '_'))
          ++e;
        if (e + 1 < src.size() && src[e] == '.' &&
            std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
          floating = true;
          ++e;
          while (e < src.size() && std::isdigit(static_cast<unsigned char>(src[e])))
            ++e;
        }
        if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
          size_t x = e + 1;
          if (x < src.size() && (src[x] == '+' || src[x] == '-')) ++x;
          if (x < src.size() && std::isdigit(static_cast<unsigned char>(src[x]))) {
            floating = true;
            e = x;
            while (e < src.size() && std::isdigit(static_cast<unsigned char>(src[e])))
              ++e;
          }
        }
        std::string digits;
        for (size_t k = p; k < e; ++k)
          if (src[k] != '_') digits.push_back(src[k]);
        out.push_back({floating ? token::kind::floating : token::kind::integer, digits, line});
        p = e;
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src.size() && src[e] != c) {
          if (src[e] == '\\') ++e;
          ++e;
        }
        if (e >= src.size()) return error_at(line, "a string is never closed");
        std::string value;
        if (!unescape(src.substr(p + 1, e - p - 1), value)) {
          return error_at(line, "a string has a broken \\x, \\u or \\U escape");
        }
        out.push_back({token::kind::string, value, line});
        line += lines_in(src, p, e);
        p = e + 1;
      } else {
        bool matched = false;
        for (const char* op : operators) {
          const size_t n = std::char_traits<char>::length(op);
          if (src.compare(p, n, op) == 0) {
            out.push_back({token::kind::op, op, line});
            p += n;
            matched = true;
            break;
          }
        }
        if (!matched) {
          return error_at(line, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        }
      }
    }
    if (!closed) {
      return error_at(line, absl::StrCat("a tag '", block ? "{%" : "{{", "' is never closed"));
    }
    out.push_back({block ? token::kind::block_end : token::kind::var_end, "", line});
    // {% raw %}: everything up to {% endraw %} is text.
    if (block && out.size() == first_token + 2 && out[first_token].k == token::kind::name &&
        out[first_token].text == "raw") {
      out.resize(first_token - 1);
      size_t end = p;
      size_t close_at = std::string::npos, after = std::string::npos;
      while ((end = src.find("{%", end)) != std::string::npos) {
        size_t q = end + 2;
        if (q < src.size() && (src[q] == '-' || src[q] == '+')) ++q;
        while (q < src.size() && is_space(src[q]))
          ++q;
        if (src.compare(q, 6, "endraw") == 0) {
          q += 6;
          while (q < src.size() && is_space(src[q]))
            ++q;
          if (q < src.size() && src[q] == '-') ++q;
          if (src.compare(q, 2, "%}") == 0) {
            close_at = end;
            after = q + 2;
            break;
          }
        }
        end += 2;
      }
      if (close_at == std::string::npos) return error_at(line, "'raw' is never closed by 'endraw'");
      std::string raw = src.substr(p, close_at - p);
      if (src[close_at + 2] == '-') {
        while (!raw.empty() && is_space(raw.back()))
          raw.pop_back();
      }
      if (strip_next) {
        size_t k = 0;
        while (k < raw.size() && is_space(raw[k]))
          ++k;
        raw.erase(0, k);
        strip_next = false;
      }
      if (!raw.empty()) out.push_back({token::kind::text, raw, line});
      line += lines_in(src, p, after);
      p = after;
      strip_next = src[after - 3] == '-';
      if (!strip_next && p < src.size() && src[p] == '\n') {
        ++p;
        ++line;
      }
    }
    pos = p;
    line_starting = pos > 0 && src[pos - 1] == '\n';
  }
  return out;
}

}  // namespace troupe::jinja
