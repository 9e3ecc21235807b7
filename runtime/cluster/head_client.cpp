#include "runtime/cluster/head_client.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {

absl::Status status_of_error(const received_envelope& error) {
  auto map = map_view::of(error.payload, "error");
  if (!map.ok()) return absl::UnknownError("malformed error reply");
  const std::string name = map->get_string("code", "UNKNOWN").value_or("UNKNOWN");
  absl::StatusCode code = absl::StatusCode::kUnknown;
  for (int c = 0; c <= 16; ++c) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == name) {
      code = static_cast<absl::StatusCode>(c);
    }
  }
  return absl::Status(code, map->get_string("message", "").value_or(""));
}

absl::StatusOr<std::unique_ptr<head_client>> head_client::connect(zmq::context_t& context,
                                                                  const std::string& endpoint,
                                                                  cluster_credentials credentials,
                                                                  size_t max_frame_bytes) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  configure_socket(socket, 4 * max_frame_bytes);
  socket.set(zmq::sockopt::routing_id, random_identity());
  secure_client(socket, credentials);
  auto handshakes = std::make_unique<handshake_watch>(context, socket);
  try {
    socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot connect to ", endpoint, ": ", e.what()));
  }
  return std::unique_ptr<head_client>(new head_client(
      std::move(socket), std::move(handshakes), endpoint, std::move(credentials), max_frame_bytes));
}

absl::Status head_client::send_raw(absl::string_view bytes) {
  return send(socket_, {bytes});
}

absl::StatusOr<received_envelope> head_client::call(absl::string_view type, map_builder payload,
                                                    std::chrono::milliseconds timeout) {
  envelope h;
  h.type = std::string(type);
  h.src = "client";
  h.corr = next_corr_++;
  payload.add("token", credentials_.token);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (auto s = send_to_server(socket_, *handshakes_, encode(h, payload.bytes()), deadline,
                              endpoint_, credentials_);
      !s.ok()) {
    return s;
  }
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
    } catch (const zmq::error_t&) {
      continue;
    }
    if (const auto failed = handshakes_->take(); !failed.empty()) {
      return handshake_refused(failed.front(), endpoint_, credentials_);
    }
    auto frames = try_recv(socket_);
    if (!frames.ok()) return frames.status();
    if (frames->empty()) continue;
    auto reply = decode(static_cast<const char*>((*frames)[0].data()), (*frames)[0].size(),
                        max_frame_bytes_);
    if (!reply.ok()) return reply.status();
    if (reply->header.corr != h.corr) continue;  // a push, or a late reply to an older call
    if (reply->header.type == "error") return status_of_error(*reply);
    return reply;
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no answer from the head at ", endpoint_, " within ", timeout.count(),
      " ms; is troupe head running there?",
      credentials_.curve
          ? absl::StrCat(" Does ", credentials_.keys_dir, " hold the keys it was started with?")
          : ""));
}

}  // namespace troupe::cluster
