#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/comm/communicator.hpp"

namespace troupe::comm {

/// Runs one group's collectives on a thread of its own, in submission order, so that the caller
/// starts one and goes on computing: gradient buckets all-reduced while the backward pass
/// continues with the layers below, or (ZeRO-3) the next block's parameters gathered while this
/// one computes. Every rank must queue the same sequence (collectives pair up by order), and
/// nobody else may use the group between the first submission and wait().
class collective_queue {
 public:
  /// A unit of work on the queue's thread: its collectives and what goes with them.
  using job = std::function<absl::Status(communicator& group)>;

  explicit collective_queue(communicator& group);
  /// Finishes what is queued, then stops the thread.
  ~collective_queue();
  collective_queue(const collective_queue&) = delete;
  collective_queue& operator=(const collective_queue&) = delete;

  /// Queues an in-place all-reduce of `buffer`, which must stay untouched until wait().
  void allreduce(tensor::tensor buffer, reduce_op op);
  /// Queues `work`; returns its ticket for wait(ticket).
  uint64_t submit(job work);

  /// Blocks until everything queued is done. Returns the first error; after one, the rest of
  /// the queue is skipped (the group refuses work anyway).
  [[nodiscard]] absl::Status wait();
  /// Blocks until the job of `ticket` and every one before it are done (later ones may still
  /// run). Returns the first error so far, which stays for wait().
  [[nodiscard]] absl::Status wait(uint64_t ticket);

 private:
  void run();

  communicator& group_;
  std::mutex mutex_;
  std::condition_variable wake_, progress_;
  std::deque<job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  absl::Status failed_;
  std::thread thread_;
};

}  // namespace troupe::comm
