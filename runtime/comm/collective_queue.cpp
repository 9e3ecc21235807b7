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
  submit([buffer = std::move(buffer), op](communicator& group) {
    return group.allreduce(buffer, op);
  });
}

uint64_t collective_queue::submit(job work) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(work));
    ticket = ++submitted_;
  }
  wake_.notify_one();
  return ticket;
}

absl::Status collective_queue::wait() {
  std::unique_lock lock(mutex_);
  progress_.wait(lock, [this] { return completed_ == submitted_; });
  return std::exchange(failed_, absl::OkStatus());
}

absl::Status collective_queue::wait(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  progress_.wait(lock, [&] { return completed_ >= ticket; });
  return failed_;
}

void collective_queue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and everything queued is done
    job next = std::move(jobs_.front());
    jobs_.pop_front();
    if (failed_.ok()) {
      lock.unlock();
      absl::Status s = next(group_);
      lock.lock();
      if (failed_.ok()) failed_ = s;
    }
    ++completed_;
    progress_.notify_all();
  }
}

}  // namespace troupe::comm
