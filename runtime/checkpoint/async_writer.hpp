#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::checkpoint {

/// Persists checkpoint files on its own thread, in submission order. A trainer copies its state
/// into fresh host tensors (the snapshot), hands them over and continues at once; the time it is
/// blocked per checkpoint is the copy, not the write, the fsync and the sha256.
class async_writer {
 public:
  explicit async_writer(checkpoint_store store);
  /// Finishes every queued write, then stops the thread.
  ~async_writer();
  async_writer(const async_writer&) = delete;
  async_writer& operator=(const async_writer&) = delete;

  /// Queues `contents` as file `name` of step `step`; the future holds its record or the error.
  /// `contents` must not be modified afterwards (snapshot() makes such a copy).
  [[nodiscard]] std::future<absl::StatusOr<file_record>> stage(int64_t step, std::string name,
                                                               tensor::named_tensors contents);

  /// Files queued and not yet written.
  [[nodiscard]] size_t pending() const;

 private:
  void run();

  checkpoint_store store_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

/// A deep copy of `in` on the host: what a trainer hands to the writer. `recycled`, a snapshot
/// whose write has finished, lends its memory when its tensors have the same names and shapes
/// (fresh pages cost a fault each; reused ones make the copy a plain memcpy).
[[nodiscard]] absl::StatusOr<tensor::named_tensors> snapshot(const tensor::named_tensors& in,
                                                             tensor::named_tensors recycled = {});

}  // namespace troupe::checkpoint
