#include "runtime/metrics/exposition.hpp"

#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace troupe::metrics {
namespace {

bool name_start(char c) {
  return absl::ascii_isalpha(c) || c == '_' || c == ':';
}
bool name_char(char c) {
  return name_start(c) || absl::ascii_isdigit(c);
}

bool valid_metric_name(absl::string_view name) {
  if (name.empty() || !name_start(name[0])) return false;
  for (char c : name)
    if (!name_char(c)) return false;
  return true;
}

// One sample line taken apart. Label values keep their escapes, as they are written back as read.
struct sample_line {
  absl::string_view name;
  std::vector<std::pair<absl::string_view, absl::string_view>> labels;
  absl::string_view value;  // with the timestamp, if any, after it
  double number = 0;
};

// Parses `name{k="v",...} value [timestamp]`; nullopt if malformed.
std::optional<sample_line> parse_line(absl::string_view line) {
  sample_line out;
  size_t i = 0;
  if (line.empty() || !name_start(line[0])) return std::nullopt;
  while (i < line.size() && name_char(line[i]))
    ++i;
  out.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      if (i < line.size() && line[i] == '}') break;
      const size_t start = i;
      if (i >= line.size() || !name_start(line[i])) return std::nullopt;
      while (i < line.size() && name_char(line[i]))
        ++i;
      const absl::string_view key = line.substr(start, i - start);
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return std::nullopt;
      i += 2;
      const size_t value_start = i;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size() ||
              (line[i + 1] != '\\' && line[i + 1] != '"' && line[i + 1] != 'n')) {
            return std::nullopt;
          }
          ++i;
        }
        ++i;
      }
      if (i >= line.size()) return std::nullopt;
      out.labels.emplace_back(key, line.substr(value_start, i - value_start));
      ++i;
      if (i < line.size() && line[i] == ',')
        ++i;
      else if (i >= line.size() || line[i] != '}')
        return std::nullopt;
    }
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  out.value = absl::StripAsciiWhitespace(line.substr(i));
  std::vector<absl::string_view> fields = absl::StrSplit(out.value, ' ', absl::SkipEmpty());
  if (fields.empty() || fields.size() > 2) return std::nullopt;
  if (fields[0] == "+Inf" || fields[0] == "Inf") {
    out.number = HUGE_VAL;
  } else if (fields[0] == "-Inf") {
    out.number = -HUGE_VAL;
  } else if (fields[0] == "NaN") {
    out.number = std::nan("");
  } else if (!absl::SimpleAtod(fields[0], &out.number)) {
    return std::nullopt;
  }
  int64_t timestamp = 0;
  if (fields.size() == 2 && !absl::SimpleAtoi(fields[1], &timestamp)) return std::nullopt;
  return out;
}

// The family a sample named `name` belongs to, given the family whose comments came last.
std::string family_of(absl::string_view name, const std::string& current,
                      const std::string& current_type) {
  if (!current.empty() && name == current) return current;
  if (!current.empty() && absl::StartsWith(name, current)) {
    const absl::string_view suffix = name.substr(current.size());
    if ((current_type == "histogram" && suffix == "_bucket") ||
        ((current_type == "histogram" || current_type == "summary") &&
         (suffix == "_sum" || suffix == "_count"))) {
      return current;
    }
  }
  return std::string(name);
}

std::string unescape_label_value(absl::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      ++i;
      out += v[i] == 'n' ? '\n' : v[i];
      continue;
    }
    out += v[i];
  }
  return out;
}

// The sample written back with `identity` first; a label of the same name becomes exported_<name>.
std::string relabelled(const sample_line& s, const labels& identity) {
  std::string out(s.name);
  out += '{';
  bool first = true;
  const auto add = [&](absl::string_view k, absl::string_view escaped_value) {
    absl::StrAppend(&out, first ? "" : ",", k, "=\"", escaped_value, "\"");
    first = false;
  };
  for (const auto& [k, v] : identity)
    add(k, escape_label_value(v));
  for (const auto& [k, v] : s.labels) {
    bool clashes = false;
    for (const auto& id : identity)
      clashes = clashes || id.first == k;
    add(clashes ? absl::StrCat("exported_", k) : std::string(k), v);
  }
  absl::StrAppend(&out, "} ", s.value, "\n");
  return out;
}

}  // namespace

std::string escape_label_value(absl::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

merged_exposition merge_expositions(const std::vector<exposition_source>& sources) {
  struct family {
    std::string help;  // the whole "# HELP ..." line, or empty
    std::string type = "untyped";
    bool typed = false;
    std::string samples;
  };
  std::vector<std::string> order;
  std::map<std::string, family> families;
  merged_exposition out;
  const auto family_named = [&](const std::string& name) -> family& {
    auto [it, added] = families.try_emplace(name);
    if (added) order.push_back(name);
    return it->second;
  };
  for (const auto& source : sources) {
    std::string current;
    std::string current_type;
    for (absl::string_view line : absl::StrSplit(source.text, '\n', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&line, "#")) {
        std::vector<absl::string_view> words =
            absl::StrSplit(absl::StripLeadingAsciiWhitespace(line), absl::MaxSplits(' ', 2));
        if (words.size() < 2 || (words[0] != "HELP" && words[0] != "TYPE")) continue;
        if (!valid_metric_name(words[1])) {
          ++out.dropped_lines;
          continue;
        }
        current = std::string(words[1]);
        family& f = family_named(current);
        const absl::string_view rest = words.size() > 2 ? words[2] : absl::string_view();
        if (words[0] == "HELP") {
          if (f.help.empty()) f.help = absl::StrCat("# HELP ", current, " ", rest, "\n");
        } else {
          static const char* const kTypes[] = {"counter", "gauge", "histogram", "summary",
                                               "untyped"};
          bool known = false;
          for (const char* t : kTypes)
            known = known || rest == t;
          if (!known) {
            ++out.dropped_lines;
            continue;
          }
          current_type = std::string(rest);
          if (!f.typed) {
            f.type = current_type;
            f.typed = true;
          }
        }
        continue;
      }
      std::optional<sample_line> s = parse_line(line);
      if (!s) {
        ++out.dropped_lines;
        continue;
      }
      const std::string name = family_of(s->name, current, current_type);
      if (name != current) {
        current = name;
        current_type.clear();
      }
      family_named(name).samples += relabelled(*s, source.identity);
    }
  }
  for (const auto& name : order) {
    const family& f = families[name];
    if (f.samples.empty()) continue;
    absl::StrAppend(&out.text, f.help, "# TYPE ", name, " ", f.type, "\n", f.samples);
  }
  return out;
}

std::vector<sample> parse_samples(absl::string_view text) {
  std::vector<sample> out;
  std::string current;
  std::string current_type;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::vector<absl::string_view> words = absl::StrSplit(line, absl::MaxSplits(' ', 1));
      current = std::string(words[0]);
      current_type = words.size() > 1 ? std::string(words[1]) : std::string();
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    std::optional<sample_line> s = parse_line(line);
    if (!s) continue;
    const absl::string_view series = line.substr(0, s->value.data() - line.data());
    sample& added = out.emplace_back();
    added.family = family_of(s->name, current, current_type);
    added.series = std::string(absl::StripTrailingAsciiWhitespace(series));
    added.name = std::string(s->name);
    for (const auto& [k, v] : s->labels)
      added.labels.emplace_back(k, unescape_label_value(v));
    added.value = s->number;
  }
  return out;
}

}  // namespace troupe::metrics
