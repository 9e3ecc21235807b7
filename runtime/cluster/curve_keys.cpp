#include "runtime/cluster/curve_keys.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "zmq.h"

namespace troupe::cluster {
namespace {

namespace fs = std::filesystem;

// czmq's zcert text: a comment, then `curve` with its keys in Z85.
std::string certificate(const curve_keypair& keys, bool with_secret) {
  std::string text = absl::StrCat(
      "#   ZeroMQ CURVE ", with_secret ? "**Secret** Certificate" : "Public Certificate",
      " (troupe keys generate)\n",
      with_secret ? "#   Only the cluster's members may read this file (mode 0600).\n" : "",
      "\nmetadata\ncurve\n    public-key = \"", keys.public_key, "\"\n");
  if (with_secret) absl::StrAppend(&text, "    secret-key = \"", keys.secret_key, "\"\n");
  return text;
}

absl::Status write_file(const fs::path& path, const std::string& text, mode_t mode) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp.string()));
  }
  if (chmod(tmp.c_str(), mode) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot set the mode of ", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

}  // namespace

bool curve_available() {
  return zmq_has("curve") != 0;
}

absl::StatusOr<curve_keypair> generate_curve_keypair() {
  char public_key[41] = {};
  char secret_key[41] = {};
  if (!curve_available() || zmq_curve_keypair(public_key, secret_key) != 0) {
    return absl::FailedPreconditionError(
        "this libzmq was built without CURVE (zmq_has(\"curve\") is 0); use Debian's libzmq5, "
        "which has it (scripts/setup.sh installs it)");
  }
  return curve_keypair{public_key, secret_key};
}

absl::Status write_cluster_keys(const std::string& dir, const curve_keypair& keys) {
  const fs::path secret = fs::path(dir) / secret_key_file;
  if (fs::exists(secret)) {
    return absl::AlreadyExistsError(
        absl::StrCat(secret.string(),
                     " exists; a cluster keeps its keys (remove the directory to make new ones)"));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  chmod(dir.c_str(), 0700);
  if (auto s = write_file(secret, certificate(keys, true), 0600); !s.ok()) return s;
  return write_file(fs::path(dir) / public_key_file, certificate(keys, false), 0644);
}

absl::StatusOr<curve_keypair> read_cluster_keys(const std::string& dir) {
  const fs::path path = fs::path(dir) / secret_key_file;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no cluster keys at ", path.string(),
                                            " (make them with `troupe keys generate --out ", dir,
                                            "`)"));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return absl::PermissionDeniedError(
        absl::StrCat(path.string(), " is open to its group or others (mode ", mode,
                     "); a secret key must not be: chmod 600 ", path.string()));
  }
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto key = [&text](const char* name) -> std::string {
    std::smatch m;
    const std::regex line(absl::StrCat(name, R"re(\s*=\s*"([^"]{40})")re"));
    return std::regex_search(text, m, line) ? m[1].str() : "";
  };
  curve_keypair keys{key("public-key"), key("secret-key")};
  char derived[41] = {};
  if (keys.public_key.empty() || keys.secret_key.empty() ||
      zmq_curve_public(derived, keys.secret_key.c_str()) != 0 || keys.public_key != derived) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.string(), " is not a CURVE certificate whose public key matches its secret key ",
        "(make one with `troupe keys generate --out DIR`)"));
  }
  return keys;
}

std::string keys_dir_or_environment(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("TROUPE_KEYS");
  return env != nullptr ? env : "";
}

absl::StatusOr<cluster_credentials> credentials_with_keys(std::string token, std::string keys_dir) {
  cluster_credentials c{std::move(token), std::nullopt, std::move(keys_dir)};
  if (c.keys_dir.empty()) return c;
  auto keys = read_cluster_keys(c.keys_dir);
  if (!keys.ok()) return keys.status();
  c.curve = std::move(*keys);
  return c;
}

}  // namespace troupe::cluster
