#include "runtime/checkpoint/async_writer.hpp"

#include "runtime/base/status.hpp"

namespace troupe::checkpoint {

async_writer::async_writer(checkpoint_store store)
    : store_(std::move(store)), thread_([this] { run(); }) {}

async_writer::~async_writer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::future<absl::StatusOr<file_record>> async_writer::stage(int64_t step, std::string name,
                                                             tensor::named_tensors contents) {
  auto task = std::make_shared<std::packaged_task<absl::StatusOr<file_record>()>>(
      [this, step, name = std::move(name), contents = std::move(contents)] {
        return store_.stage(step, name, contents);
      });
  std::future<absl::StatusOr<file_record>> result = task->get_future();
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back([task] { (*task)(); });
  }
  wake_.notify_one();
  return result;
}

size_t async_writer::pending() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

void async_writer::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything queued is written
      job = std::move(jobs_.front());
    }
    job();
    std::lock_guard lock(mutex_);
    jobs_.pop_front();
  }
}

absl::StatusOr<tensor::named_tensors> snapshot(const tensor::named_tensors& in,
                                               tensor::named_tensors recycled) {
  tensor::named_tensors out;
  out.metadata = in.metadata;
  const bool reuse = recycled.tensors.size() == in.tensors.size();
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const auto& [name, t] = in.tensors[i];
    tensor::tensor copy;
    if (reuse && recycled.tensors[i].first == name &&
        recycled.tensors[i].second.shape() == t.shape() &&
        recycled.tensors[i].second.type() == t.type() &&
        recycled.tensors[i].second.where().is_cpu()) {
      copy = recycled.tensors[i].second;
      TROUPE_RETURN_IF_ERROR(tensor::copy(copy, t));
    } else {
      TROUPE_ASSIGN_OR_RETURN(copy, t.to(tensor::device::cpu()));
    }
    out.tensors.emplace_back(name, std::move(copy));
  }
  return out;
}

}  // namespace troupe::checkpoint
