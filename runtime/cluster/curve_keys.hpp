#pragma once

// The cluster's CURVE keys (cluster.auth: curve) and what a member presents to the others.

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace troupe::cluster {

/// A CURVE keypair, each key in ZeroMQ's Z85 text (40 characters).
struct curve_keypair {
  std::string public_key;
  std::string secret_key;
};

/// How members prove they belong. With `cluster.auth: token` the token is sent in clear with
/// each join and request, so it protects nothing from whoever can read the network. With
/// `cluster.auth: curve` every control-plane connection (head and node sockets) is encrypted
/// and authenticated with the cluster's keypair: only holders of it connect, and the token is
/// not checked.
struct cluster_credentials {
  std::string token;
  std::optional<curve_keypair> curve;
  /// Where `curve` was read from, handed to the worker processes a job starts.
  std::string keys_dir;
};

/// The files `troupe keys generate --out DIR` writes, in czmq's certificate format: the keypair
/// (mode 0600) and its public half.
inline constexpr const char* secret_key_file = "cluster.key_secret";
inline constexpr const char* public_key_file = "cluster.key";

/// Whether this libzmq was built with CURVE (`zmq_has("curve")`).
[[nodiscard]] bool curve_available();

/// A fresh keypair (libsodium's, through zmq_curve_keypair).
[[nodiscard]] absl::StatusOr<curve_keypair> generate_curve_keypair();

/// Writes the keypair into `dir` (created 0700); refuses to replace keys already there.
[[nodiscard]] absl::Status write_cluster_keys(const std::string& dir, const curve_keypair& keys);

/// Reads `dir`'s keypair. Refused, with what to do, when the file is missing, malformed, or
/// readable by the group or others.
[[nodiscard]] absl::StatusOr<curve_keypair> read_cluster_keys(const std::string& dir);

/// The keys directory a member uses: `given` (--keys or cluster.keys), else TROUPE_KEYS, else "".
[[nodiscard]] std::string keys_dir_or_environment(const std::string& given);

/// Credentials with the token and, when `keys_dir` is not empty, the keypair read from it.
[[nodiscard]] absl::StatusOr<cluster_credentials> credentials_with_keys(std::string token,
                                                                        std::string keys_dir);

}  // namespace troupe::cluster
