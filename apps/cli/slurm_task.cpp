#include "apps/cli/slurm_task.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::cli {
namespace fs = std::filesystem;

absl::StatusOr<slurm_task> slurm_task_from(const std::function<const char*(const char*)>& getenv) {
  const auto text = [&](const char* name) -> absl::StatusOr<std::string> {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat("--slurm: ", name,
                       " is not set; run this under srun, e.g. `srun troupe launch CONFIG "
                       "--slurm` in an sbatch script (scripts/slurm/troupe.sbatch)"));
    }
    return std::string(v);
  };
  const auto number = [&](const char* name, int min) -> absl::StatusOr<int> {
    absl::StatusOr<std::string> v = text(name);
    if (!v.ok()) return v.status();
    int n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slurm: ", name, " is '", *v, "', not a whole number of at least ", min));
    }
    return n;
  };
  slurm_task t;
  absl::StatusOr<int> procid = number("SLURM_PROCID", 0);
  if (!procid.ok()) return procid.status();
  absl::StatusOr<int> ntasks = number("SLURM_NTASKS", 1);
  if (!ntasks.ok()) return ntasks.status();
  if (*procid >= *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm: SLURM_PROCID ", *procid, " is not below SLURM_NTASKS ", *ntasks));
  }
  t.procid = *procid;
  t.ntasks = *ntasks;
  for (auto [name, out] : {std::pair{"SLURM_JOB_ID", &t.job_id},
                           {"SLURMD_NODENAME", &t.node},
                           {"SLURM_SUBMIT_DIR", &t.submit_dir}}) {
    absl::StatusOr<std::string> v = text(name);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (getenv("SLURM_CPUS_PER_TASK") != nullptr) {
    absl::StatusOr<int> cpus = number("SLURM_CPUS_PER_TASK", 1);
    if (!cpus.ok()) return cpus.status();
    t.cpus_per_task = *cpus;
  }
  return t;
}

std::string slurm_rendezvous_path(const std::string& submit_dir, const std::string& job_id) {
  return (fs::path(submit_dir) / ".troupe" / absl::StrCat("slurm-", job_id, ".json")).string();
}

absl::Status write_slurm_rendezvous(const std::string& path, const slurm_rendezvous& r) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", fs::path(path).parent_path().string(), ": ", ec.message()));
  }
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    ::chmod(tmp.c_str(), 0600);
    out << nlohmann::json{{"endpoint", r.endpoint}, {"token", r.token}}.dump() << "\n";
    if (!out.flush()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  fs::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<slurm_rendezvous> read_slurm_rendezvous(const std::string& path,
                                                       std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the head's task (SLURM_PROCID 0) did not write ", path, " within ",
                       std::chrono::duration_cast<std::chrono::seconds>(wait).count(),
                       " s (cluster.join_wait_s); see its output for why"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("endpoint") || !j["endpoint"].is_string() ||
      !j.contains("token") || !j["token"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a troupe rendezvous file ({\"endpoint\", \"token\"}); remove it"));
  }
  return slurm_rendezvous{j["endpoint"], j["token"]};
}

absl::StatusOr<std::string> local_address_towards(const std::string& endpoint) {
  constexpr std::string_view scheme = "tcp://";
  const size_t colon = endpoint.rfind(':');
  if (endpoint.rfind(scheme, 0) != 0 || colon == std::string::npos || colon < scheme.size()) {
    return absl::InvalidArgumentError(absl::StrCat("'", endpoint, "' is not tcp://HOST:PORT"));
  }
  const std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  const std::string port = endpoint.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, " (from ", endpoint, "): ", gai_strerror(rc)));
  }
  // Connecting a datagram socket only picks the route; nothing is sent.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  sockaddr_in local{};
  socklen_t size = sizeof(local);
  const bool named = connected && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0;
  if (fd >= 0) close(fd);
  if (!named) return absl::UnavailableError(absl::StrCat("no route to ", endpoint));
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

}  // namespace troupe::cli
