#include "runtime/config/document.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.hpp"

namespace troupe::config {
namespace {

std::string mark_text(const std::string& name, const YAML::Mark& mark) {
  if (mark.is_null()) return name;
  return absl::StrCat(name, ":", mark.line + 1, ":", mark.column + 1);
}

absl::StatusOr<YAML::Node> parse_yaml(absl::string_view text, const std::string& name) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(mark_text(name, e.mark), ": invalid YAML: ", e.msg));
  }
}

// The mark of the deepest node along `path` ("a.b[2].c") that exists in the document: where a
// missing key's parent is.
YAML::Mark nearest_marked(const YAML::Node& root, absl::string_view path) {
  YAML::Node node = root;
  YAML::Mark mark = root.Mark();
  for (absl::string_view part : absl::StrSplit(path, absl::ByAnyChar(".["), absl::SkipEmpty())) {
    const YAML::Node& current = node;
    YAML::Node next;
    if (absl::EndsWith(part, "]")) {
      size_t index = 0;
      if (!current.IsSequence() || !absl::SimpleAtoi(part.substr(0, part.size() - 1), &index) ||
          index >= current.size()) {
        break;
      }
      next = current[index];
    } else {
      if (!current.IsMap() || !current[std::string(part)].IsDefined()) break;
      next = current[std::string(part)];
    }
    node.reset(next);
    if (!node.Mark().is_null()) mark = node.Mark();
  }
  return mark;
}

bool is_valid_key(absl::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<document> document::load_file(const std::string& path) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory; give the path of a YAML config file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read the config file: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return load_string(text.str(), path);
}

absl::StatusOr<document> document::load_string(absl::string_view text, std::string name) {
  TROUPE_ASSIGN_OR_RETURN(YAML::Node root, parse_yaml(text, name));
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(mark_text(name, root.Mark()),
                     ": the config must be a YAML map with keys such as 'app' and 'roles'"));
  }
  return document(std::move(root), std::move(name));
}

absl::Status document::apply_override(absl::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--set ", assignment, ": expected key.path=value, for example --set roles.sink.count=2"));
  }
  const std::string path(assignment.substr(0, eq));
  std::vector<std::string> keys = absl::StrSplit(path, '.');
  for (const auto& key : keys) {
    if (!is_valid_key(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", assignment, ": '", path,
                       "' is not a key path; use dot-separated keys such as roles.sink.count"));
    }
  }
  const std::string text = absl::StrCat("--set ", assignment);
  TROUPE_ASSIGN_OR_RETURN(YAML::Node value, parse_yaml(assignment.substr(eq + 1), text));

  YAML::Node node = root_;
  std::string walked;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    absl::StrAppend(&walked, walked.empty() ? "" : ".", keys[i]);
    const YAML::Node& current = node;
    YAML::Node child = current[keys[i]];
    if (!child || child.IsNull()) {
      node[keys[i]] = YAML::Node(YAML::NodeType::Map);
    } else if (!child.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(text, ": '", walked, "' is not a map, so it has no key '", keys[i + 1],
                       "'; set the whole value instead: --set ", walked, "=..."));
    }
    node.reset(node[keys[i]]);
  }
  node[keys.back()] = value;
  overrides_.push_back({path, text});
  return absl::OkStatus();
}

std::string document::where(absl::string_view path, const YAML::Node& node) const {
  // The latest override that covers `path` wins, as it does for the value itself.
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
    const std::string& p = it->path;
    if (path == p ||
        (absl::StartsWith(path, p) && (path[p.size()] == '.' || path[p.size()] == '['))) {
      return it->text;
    }
  }
  // A map that an override created has no mark; point at the override that made it.
  if (node.Mark().is_null()) {
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
      if (it->path.size() > path.size() && absl::StartsWith(it->path, path)) {
        return it->text;
      }
    }
  }
  if (node.Mark().is_null()) return mark_text(name_, nearest_marked(root_, path));
  return mark_text(name_, node.Mark());
}

}  // namespace troupe::config
