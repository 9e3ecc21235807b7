#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/base/even_split.hpp"
#include "runtime/tensor/dtype.hpp"

namespace troupe::comm {

/// The transfers of one Gloo group (used by gloo_communicator only): ring collectives,
/// broadcast and send/recv on Gloo's TCP transport (its pairs, framing and epoll loop) with
/// buffers this class owns, instead of Gloo's algorithm objects. Debian's Gloo cannot interrupt
/// an algorithm blocked on a stopped peer, but every wait here is on a buffer abort() can wake,
/// so a survivor is released at once (docs/elastic.md).
///
/// Debian's Gloo fails a pair's pending transfers when its connection breaks, but not the
/// receive it is in the middle of nor a send still queued: a wait on those would sleep out the
/// whole timeout. So a watch receive that no peer fills is posted on every pair; Gloo fails it
/// with any pair, and a thread waiting on it then closes the connections and wakes every wait.
///
/// Calls are made one at a time, in the same order on every rank; each throws
/// gloo::IoException when a transfer fails, times out or is aborted. abort() and close() may be
/// called from any thread.
class gloo_ring {
 public:
  /// `context` is connected to every peer.
  gloo_ring(std::shared_ptr<gloo::rendezvous::Context> context, int rank, int size,
            std::chrono::milliseconds timeout);
  ~gloo_ring();
  gloo_ring(const gloo_ring&) = delete;
  gloo_ring& operator=(const gloo_ring&) = delete;

  /// Sums chunk `rank` of `n` elements split as even_split{n, size} over every rank, in place;
  /// the other chunks are working memory. T: float, int32_t or tensor::bf16.
  template <class T>
  void reduce_scatter(T* data, int64_t n);
  /// Fills every chunk of `bytes` split as even_split{n, size} (elements of `element` bytes)
  /// from the rank that holds it (chunk r from rank r), in place.
  void allgather(char* data, int64_t n, size_t element);
  /// Along the ring from `root` (root + 1 receives from it, root + 2 from root + 1, ...), in
  /// pieces that each rank passes on as they arrive.
  void broadcast(void* data, size_t bytes, int root);
  /// broadcast() in pieces of `piece` bytes, each reported to `on_piece` in order: on a receiver
  /// when it has arrived (and been passed on), on the root once the piece before it has gone
  /// (communicator::broadcast_in_pieces).
  void broadcast(void* data, size_t bytes, int root, size_t piece,
                 const std::function<void(size_t offset, size_t bytes)>& on_piece);
  void send(void* data, size_t bytes, int peer, uint32_t tag);
  void recv(void* data, size_t bytes, int peer, uint32_t tag);
  /// One send or receive of exchange(): `bytes` at `data`, to or from `peer`.
  struct piece {
    void* data;
    size_t bytes;
    int peer;
    uint32_t tag;
  };
  /// Posts every receive, then every send, then waits for each: a pair keeps its messages in
  /// order, so a peer that has one of these sends has this rank's receives from it posted.
  void exchange(const std::vector<piece>& sends, const std::vector<piece>& recvs);

  /// Closes the connections, then wakes every wait; every later call fails at once.
  void abort();
  /// Closes the connections: the peers' waits on this rank fail within a round trip.
  void close() { context_->closeConnections(); }
  [[nodiscard]] bool aborted() const { return aborted_.load(); }

 private:
  class tracked_buffer;
  // Fails every post and wait, now and later, with `reason` (the first reason stands): closes
  // the connections, then wakes the waits.
  void stop(const std::string& reason);
  void watch_peers();
  uint64_t next_slot();
  [[nodiscard]] int right() const { return (rank_ + 1) % size_; }
  [[nodiscard]] int left() const { return (rank_ + size_ - 1) % size_; }
  [[nodiscard]] int ring_index(int offset) const {
    return ((rank_ + offset) % size_ + size_) % size_;
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 1;
  std::vector<char> scratch_;  // the reduce-scatter's receive halves
  std::atomic<bool> aborted_{false};
  std::mutex buffer_mutex_;  // live_, stop_reason_
  std::vector<gloo::transport::UnboundBuffer*> live_;
  std::atomic<bool> stopped_{false};
  std::string stop_reason_;  // written once, before stopped_
  std::unique_ptr<gloo::transport::UnboundBuffer> watch_;
  std::thread watcher_;
};

}  // namespace troupe::comm
