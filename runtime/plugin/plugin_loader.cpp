#include "runtime/plugin/plugin_loader.hpp"

#include <algorithm>
#include <filesystem>

#include <dlfcn.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/suggest.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace troupe::plugin {
namespace {

constexpr absl::string_view file_prefix = "troupe_plugin_";
constexpr absl::string_view file_suffix = ".so";

bool is_plugin_name(absl::string_view name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Closes a library that was refused; accepted plugins stay loaded for the process's lifetime.
struct library_guard {
  void* handle;
  ~library_guard() {
    if (handle != nullptr) dlclose(handle);
  }
  void* release() { return std::exchange(handle, nullptr); }
};

}  // namespace

void registrar::add_role(std::string kind, std::string name, actor::role_factory factory) {
  roles_.push_back({std::move(kind), std::move(name), std::move(factory)});
}

void registrar::add_reward_rule(std::string name, std::string description,
                                actor::reward_rule rule) {
  if (!is_plugin_name(name)) {
    add_error(absl::InvalidArgumentError(absl::StrCat(
        "reward rule name '", name, "' is invalid: use lowercase letters, digits and '_'")));
    return;
  }
  if (!rule) {
    add_error(
        absl::InvalidArgumentError(absl::StrCat("reward rule '", name, "' has no score function")));
    return;
  }
  actor::role_factory factory =
      actor::rule_reward_factory(name, std::move(description), std::move(rule));
  add_role("reward", std::move(name), std::move(factory));
}

std::string plugin_loader::file_name(absl::string_view name) {
  return absl::StrCat(file_prefix, name, file_suffix);
}

void plugin_loader::add_search_dir(const std::string& dir) {
  if (std::find(search_dirs_.begin(), search_dirs_.end(), dir) == search_dirs_.end()) {
    search_dirs_.push_back(dir);
  }
}

std::vector<std::string> plugin_loader::available() const {
  std::vector<std::string> names;
  for (const auto& dir : search_dirs_) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.size() > file_prefix.size() + file_suffix.size() &&
          absl::StartsWith(file, file_prefix) && absl::EndsWith(file, file_suffix)) {
        names.push_back(
            file.substr(file_prefix.size(), file.size() - file_prefix.size() - file_suffix.size()));
      }
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

absl::StatusOr<const loaded_plugin*> plugin_loader::load(absl::string_view name,
                                                         actor::role_registry& registry) {
  for (const auto& p : loaded_) {
    if (p.name == name) return &p;
  }
  for (const auto& dir : search_dirs_) {
    const auto path = std::filesystem::path(dir) / file_name(name);
    if (std::filesystem::exists(path)) return load_file(path.string(), registry);
  }
  return absl::NotFoundError(absl::StrCat(
      "no plugin '", name, "' (file ", file_name(name), ") in the plugin directories [",
      absl::StrJoin(search_dirs_, ", "), "]. ", suggestion_text(name, available(), "plugins"),
      " Add a directory with plugins.dirs in the config or TROUPE_PLUGIN_PATH."));
}

absl::StatusOr<const loaded_plugin*> plugin_loader::load_file(const std::string& path,
                                                              actor::role_registry& registry) {
  library_guard lib{dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)};
  if (lib.handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot load the plugin: ", dlerror()));
  }
  auto entry =
      reinterpret_cast<troupe_plugin_entry_fn>(dlsym(lib.handle, TROUPE_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": not a troupe plugin: it does not export ", TROUPE_PLUGIN_ENTRY_SYMBOL, "()"));
  }
  const troupe_plugin* plugin = entry();
  if (plugin == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", TROUPE_PLUGIN_ENTRY_SYMBOL, "() returned null"));
  }
  // Version and size come first: nothing else in the struct can be trusted until they match.
  if (plugin->abi_version != TROUPE_PLUGIN_ABI_VERSION ||
      plugin->struct_size != sizeof(troupe_plugin)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": plugin ABI mismatch: the plugin was built for ABI version ", plugin->abi_version,
        " with struct size ", plugin->struct_size, ", but this troupe uses ABI version ",
        TROUPE_PLUGIN_ABI_VERSION, " with struct size ", sizeof(troupe_plugin),
        ". Rebuild the plugin against this troupe's headers."));
  }
  const std::string name = plugin->name != nullptr ? plugin->name : "";
  if (!is_plugin_name(name)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": plugin name '", name, "' is invalid: use lowercase letters, digits and '_'"));
  }
  const std::string expected_file = file_name(name);
  if (std::filesystem::path(path).filename() != expected_file) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the plugin calls itself '", name, "', so its file must be named ", expected_file));
  }
  for (const auto& p : loaded_) {
    if (p.name == name) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, ": a plugin named '", name, "' is already loaded from ", p.path));
    }
  }
  if (plugin->register_fn == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": plugin '", name, "' has no register_fn"));
  }

  registrar r(name);
  plugin->register_fn(r.as_c());
  if (!r.errors().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": plugin '", name, "' failed to register: ", r.errors().front().message()));
  }
  for (size_t i = 0; i < r.roles().size(); ++i) {
    const auto& role = r.roles()[i];
    const bool repeated = std::any_of(r.roles().begin(), r.roles().begin() + i, [&](const auto& o) {
      return o.kind == role.kind && o.name == role.name;
    });
    if (repeated || registry.find(role.kind, role.name).ok()) {
      return absl::AlreadyExistsError(absl::StrCat(path, ": plugin '", name, "' registers ",
                                                   role.kind, "/", role.name,
                                                   ", which already exists"));
    }
  }
  loaded_plugin info{name,
                     plugin->description != nullptr ? plugin->description : "",
                     path,
                     plugin->abi_version,
                     {}};
  for (auto& role : r.roles()) {
    info.roles.push_back(absl::StrCat(role.kind, "/", role.name));
    if (auto s = registry.add(role.kind, role.name, std::move(role.factory), {name, path});
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    }
  }
  lib.release();
  loaded_.push_back(std::move(info));
  return &loaded_.back();
}

}  // namespace troupe::plugin

extern "C" void troupe_plugin_add_reward_rule(troupe_plugin_registrar* registrar, const char* name,
                                              const char* description, troupe_reward_fn score,
                                              void* user_data) {
  auto& r = troupe::plugin::registrar::from_c(registrar);
  troupe::actor::reward_rule rule;
  if (score != nullptr) {
    rule = [score, user_data](std::string_view prompt, std::string_view response, bool ended) {
      return score(user_data, prompt.data(), prompt.size(), response.data(), response.size(),
                   ended ? 1 : 0);
    };
  }
  r.add_reward_rule(name != nullptr ? name : "", description != nullptr ? description : "",
                    std::move(rule));
}
