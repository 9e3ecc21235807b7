#include "runtime/comm/collective_queue.hpp"

namespace troupe::comm {

collective_queue::collective_queue(communicator& group)
    : group_(group), thread_([this] { run(); }) {}

collective_queue::~collective_queue() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void collective_queue::allreduce(tensor::tensor buffer, reduce_op op) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({std::move(buffer), op});
  }
  wake_.notify_one();
}

absl::Status collective_queue::wait() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
  absl::Status result = failed_;
  failed_ = absl::OkStatus();
  return result;
}

void collective_queue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and everything queued is done
    job next = std::move(jobs_.front());
    jobs_.pop_front();
    if (failed_.ok()) {
      busy_ = true;
      lock.unlock();
      absl::Status s = group_.allreduce(next.buffer, next.op);
      lock.lock();
      busy_ = false;
      if (failed_.ok()) failed_ = s;
    }
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace troupe::comm
