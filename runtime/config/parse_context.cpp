#include "runtime/config/parse_context.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/config/document.hpp"

namespace troupe::config {

void diagnostics::error(std::string where, absl::string_view path, absl::string_view message) {
  if (path.empty()) {
    errors_.push_back(absl::StrCat(where, ": ", message));
  } else {
    errors_.push_back(absl::StrCat(where, ": ", path, ": ", message));
  }
}

absl::Status diagnostics::status() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

parse_context parse_context::child(absl::string_view key) const {
  return parse_context(*doc_, *diag_,
                       path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key));
}

parse_context parse_context::element(size_t index) const {
  return parse_context(*doc_, *diag_, absl::StrCat(path_, "[", index, "]"));
}

void parse_context::error(const YAML::Node& node, absl::string_view message) const {
  diag_->error(doc_->where(path_, node), path_, message);
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
  }
  return "an unknown node";
}

}  // namespace troupe::config
