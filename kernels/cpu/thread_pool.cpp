#include "kernels/cpu/thread_pool.hpp"

#include <chrono>

#include <sched.h>

namespace troupe::kernels::cpu {
namespace {
// Looks while `waiting()`: for `spin` at full speed, then for `yielding` more giving the core to
// any other runnable thread between looks. The next parallel region of a loop of kernels (the
// decoder's iterations) comes sooner than a blocked thread would wake.
template <class Pred>
void spin_while(std::chrono::microseconds spin, std::chrono::microseconds yielding, Pred waiting) {
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  const auto until = spin_until + yielding;
  while (waiting()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return;
    if (now >= spin_until) {
      sched_yield();
    } else {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
}
}  // namespace

thread_pool::thread_pool(int threads, std::chrono::microseconds spin,
                         std::chrono::microseconds yielding)
    : spin_(spin), yielding_(yielding) {
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] { work(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    ++generation_;  // a spinning worker stops spinning at once
  }
  wake_.notify_all();
  for (auto& t : workers_)
    t.join();
}

void thread_pool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    tasks_ = tasks;
    next_ = 0;
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain();
  spin_while(spin_, yielding_, [this] { return busy_.load(std::memory_order_acquire) != 0; });
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return busy_ == 0; });
  fn_ = nullptr;
}

void thread_pool::drain() {
  for (;;) {
    int64_t task;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= tasks_) return;
      task = next_++;
    }
    (*fn_)(task);
  }
}

void thread_pool::work(int) {
  uint64_t seen = 0;
  for (;;) {
    spin_while(spin_, yielding_,
               [&] { return generation_.load(std::memory_order_acquire) == seen; });
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain();
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_.notify_one();
  }
}

}  // namespace troupe::kernels::cpu
