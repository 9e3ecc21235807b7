#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/cluster/curve_keys.hpp"
#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/kv_store.hpp"
#include "runtime/cluster/membership.hpp"

namespace troupe::cluster {

/// Keys of the head's store under which a running job publishes what `troupe status` shows of
/// it: "job/NAME" holds a JSON value shown as NAME.
inline constexpr absl::string_view job_key_prefix = "job/";

/// What the head is configured with.
struct head_options {
  /// What a join (or a request from a client that has not joined) must present: the token, or,
  /// with CURVE, nothing more (the socket let in only holders of the cluster's key).
  cluster_credentials credentials;
  std::chrono::milliseconds heartbeat_interval{500};
  int heartbeat_misses = 4;
  /// The resolved app config handed to every joining worker (empty: no app yet).
  std::string app_config;
  /// The head's own listen endpoint, advertised as the head member's.
  std::string endpoint;
  /// The head process's metrics in Prometheus text format, for "metrics" requests.
  std::function<std::string()> metrics_text;
};

/// The head's request handling, without sockets: membership, the key-value store, actor
/// locations and status. Each call returns the frames to send, each to a client identity
/// (the ZeroMQ routing id of its connection). See docs/protocol.md for every message.
class head_logic {
 public:
  using clock = std::chrono::steady_clock;

  /// A frame for the client connection `identity`.
  struct outgoing {
    std::string identity;
    std::string frame;
  };

  /// Something worth an event-log line: joins, refusals, deaths, departures.
  struct notice {
    std::string type;     // "member_joined", "join_refused", "member_dead", "member_left"
    std::string message;  // for people
    std::string node;
  };

  head_logic(head_options options, clock::time_point now);

  /// Handles one request from `identity`.
  [[nodiscard]] std::vector<outgoing> on_request(const std::string& identity,
                                                 const received_envelope& request,
                                                 clock::time_point now);

  /// Periodic work: declares silent members dead, times out key waits.
  [[nodiscard]] std::vector<outgoing> on_tick(clock::time_point now);

  /// Tells every live worker to shut down.
  [[nodiscard]] std::vector<outgoing> shutdown(absl::string_view reason);

  /// Tells worker `node` alone to shut down, and counts it as departed at once (a "members"
  /// push follows at the next tick). Nothing when it is not a live worker.
  [[nodiscard]] std::vector<outgoing> retire(const std::string& node, absl::string_view reason);

  /// Notices since the last call.
  [[nodiscard]] std::vector<notice> take_notices();

  /// Requests refused since the last call, by reason ("unknown_type", "unauthenticated").
  [[nodiscard]] std::vector<std::string> take_rejections();

  /// Events that workers forwarded (msgpack-encoded JSON objects), since the last call.
  [[nodiscard]] std::vector<std::string> take_forwarded_events();

  [[nodiscard]] const membership& members() const { return members_; }

  /// What a "status" request is answered with (msgpack): {epoch, job, kv_keys,
  /// failure_timeout_ms, members}.
  [[nodiscard]] std::string status_payload(clock::time_point now) const;

  /// The metrics (Prometheus text) each live worker sent with its latest heartbeat, by node (a
  /// member's leave the list at the tick that finds it dead or departed).
  [[nodiscard]] std::vector<std::pair<std::string, std::shared_ptr<const std::string>>>
  worker_metrics() const;

 private:
  // Whether `token` lets a client in: the cluster's token, or anything under CURVE.
  [[nodiscard]] bool token_accepted(absl::string_view token) const;

  struct waiting_client {
    std::string identity;
    uint64_t corr;
    std::string key;
  };

  using handler = std::vector<outgoing> (head_logic::*)(const std::string&,
                                                        const received_envelope&,
                                                        clock::time_point);
  std::vector<outgoing> on_hello(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_join(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_heartbeat(const std::string&, const received_envelope&,
                                     clock::time_point);
  std::vector<outgoing> on_leave(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_actors(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_resolve(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_member(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_status(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_metrics(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_event(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_kv_set(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_kv_get(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_kv_add(const std::string&, const received_envelope&, clock::time_point);
  std::vector<outgoing> on_kv_wait(const std::string&, const received_envelope&, clock::time_point);

  // Replies to `request` on `identity` with `type` and a payload.
  outgoing reply(const std::string& identity, const envelope& request, std::string type,
                 const std::function<void(packer&)>& payload) const;
  outgoing error(const std::string& identity, const envelope& request,
                 const absl::Status& status) const;
  // A "kv.value" reply.
  outgoing value_reply(const std::string& identity, const envelope& request,
                       const std::string& value) const;
  // The "members" pushes of the records changed since the last ones: every change to the
  // watchers, departures and deaths to the other live members.
  std::vector<outgoing> broadcast_changes();
  // Every member's whole record (status).
  void pack_members(packer& pk, clock::time_point now) const;
  // What a node agent keeps of `list` (node, endpoint, state, head): joins' replies and pushes.
  // The head's record only once the head's node agent has joined (told_of).
  void pack_peers(packer& pk, const std::vector<const member*>& list) const;
  // Whether members may be told of `m`: not of the head until the head's node agent joins, since
  // until then its record names the head server, which takes no actor's messages (a worker that
  // kept it would answer the head's node there). Not told, a worker asks when it needs it.
  bool told_of(const member& m) const { return !m.head || identity_by_member_.contains("head"); }
  std::vector<outgoing> release_waiters(const std::vector<kv_store::waiter_id>& woken,
                                        const std::string& value);
  // `node` leaves (`how`: "left", "retired: ..."): noticed, and pushed at the next tick.
  absl::Status depart(const std::string& node, absl::string_view how);
  // The "shutdown" push.
  std::string shutdown_frame(absl::string_view reason) const;
  // The member id of a joined connection, or empty.
  std::string member_of(const std::string& identity) const;

  head_options options_;
  membership members_;
  kv_store kv_;
  std::map<std::string, std::string> member_by_identity_;
  std::map<std::string, std::string> identity_by_member_;
  std::map<kv_store::waiter_id, waiting_client> waiters_;
  kv_store::waiter_id next_waiter_ = 1;
  std::vector<notice> notices_;
  std::vector<std::string> rejections_;
  std::vector<std::string> forwarded_events_;
  std::map<std::string, std::shared_ptr<const std::string>> metrics_by_member_;
  clock::time_point now_;
  // Members joined, departed or dead since the last push: the next tick pushes their records.
  std::set<std::string> changed_;
  // Members that asked (join's "watch") for every member's record, joins included.
  std::set<std::string> watchers_;
};

}  // namespace troupe::cluster
