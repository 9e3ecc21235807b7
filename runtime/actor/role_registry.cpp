#include "runtime/actor/role_registry.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/base/suggest.hpp"

namespace troupe::actor {

std::string role_origin::to_string() const {
  return built_in() ? std::string("built-in") : absl::StrCat("plugin ", plugin, " (", path, ")");
}

absl::Status role_registry::add(std::string kind, std::string name, role_factory factory,
                                role_origin origin) {
  if (!factory.options || !factory.spawn) {
    return absl::InvalidArgumentError(absl::StrCat("role ", kind, "/", name, " from ",
                                                   origin.to_string(),
                                                   " has no options schema or spawn function"));
  }
  auto key = std::make_pair(kind, name);
  if (auto it = entries_.find(key); it != entries_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("role ", kind, "/", name, " from ",
                                                 origin.to_string(), " is already registered by ",
                                                 it->second->origin.to_string()));
  }
  entries_[key] = std::make_unique<role_entry>(
      role_entry{std::move(kind), std::move(name), std::move(origin), std::move(factory)});
  return absl::OkStatus();
}

absl::StatusOr<const role_entry*> role_registry::find(absl::string_view kind,
                                                      absl::string_view name) const {
  if (auto it = entries_.find({std::string(kind), std::string(name)}); it != entries_.end()) {
    return it->second.get();
  }
  std::vector<std::string> names;
  for (const auto& [key, entry] : entries_) {
    if (key.first == kind) names.push_back(key.second);
  }
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("there is no role kind '", kind, "'. ",
                                            suggestion_text(kind, kinds(), "kinds")));
  }
  return absl::NotFoundError(
      absl::StrCat("kind '", kind, "' has no implementation '", name, "'. ",
                   suggestion_text(name, names, "implementations"),
                   " Implementations from plugins appear once the role names its plugin."));
}

std::vector<const role_entry*> role_registry::entries() const {
  std::vector<const role_entry*> out;
  for (const auto& [key, entry] : entries_)
    out.push_back(entry.get());
  return out;
}

std::vector<std::string> role_registry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [key, entry] : entries_) {
    if (out.empty() || out.back() != key.first) out.push_back(key.first);
  }
  return out;
}

}  // namespace troupe::actor
