#include "runtime/cluster/zmq_util.hpp"

#include <random>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/config/app_spec.hpp"

namespace troupe::cluster {

void configure_socket(zmq::socket_t& socket, size_t max_bytes) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_bytes));
  socket.set(zmq::sockopt::sndhwm, 100000);
  socket.set(zmq::sockopt::rcvhwm, 100000);
}

absl::StatusOr<std::string> bind_socket(zmq::socket_t& socket, absl::string_view endpoint) {
  std::string ep(endpoint);
  if (absl::EndsWith(ep, ":0")) ep = ep.substr(0, ep.size() - 1) + "*";
  try {
    socket.bind(ep);
    return socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", endpoint, ": ", e.what()));
  }
}

absl::StatusOr<std::vector<zmq::message_t>> try_recv(zmq::socket_t& socket) {
  std::vector<zmq::message_t> frames;
  try {
    while (true) {
      zmq::message_t msg;
      auto got =
          socket.recv(msg, frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
      if (!got) return frames;
      if (frames.empty()) frames.reserve(2);  // a ROUTER's routing id and the frame
      const bool more = msg.more();
      frames.push_back(std::move(msg));
      if (!more) return frames;
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("receive failed: ", e.what()));
  }
}

absl::Status send(zmq::socket_t& socket, const std::vector<absl::string_view>& frames) {
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto flags =
          (i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none) |
          zmq::send_flags::dontwait;
      if (!socket.send(zmq::const_buffer(frames[i].data(), frames[i].size()), flags)) {
        return absl::ResourceExhaustedError("send queue full");
      }
    }
    return absl::OkStatus();
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("send failed: ", e.what()));
  }
}

std::string random_identity() {
  std::random_device rd;
  std::string id = "c-";
  for (int i = 0; i < 12; ++i)
    id += "0123456789abcdef"[rd() % 16];
  return id;
}

std::string random_token() {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 32; ++i)
    token += "0123456789abcdef"[rd() % 16];
  return token;
}

std::string advertised_host(absl::string_view endpoint) {
  std::string host = endpoint_host(endpoint);
  if (host != "0.0.0.0" && host != "*") return host.empty() ? "127.0.0.1" : host;
  // The first IPv4 address of an interface that is up and not loopback (a pod's IP, a host's
  // primary address); the hostname is no guide (Debian maps it to 127.0.1.1).
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "127.0.0.1";
  std::string found = "127.0.0.1";
  for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof(text));
    found = text;
    break;
  }
  freeifaddrs(interfaces);
  return found;
}

namespace {

// "tcp://HOST:PORT" as HOST (without an IPv6 address's brackets) and PORT.
std::optional<std::pair<std::string, int>> tcp_host_port(absl::string_view endpoint) {
  if (!absl::ConsumePrefix(&endpoint, "tcp://")) return std::nullopt;
  auto parsed = config::parse_host_port(endpoint);
  if (!parsed) return std::nullopt;
  absl::string_view host = parsed->first;
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return std::make_pair(std::string(host), parsed->second);
}

}  // namespace

std::string endpoint_host(absl::string_view endpoint) {
  auto parsed = tcp_host_port(endpoint);
  return parsed ? parsed->first : "";
}

absl::StatusOr<std::string> local_address_towards(absl::string_view endpoint) {
  auto parsed = tcp_host_port(endpoint);
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat("'", endpoint, "' is not tcp://HOST:PORT"));
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(parsed->first.c_str(), std::to_string(parsed->second).c_str(), &hints,
                           &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", parsed->first, " (from ",
                                               endpoint, "): ", gai_strerror(rc)));
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

}  // namespace troupe::cluster
