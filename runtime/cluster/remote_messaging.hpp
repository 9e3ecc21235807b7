#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "caf/actor_companion.hpp"
#include "caf/all.hpp"
#include "runtime/cluster/envelope.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::cluster {

/// Carries actor messages between this process and its peers (DESIGN.md plane 2), so that an
/// actor cannot tell a local peer from a remote one:
///
/// - `proxy(name, node)` is a CAF actor standing for actor `name` on `node`. Whatever is sent to
///   it is encoded right in the sender's thread (no extra hop) and goes out as "actor.req" (with
///   a correlation id, remembered until the response comes back) or "actor.send".
/// - Actors `publish`ed here are reachable by name from the other nodes. An incoming request is
///   enqueued with a reply companion as sender, which sends the handler's result back as
///   "actor.resp".
/// - When a node is lost, everything pending on it fails at once with an error naming it, and
///   its proxies terminate with that error, so monitors fire.
///
/// Order holds per sender and receiver: a sender's messages to a node leave through one
/// connection, and the receiving node dispatches them in arrival order.
class remote_messaging {
 public:
  using clock = std::chrono::steady_clock;
  /// Sends one encoded envelope to `node` (copying it: the bytes are gone after the call).
  using send_fn = std::function<absl::Status(const std::string& node, absl::string_view envelope)>;

  remote_messaging(caf::actor_system& system, std::string self_node, send_fn send,
                   std::chrono::milliseconds request_timeout, metrics::registry& metrics);
  ~remote_messaging();

  /// Makes `handle` reachable from other nodes as `name` (replacing an earlier one).
  void publish(const std::string& name, caf::actor handle);
  void unpublish(const std::string& name);
  [[nodiscard]] std::vector<std::string> published() const;

  /// The local stand-in for actor `name` on `node` (one per name; replaced if the node changed).
  [[nodiscard]] caf::actor proxy(const std::string& name, const std::string& node);

  /// Terminates the proxy for `name` with `reason` (the remote actor is gone).
  void forget(const std::string& name, const absl::Status& reason);

  /// Handles an incoming "actor.req", "actor.send" or "actor.resp" from a live member; false
  /// for any other type. The receiving actor is scheduled through `here` (the calling worker;
  /// nullptr: any).
  [[nodiscard]] bool on_envelope(const received_envelope& env, caf::execution_unit* here = nullptr);

  /// Fails everything pending on `node`, and its proxies, with `reason`.
  void on_node_lost(const std::string& node, const absl::Status& reason);

  /// Fails requests older than the request timeout; forgets senders that are gone.
  void sweep(clock::time_point now);

  void set_epoch(uint64_t epoch) { epoch_.store(epoch); }

 private:
  struct pending_request {
    uint64_t corr = 0;
    caf::strong_actor_ptr sender;
    caf::message_id mid;
    caf::strong_actor_ptr proxy;
    std::string node;
    std::string dst;
    clock::time_point deadline;
  };
  struct proxy_entry {
    caf::actor handle;
    std::string node;
  };

  // Sends the message in `element` to `dst` on `node`; runs in the sender's thread.
  void forward(const std::string& dst, const std::string& node, caf::strong_actor_ptr proxy,
               caf::mailbox_element_ptr element);
  // An "actor.resp": completes the pending request it answers.
  void on_response(const received_envelope& env, caf::execution_unit* here);
  // An "actor.req" (`request`) or "actor.send": delivers it to the published or exported actor.
  void on_message(const received_envelope& env, bool request, caf::execution_unit* here);
  // Sends a handler's reply back to the remote `from` actor on `node`.
  void reply(const std::string& node, uint64_t from, caf::mailbox_element_ptr element);
  // Under `mu_`: the reply companion for actor `from` on `node`.
  caf::strong_actor_ptr companion_for_locked(const std::string& node, uint64_t from);
  // Answers a local request with an error.
  static void fail(const caf::strong_actor_ptr& sender, caf::message_id mid,
                   const caf::strong_actor_ptr& responder, const absl::Status& error);
  // Under `mu_`: removes the pending requests `which` selects, oldest first.
  template <class Pred>
  std::vector<pending_request> take_pending_locked(Pred which);
  void send_error_response(const std::string& node, uint64_t corr, const absl::Status& error);
  void count(const char* what, absl::string_view reason);
  envelope header(std::string type, std::string dst, uint64_t corr, uint64_t from) const;

  caf::actor_system& system_;
  std::string self_;
  send_fn send_;
  std::chrono::milliseconds request_timeout_;
  metrics::registry& metrics_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> next_corr_{1};

  mutable std::mutex mu_;
  std::map<std::string, caf::actor> published_;
  std::map<std::string, proxy_entry> proxies_;
  absl::flat_hash_map<std::pair<std::string, uint64_t>, caf::actor> companions_;  // node, from
  absl::flat_hash_map<uint64_t, pending_request> pending_;
  absl::flat_hash_map<uint64_t, caf::weak_actor_ptr> exported_;  // whom remote actors may answer
};

}  // namespace troupe::cluster
