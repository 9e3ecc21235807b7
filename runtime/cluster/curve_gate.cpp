#include "runtime/cluster/curve_gate.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {
namespace {

// The endpoint libzmq asks for authentication on, in each context (ZAP).
constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";

std::mutex gates_mu;
std::map<void*, std::weak_ptr<curve_gate>> gates;  // by context

std::string z85_of(const zmq::message_t& binary_key) {
  if (binary_key.size() != 32) return "";
  char text[41] = {};
  zmq_z85_encode(text, static_cast<const uint8_t*>(binary_key.data()), 32);
  return text;
}

}  // namespace

void secure_server(zmq::socket_t& socket, const cluster_credentials& credentials) {
  if (!credentials.curve) return;
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, credentials.curve->secret_key);
  socket.set(zmq::sockopt::zap_domain, "troupe");
}

void secure_client(zmq::socket_t& socket, const cluster_credentials& credentials) {
  if (!credentials.curve) return;
  socket.set(zmq::sockopt::curve_serverkey, credentials.curve->public_key);
  socket.set(zmq::sockopt::curve_publickey, credentials.curve->public_key);
  socket.set(zmq::sockopt::curve_secretkey, credentials.curve->secret_key);
}

absl::StatusOr<std::shared_ptr<curve_gate>> curve_gate::open(
    zmq::context_t& context, const cluster_credentials& credentials) {
  if (!credentials.curve) return nullptr;
  std::lock_guard lock(gates_mu);
  auto& slot = gates[context.handle()];
  if (auto gate = slot.lock()) {
    if (gate->allowed_key_ != credentials.curve->public_key) {
      return absl::FailedPreconditionError(
          "one process cannot serve two clusters with different CURVE keys");
    }
    return gate;
  }
  zmq::socket_t handler(context, zmq::socket_type::rep);
  handler.set(zmq::sockopt::linger, 0);
  try {
    handler.bind(zap_endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("cannot start the CURVE gate: ", e.what()));
  }
  auto gate = std::make_shared<curve_gate>(std::move(handler), credentials.curve->public_key);
  slot = gate;
  return gate;
}

curve_gate::curve_gate(zmq::socket_t handler, std::string allowed_key)
    : handler_(std::move(handler)), allowed_key_(std::move(allowed_key)) {
  thread_ = std::thread([this] { loop(); });
}

curve_gate::~curve_gate() {
  stopping_ = true;
  thread_.join();
}

void curve_gate::loop() {
  pthread_setname_np(pthread_self(), "troupe.zap");
  zmq::pollitem_t item{handler_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stopping_.load()) {
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
    } catch (const zmq::error_t&) {
      continue;
    }
    auto frames = try_recv(handler_);
    if (!frames.ok() || frames->empty()) continue;
    // [version, request id, domain, address, routing id, mechanism, credentials...]
    const auto& f = *frames;
    const bool well_formed = f.size() >= 7 && f[0].to_string() == "1.0";
    const bool allowed = well_formed && f[5].to_string() == "CURVE" && z85_of(f[6]) == allowed_key_;
    const std::string request_id = f.size() > 1 ? f[1].to_string() : "";
    (void)send(handler_, {"1.0", request_id, allowed ? "200" : "400",
                          allowed ? "OK" : "not the cluster's key", "", ""});
  }
}

handshake_watch::handshake_watch(zmq::context_t& context, zmq::socket_t& socket)
    : events_(context, zmq::socket_type::pair) {
  static std::atomic<uint64_t> next{0};
  const std::string endpoint = absl::StrCat("inproc://troupe.handshakes.", next.fetch_add(1));
  zmq_socket_monitor(socket.handle(), endpoint.c_str(),
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(endpoint);
}

std::vector<handshake_watch::failure> handshake_watch::take(std::chrono::milliseconds wait) {
  if (wait.count() > 0) {
    zmq::pollitem_t item{events_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, wait);
    } catch (const zmq::error_t&) {
      // interrupted: take what is there
    }
  }
  std::vector<failure> out;
  for (;;) {
    auto frames = try_recv(events_);
    if (!frames.ok() || frames->size() < 2 || (*frames)[0].size() < 2) return out;
    uint16_t event = 0;
    std::memcpy(&event, (*frames)[0].data(), sizeof(event));
    out.push_back({event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, (*frames)[1].to_string()});
  }
}

absl::Status handshake_refused(const handshake_watch::failure& failure, const std::string& endpoint,
                               const cluster_credentials& credentials) {
  if (!credentials.curve) {
    return absl::UnauthenticatedError(absl::StrCat(
        endpoint, " requires CURVE (cluster.auth: curve) and this process has no keys: pass ",
        "--keys DIR or set TROUPE_KEYS to the directory `troupe keys generate` made for the ",
        "cluster"));
  }
  if (failure.key_refused) {
    return absl::PermissionDeniedError(absl::StrCat(
        endpoint, " refused this process's key (", credentials.keys_dir, "/", secret_key_file,
        "): it is not the cluster's; use the keys the head was started with"));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the CURVE handshake with ", endpoint, " failed: it does not use CURVE (cluster.auth: ",
      "token), or its key is not the one in ", credentials.keys_dir, "/", secret_key_file));
}

absl::Status send_to_server(zmq::socket_t& socket, handshake_watch& handshakes,
                            absl::string_view frame, std::chrono::steady_clock::time_point deadline,
                            const std::string& endpoint, const cluster_credentials& credentials) {
  for (;;) {
    absl::Status sent = send(socket, {frame});
    if (sent.code() != absl::StatusCode::kResourceExhausted) return sent;
    if (const auto failed = handshakes.take(std::chrono::milliseconds(20)); !failed.empty()) {
      return handshake_refused(failed.front(), endpoint, credentials);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("cannot send to ", endpoint,
                                                 ": the connection closed (", sent.message(),
                                                 ") and no refused handshake explains it"));
    }
  }
}

}  // namespace troupe::cluster
