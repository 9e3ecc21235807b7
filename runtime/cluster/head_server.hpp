#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "runtime/cluster/curve_gate.hpp"
#include "runtime/cluster/head_logic.hpp"
#include "runtime/cluster/head_view.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/metrics/series_history.hpp"
#include "runtime/run/event_log.hpp"
#include "runtime/run/stuck_alerts.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// The head: one thread serving `head_logic` on a ZeroMQ ROUTER. Frames that are oversized,
/// malformed, of an unknown type or another protocol version are answered with an error and
/// counted in `troupe_rejected_frames_total{reason}`; the connection that sent them keeps
/// working. With CURVE credentials the socket is a CURVE server behind the context's curve_gate;
/// a handshake it refuses (a client without CURVE, or with another key) is counted in
/// `troupe_auth_refused_total{reason}` and logged. Joins, refusals and deaths go to the event log.
class head_server {
 public:
  /// Binds `listen` ("tcp://HOST:PORT", port 0 picks one) and starts serving.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<head_server>> start(
      zmq::context_t& context, std::string listen, head_options options, size_t max_frame_bytes,
      metrics::registry& metrics, run::event_log& events);

  /// Stops serving (see `stop`).
  ~head_server();

  /// The bound endpoint, e.g. "tcp://127.0.0.1:43121".
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

  /// Tells every worker to shut down with `reason`, then stops the thread. Idempotent.
  void stop(absl::string_view reason = "the job ended");

  /// Tells worker `node` to shut down (head_logic::retire), from any thread; done within the
  /// loop's next turn (20 ms).
  void retire(std::string node, std::string reason);

  /// The status and the cluster's metrics, for other threads (published 4 times a second).
  [[nodiscard]] const head_view& view() const { return view_; }

  /// The cluster's metrics sampled every second, for charts.
  [[nodiscard]] const metrics::series_history& history() const { return history_; }

 private:
  head_server(zmq::socket_t socket, std::unique_ptr<handshake_watch> handshakes,
              std::shared_ptr<curve_gate> gate, std::string endpoint, head_options options,
              size_t max_frame_bytes, metrics::registry& metrics, run::event_log& events);
  // The head's thread: frames, and every tick_interval the membership's and the store's
  // deadlines.
  void loop();
  static constexpr std::chrono::milliseconds tick_interval{50};
  void serve(const std::vector<zmq::message_t>& frames);
  void deliver(const std::vector<head_logic::outgoing>& out);
  void report();
  void reject(const std::string& identity, const absl::Status& why);
  void count_refused_handshakes();
  // Publishes the view (4 times a second).
  void observe(std::chrono::steady_clock::time_point now);
  // The recorder thread: every second, the cluster's merged metrics into the history and the
  // stuck alerts, off the head's thread (at thousands of members a merge takes long enough to
  // delay heartbeats).
  void record_loop();

  std::shared_ptr<curve_gate> gate_;  // null without CURVE
  zmq::socket_t socket_;
  std::unique_ptr<handshake_watch> handshakes_;
  std::string endpoint_;
  head_logic logic_;
  size_t max_frame_bytes_;
  metrics::registry& metrics_;
  run::event_log& events_;
  head_view view_;
  metrics::series_history history_;
  run::stuck_alerts stuck_;  // warns of actors and trainer groups that became stuck
  std::chrono::steady_clock::time_point next_publish_{};
  std::thread recorder_;
  uint64_t history_refused_ = 0;  // the history's refused() already counted
  std::mutex retire_mu_;
  std::vector<std::pair<std::string, std::string>> to_retire_;  // (node, reason)
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;               // stopping_ is set under it, for stop_cv_
  std::condition_variable stop_cv_;  // the recorder waits on it between rounds
  std::string stop_reason_;
  std::thread thread_;
};

}  // namespace troupe::cluster
