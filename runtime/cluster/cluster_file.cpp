#include "runtime/cluster/cluster_file.hpp"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::cluster {
namespace {

std::filesystem::path file_for(const std::string& endpoint) {
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  return std::filesystem::path(absl::StrCat("/tmp/troupe-", getuid())) /
         absl::StrCat("head-", port, ".json");
}

}  // namespace

absl::Status write_cluster_file(const std::string& endpoint, const std::string& token) {
  const auto path = file_for(endpoint);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  chmod(path.parent_path().c_str(), 0700);
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"endpoint", endpoint}, {"token", token}}.dump() << "\n";
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot write ", path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> read_cluster_token(const std::string& endpoint) {
  std::ifstream in(file_for(endpoint));
  if (!in) return absl::NotFoundError("no cluster file for " + endpoint);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string()) {
    return absl::NotFoundError("no cluster file for " + endpoint);
  }
  return j["token"].get<std::string>();
}

void remove_cluster_file(const std::string& endpoint) {
  std::error_code ec;
  std::filesystem::remove(file_for(endpoint), ec);
}

}  // namespace troupe::cluster
