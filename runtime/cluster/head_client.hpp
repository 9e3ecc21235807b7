#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cluster/curve_gate.hpp"
#include "runtime/cluster/envelope.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// A blocking client of the head for tools and tests (`troupe status`): one DEALER, one request
/// at a time, the cluster token sent with every request (or CURVE, with the cluster's keys). A
/// refused CURVE handshake fails the call at once with what is missing.
class head_client {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<head_client>> connect(
      zmq::context_t& context, const std::string& endpoint, cluster_credentials credentials,
      size_t max_frame_bytes = 64 << 20);

  /// Sends a `type` request with `payload` and waits up to `timeout` for its reply. An "error"
  /// reply becomes its Status.
  [[nodiscard]] absl::StatusOr<received_envelope> call(absl::string_view type, map_builder payload,
                                                       std::chrono::milliseconds timeout);

  /// Sends raw bytes as one frame (tests use this to send garbage).
  [[nodiscard]] absl::Status send_raw(absl::string_view bytes);

 private:
  head_client(zmq::socket_t socket, std::unique_ptr<handshake_watch> handshakes,
              std::string endpoint, cluster_credentials credentials, size_t max_frame)
      : socket_(std::move(socket)),
        handshakes_(std::move(handshakes)),
        endpoint_(std::move(endpoint)),
        credentials_(std::move(credentials)),
        max_frame_bytes_(max_frame) {}

  zmq::socket_t socket_;
  std::unique_ptr<handshake_watch> handshakes_;
  std::string endpoint_;
  cluster_credentials credentials_;
  size_t max_frame_bytes_;
  uint64_t next_corr_ = 1;
};

/// The Status an "error" envelope carries ({"code": "NOT_FOUND", "message": ...}).
[[nodiscard]] absl::Status status_of_error(const received_envelope& error);

}  // namespace troupe::cluster
