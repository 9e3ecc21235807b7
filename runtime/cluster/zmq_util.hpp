#pragma once

// Small helpers over cppzmq shared by the head and the node agents. ZeroMQ throws; these catch
// and return Status, so no exception crosses into troupe code.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "zmq.hpp"

namespace troupe::cluster {

/// Socket options every troupe socket gets: no lingering on close, a hard cap on message size
/// (`max_bytes`, so that no peer can make us allocate without bound; the envelope decoder
/// enforces the configured, smaller limit with a clean error), and generous queue limits.
void configure_socket(zmq::socket_t& socket, size_t max_bytes);

/// Binds `socket` to `endpoint`; "tcp://HOST:0" picks a free port. Returns the bound endpoint.
[[nodiscard]] absl::StatusOr<std::string> bind_socket(zmq::socket_t& socket,
                                                      absl::string_view endpoint);

/// The host of "tcp://HOST:PORT" (an IPv6 address without its brackets), or "" for anything
/// else.
[[nodiscard]] std::string endpoint_host(absl::string_view endpoint);

/// The address of this machine that packets to `endpoint` ("tcp://HOST:PORT") leave from: what
/// a worker binds and advertises so that its peers on the head's side reach it (127.0.0.1 for a
/// head on loopback). No packet is sent.
[[nodiscard]] absl::StatusOr<std::string> local_address_towards(absl::string_view endpoint);

/// The address peers reach a process at that listens on `endpoint`: its host, or for a
/// wildcard (0.0.0.0, *) the first IPv4 address of an interface that is up and not loopback.
[[nodiscard]] std::string advertised_host(absl::string_view endpoint);

/// Receives all frames of one message without blocking; empty when none is waiting.
[[nodiscard]] absl::StatusOr<std::vector<zmq::message_t>> try_recv(zmq::socket_t& socket);

/// Sends `frames` as one message without blocking.
[[nodiscard]] absl::Status send(zmq::socket_t& socket,
                                const std::vector<absl::string_view>& frames);

/// A random ZeroMQ routing id, so that a reconnecting client is a new connection to the head.
[[nodiscard]] std::string random_identity();

/// A random secret (hex), for clusters started without a configured token.
[[nodiscard]] std::string random_token();

}  // namespace troupe::cluster
