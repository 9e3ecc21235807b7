#include "runtime/cluster/cluster_file.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::cluster {

namespace fs = std::filesystem;

absl::Status write_head_file(const std::string& path, const head_address& address) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    chmod(tmp.c_str(), 0600);
    out << nlohmann::json{{"endpoint", address.endpoint}, {"token", address.token}}.dump() << "\n";
    if (!out.flush()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  fs::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<head_address> read_head_file(const std::string& path,
                                            std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!fs::exists(path)) {  // written by another process, which renames it into place
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no head file ", path,
          wait.count() > 0 ? absl::StrCat(" after ", wait.count() / 1000, " s") : std::string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("endpoint") || !j["endpoint"].is_string() ||
      !j.contains("token") || !j["token"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a troupe head file ({\"endpoint\", \"token\"}); remove it"));
  }
  return head_address{j["endpoint"], j["token"]};
}

std::string cluster_file_path(const std::string& endpoint) {
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  return (fs::path(absl::StrCat("/tmp/troupe-", getuid())) / absl::StrCat("head-", port, ".json"))
      .string();
}

absl::StatusOr<std::string> read_cluster_token(const std::string& endpoint) {
  auto address = read_head_file(cluster_file_path(endpoint));
  if (!address.ok()) return absl::NotFoundError("no cluster file for " + endpoint);
  return address->token;
}

head_cluster_file::~head_cluster_file() {
  std::error_code ec;
  for (const auto& path : written_)
    fs::remove(path, ec);
}

absl::Status head_cluster_file::listening(const std::string& endpoint) {
  const std::string own = cluster_file_path(endpoint);
  if (write_head_file(own, {endpoint, token_}).ok()) {
    chmod(fs::path(own).parent_path().c_str(), 0700);
    written_.push_back(own);
  }
  if (extra_.empty()) return absl::OkStatus();
  absl::Status s = write_head_file(extra_, {endpoint, token_});
  if (s.ok()) written_.push_back(extra_);
  return s;
}

}  // namespace troupe::cluster
