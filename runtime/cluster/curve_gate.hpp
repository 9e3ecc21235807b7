#pragma once

// CURVE on the control plane's sockets: which end is the server, who is let in, and what failed.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/cluster/curve_keys.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// Makes `socket` a CURVE server with the cluster's keypair (call before it binds); the
/// context's curve_gate decides who gets in. Does nothing with token credentials.
void secure_server(zmq::socket_t& socket, const cluster_credentials& credentials);

/// Makes `socket` a CURVE client of a server holding the cluster's keypair (before it connects).
/// Does nothing with token credentials.
void secure_client(zmq::socket_t& socket, const cluster_credentials& credentials);

/// ZeroMQ's authentication handler (ZAP, rfc.zeromq.org/spec/27) for one context: a thread that
/// answers each CURVE handshake on the context's server sockets, admitting the cluster's own
/// public key and no other. One per context, shared by whoever binds a server socket on it.
class curve_gate {
 public:
  /// The context's gate, started on first use; null with token credentials.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<curve_gate>> open(
      zmq::context_t& context, const cluster_credentials& credentials);
  ~curve_gate();

  curve_gate(zmq::socket_t handler, std::string allowed_key);

 private:
  void loop();

  zmq::socket_t handler_;
  std::string allowed_key_;  // Z85
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// Handshakes that failed on one socket, as ZeroMQ's socket monitor reports them.
class handshake_watch {
 public:
  struct failure {
    bool key_refused = false;  ///< the peer's key was not the cluster's (else: no CURVE, or
                               ///< a protocol mismatch)
    std::string endpoint;
  };

  /// Watches `socket` (before it binds or connects).
  handshake_watch(zmq::context_t& context, zmq::socket_t& socket);

  /// The failures since the last call, waiting up to `wait` for one when there is none.
  [[nodiscard]] std::vector<failure> take(std::chrono::milliseconds wait = {});

 private:
  zmq::socket_t events_;
};

/// Why a client's handshake with the server at `endpoint` failed, and what to do about it.
[[nodiscard]] absl::Status handshake_refused(const handshake_watch::failure& failure,
                                             const std::string& endpoint,
                                             const cluster_credentials& credentials);

/// Sends `frame` on `socket`, a client of the server at `endpoint` that `handshakes` watches.
/// A handshake the server refuses (CURVE on one side only, or a key it does not admit) closes
/// the socket's only connection, sometimes before this send: the send then finds no peer, and
/// the refusal, reported by the deadline, is the error.
[[nodiscard]] absl::Status send_to_server(zmq::socket_t& socket, handshake_watch& handshakes,
                                          absl::string_view frame,
                                          std::chrono::steady_clock::time_point deadline,
                                          const std::string& endpoint,
                                          const cluster_credentials& credentials);

}  // namespace troupe::cluster
