#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "caf/all.hpp"
#include "nlohmann/json.hpp"
#include "runtime/cluster/curve_gate.hpp"
#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/membership.hpp"
#include "runtime/cluster/peer_directory.hpp"
#include "runtime/cluster/peer_inbox.hpp"
#include "runtime/cluster/peer_link.hpp"
#include "runtime/cluster/remote_messaging.hpp"
#include "runtime/metrics/registry.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// How a node agent joins.
struct node_options {
  /// The head's endpoint, "tcp://HOST:PORT".
  std::string head;
  cluster_credentials credentials;
  /// Where this node's ROUTER listens for its peers (a free port on this host).
  std::string bind_host = "127.0.0.1";
  /// True for the head process's own node (it takes the member id "head").
  bool as_head = false;
  /// Whether the head pushes every member's record (joins too) to this node; otherwise it
  /// learns of a member when it first sends to it or hears from it (peer_directory). The head's
  /// own node always watches.
  bool watch_members = false;
  resources res;
  size_t max_frame_bytes = 64 << 20;
  std::chrono::milliseconds join_timeout{10000};
  std::chrono::milliseconds request_timeout{30000};
};

/// One process's membership in a cluster: joins the head, sends heartbeats, keeps what the head
/// pushes and answers of the other members (peer_directory), and carries actor messages to and from
/// its peers (remote_messaging). Each node binds one ROUTER for incoming frames (a peer_inbox,
/// where the idle CAF workers wait, so that an actor message from a peer runs on the thread that
/// received it) and keeps one send-only DEALER per peer (a peer_link), on which senders send from
/// their own threads.
///
///   joining --joined--> member --shutdown from the head, head lost, or refused--> stopped
///
/// The head is lost when it has not acknowledged a heartbeat for `interval * misses`. Each
/// heartbeat carries the process's metrics (Prometheus text), which the head serves for the whole
/// cluster.
class node_agent {
 public:
  /// Called once the node joined and before it serves its peers: whatever it publishes here is
  /// there before any peer can ask for it (frames that arrive meanwhile wait in the socket).
  using on_joined_fn = std::function<absl::Status(node_agent&)>;

  /// Connects to the head and joins (bounded by `join_timeout`), then starts serving.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<node_agent>> start(
      zmq::context_t& context, caf::actor_system& system, node_options options,
      metrics::registry& metrics, const on_joined_fn& on_joined = nullptr);

  /// Leaves the cluster (if still a member) and stops.
  ~node_agent();

  [[nodiscard]] const std::string& id() const { return id_; }
  /// What the node was started with (the head's endpoint and the cluster's credentials among it).
  [[nodiscard]] const node_options& options() const { return options_; }
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  /// The app config the head handed out at the join (empty without an app).
  [[nodiscard]] const std::string& app_config() const { return app_config_; }
  [[nodiscard]] uint64_t epoch() const { return epoch_.load(); }
  /// The members this node knows: every one when it watches (node_options::watch_members),
  /// else the head, itself, those it has talked to, and every departed or dead one.
  [[nodiscard]] std::vector<peer> peers() const;

  /// Makes `handle` reachable from other nodes as `name`, and tells the head.
  void publish(const std::string& name, caf::actor handle);
  void unpublish(const std::string& name);

  /// The local stand-in for actor `name` on node `node`.
  [[nodiscard]] caf::actor remote(const std::string& name, const std::string& node);

  /// Terminates the stand-in for `name` with `reason` (its actor is gone).
  void forget(const std::string& name, const absl::Status& reason);

  /// Asks the head where `name` lives and returns its stand-in.
  [[nodiscard]] absl::StatusOr<caf::actor> resolve(const std::string& name,
                                                   std::chrono::milliseconds timeout);

  /// `listener` receives a `member_event` for every join, departure and death.
  void subscribe(caf::actor listener);

  /// Sends `event` (an event-log object) to the head's event log.
  void forward_event(const nlohmann::json& event);

  /// Blocks until the node stops: the head shut it down (OK), the head was lost or refused it
  /// (an error), or `stop` was called.
  [[nodiscard]] absl::Status wait();

  /// `wait` for at most `timeout`; nullopt while the node still runs.
  [[nodiscard]] std::optional<absl::Status> wait_for(std::chrono::milliseconds timeout);

  /// Leaves the cluster and stops the I/O thread. Idempotent.
  void stop();

 private:
  node_agent(zmq::context_t& context, caf::actor_system& system, node_options options,
             metrics::registry& metrics);
  absl::Status join();
  void loop();
  void on_head_frame(const received_envelope& env);
  void on_peer_frame(const std::vector<zmq::message_t>& frames, caf::execution_unit* here);
  // The member records `list`: the whole list (a join's reply), or, with `delta`, the records
  // that changed since the last push (the others stay as they were).
  void apply_members(const msgpack::object& list, uint64_t epoch, bool delta);
  void finish(absl::Status reason);
  // Queues a frame for the head; the I/O thread sends it.
  void to_head(std::string frame);
  absl::Status send_to_peer(const std::string& node, absl::string_view envelope);
  // Under `mu_`: the link to live member `p`, connected on first use.
  absl::StatusOr<std::shared_ptr<peer_link>> link_locked(const peer& p);
  // Under `mu_`: asks the head who `node` is (a "member" request); the I/O thread hands the
  // answer to `on_member_answer`.
  void ask_head_about_locked(const std::string& node);
  // The I/O thread: releases what waited for `node` (`record`: nullopt when it is no member, or
  // not one yet, for the head's reason `refused`).
  void on_member_answer(const std::string& node, const std::optional<peer>& record,
                        const absl::Status& refused);
  // Hands the envelopes in `frame` from a peer to the messaging layer (`held`: they waited for
  // the head's answer about their sender, and are passed on even while others still wait).
  void deliver(const char* data, size_t size, caf::execution_unit* here, bool held);
  // Counts a refused frame or envelope in troupe_rejected_frames_total.
  void reject(const char* reason);
  void reject(const absl::Status& why);

  zmq::context_t& context_;
  caf::actor_system& system_;
  node_options options_;
  metrics::registry& metrics_;
  // Frames from peers, by the thread that received them: a scheduler worker, or this agent's own
  // thread (every worker busy, or a scheduler that cannot poll).
  metrics::counter& frames_on_workers_;
  metrics::counter& frames_on_node_thread_;
  metrics::counter& lost_in_flush_;
  std::shared_ptr<curve_gate> gate_;  // null without CURVE; before the sockets it admits to
  zmq::socket_t head_;
  handshake_watch head_handshakes_;
  std::shared_ptr<peer_inbox> inbox_;
  bool workers_poll_inbox_ = false;  // else the I/O thread polls it
  int wake_fd_ = -1;
  std::string id_;
  std::string endpoint_;
  std::string app_config_;
  std::chrono::milliseconds heartbeat_interval_{500};
  int heartbeat_misses_ = 4;
  // The longest the node thread sleeps: what a job that runs on for long queued for peers leaves
  // by then, peers' frames are drained when every scheduler worker is busy, and requests to
  // remote actors time out (sweep) at this granularity.
  static constexpr std::chrono::milliseconds turn_interval{100};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> next_corr_{1};
  std::unique_ptr<remote_messaging> messaging_;

  mutable std::mutex mu_;
  peer_directory directory_;
  std::map<uint64_t, std::string> member_questions_;  // by corr: the node asked about
  std::map<std::string, std::shared_ptr<peer_link>> links_;
  std::deque<std::string> head_queue_;
  std::map<uint64_t, std::promise<absl::StatusOr<std::string>>> head_calls_;
  std::vector<caf::actor> listeners_;

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  absl::Status done_reason_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace troupe::cluster
