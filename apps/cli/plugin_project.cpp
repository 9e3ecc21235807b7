#include "apps/cli/plugin_project.hpp"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "apps/cli/plugin_templates.hpp"

namespace troupe::cli {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// How the README says to use a plugin of `kind`.
std::string usage(const plugin_project_spec& spec) {
  if (spec.kind == "reward") {
    return absl::StrCat("# in an RLHF config: roles.reward: {kind: reward, impl: ", spec.name,
                        ", plugin: ", spec.name, "}");
  }
  if (spec.kind == "source") {
    return absl::StrCat("troupe launch ", spec.name,
                        ".yaml --plugin-dir build           # a pipeline\n", "troupe launch ",
                        spec.name,
                        "_pretrain.yaml --plugin-dir build  # pretraining on its records");
  }
  return absl::StrCat("troupe launch ", spec.name, ".yaml --plugin-dir build");
}

}  // namespace

absl::StatusOr<std::vector<project_file>> plugin_project_files(const plugin_project_spec& spec) {
  if (!valid_name(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plugin name '", spec.name,
        "': use lowercase letters, digits and '_', starting with a letter (at most 64), e.g. "
        "my_stage; it names the plugin, its role and its C++ namespace"));
  }
  if (spec.kind != "stage" && spec.kind != "reward" && spec.kind != "source") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kind '", spec.kind, "': a plugin project is one of stage, reward, source"));
  }
  const std::vector<std::pair<std::string, std::string>> values = {{"{{name}}", spec.name},
                                                                   {"{{kind}}", spec.kind},
                                                                   {"{{dir}}", spec.dir},
                                                                   {"{{prefix}}", spec.prefix},
                                                                   {"{{usage}}", usage(spec)}};
  std::vector<project_file> files;
  for (const auto& t : plugin_template_files) {
    const std::string path = t.path;
    std::string rest;
    if (absl::StartsWith(path, "common/")) {
      rest = path.substr(7);
    } else if (absl::StartsWith(path, spec.kind + "/")) {
      rest = path.substr(spec.kind.size() + 1);
    } else {
      continue;
    }
    files.push_back(
        {absl::StrReplaceAll(rest, {{"NAME", spec.name}}), absl::StrReplaceAll(t.text, values)});
  }
  return files;
}

}  // namespace troupe::cli
