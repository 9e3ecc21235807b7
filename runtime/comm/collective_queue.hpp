#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/comm/communicator.hpp"

namespace troupe::comm {

/// Runs one group's all-reduces on a thread of its own, in submission order, so that the caller
/// starts one and goes on computing: gradient buckets all-reduced while the backward pass
/// continues with the layers below. Every rank must queue the same sequence (collectives pair up
/// by order), and nobody else may use the group between the first allreduce() and wait().
class collective_queue {
 public:
  explicit collective_queue(communicator& group);
  /// Finishes what is queued, then stops the thread.
  ~collective_queue();
  collective_queue(const collective_queue&) = delete;
  collective_queue& operator=(const collective_queue&) = delete;

  /// Queues an in-place all-reduce of `buffer`, which must stay untouched until wait().
  void allreduce(tensor::tensor buffer, reduce_op op);

  /// Blocks until everything queued is done. Returns the first error; after one, the rest of
  /// the queue is skipped (the group refuses work anyway).
  [[nodiscard]] absl::Status wait();

 private:
  struct job {
    tensor::tensor buffer;
    reduce_op op;
  };
  void run();

  communicator& group_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<job> jobs_;
  bool busy_ = false;
  bool stop_ = false;
  absl::Status failed_;
  std::thread thread_;
};

}  // namespace troupe::comm
