#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace troupe::actors {

/// One thread that runs posted jobs in order: an actor's blocking work (a step waiting in a
/// collective) runs here, so that the actor's own thread stays free for the messages that must
/// reach it meanwhile (an abort of the group the step waits on).
class job_thread {
 public:
  job_thread() : thread_([this] { run(); }) {}
  /// Runs what is posted, then stops the thread.
  ~job_thread() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  job_thread(const job_thread&) = delete;
  job_thread& operator=(const job_thread&) = delete;

  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace troupe::actors
