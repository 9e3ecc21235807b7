#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include "runtime/actor/idle_io.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// A node's ROUTER, where its peers' frames arrive, held by one thread at a time: an idle CAF
/// worker waits in it (actor::io_work_stealing), so that a frame's actor runs on the thread
/// that received it; the node agent's thread drains it between its turns, in case every worker
/// stays busy, or polls it alone when the scheduler cannot.
class peer_inbox final : public actor::idle_io {
 public:
  /// Handles one message's frames; `here` is the worker that received them (or nullptr).
  using frame_handler =
      std::function<void(const std::vector<zmq::message_t>& frames, caf::execution_unit* here)>;

  peer_inbox(zmq::socket_t router, frame_handler handler);
  ~peer_inbox() override;
  peer_inbox(const peer_inbox&) = delete;
  peer_inbox& operator=(const peer_inbox&) = delete;

  bool poll(caf::execution_unit* here, std::chrono::milliseconds timeout) override;
  void wake() override;

  /// The socket, for a thread that polls it along with its own sockets because no worker does.
  [[nodiscard]] zmq::pollitem_t poll_item() { return {router_.handle(), 0, ZMQ_POLLIN, 0}; }

  /// Waits for the thread in the inbox to leave and closes the socket; later polls return false.
  void close();

  /// Whether a poll was refused (another thread held the inbox) since the last call: a worker
  /// refused while the node thread drained it went to sleep, and no thread waits in it now.
  [[nodiscard]] bool take_refused() { return refused_.exchange(false, std::memory_order_acq_rel); }

 private:
  // Handles the frames queued now (a bounded number); returns how many messages.
  int drain(caf::execution_unit* here);

  std::atomic<bool> held_{false};
  std::atomic<bool> refused_{false};
  bool closed_ = false;  // the holder's
  zmq::socket_t router_;
  int wake_fd_ = -1;
  frame_handler handler_;
};

}  // namespace troupe::cluster
