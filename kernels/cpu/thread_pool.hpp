#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::kernels::cpu {

/// A fixed set of threads that split index ranges. Kernels take a pool pointer; nullptr runs
/// serially on the caller (what a caller that already runs one kernel per core passes). Between
/// regions a worker spins for `spin` (50 us by default) before it blocks, and so does the caller
/// waiting for the workers: a loop of regions (the decoder's iterations) calls again sooner than a
/// blocked thread wakes, which on a virtual machine can take longer than a region. Then, for
/// `yielding` (none by default), it goes on looking but yields its core between looks, so that a
/// loop whose serial parts outlast the spin (the decoder's sampling and scheduling) finds its
/// threads awake, while another thread that wants the core gets it. Longer full spins cost more
/// than they gain where other processes share the cores (docs/benchmarks.md, rlhf_bench); tests
/// pass 0 to make the workers block after every region.
class thread_pool {
 public:
  static constexpr std::chrono::microseconds default_spin{50};

  /// `threads` workers including the caller, at least 1.
  explicit thread_pool(int threads, std::chrono::microseconds spin = default_spin,
                       std::chrono::microseconds yielding = std::chrono::microseconds(0));
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(task) for every task in [0, tasks), spread over the threads; returns when all are
  /// done. Task t always runs whole on one thread, so results do not depend on the thread count.
  void run(int64_t tasks, const std::function<void(int64_t)>& fn);

 private:
  void work(int index);
  void drain();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t tasks_ = 0;
  int64_t next_ = 0;
  std::atomic<int> busy_ = 0;             // changed under mutex_, read by a spinning caller
  std::atomic<uint64_t> generation_ = 0;  // changed under mutex_, read by a spinning worker
  bool stop_ = false;
  const std::chrono::microseconds spin_;
  const std::chrono::microseconds yielding_;
};

/// Runs fn(task) for every task on `pool`, or serially when pool is nullptr.
inline void parallel_for(thread_pool* pool, int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (pool == nullptr || pool->size() == 1 || tasks <= 1) {
    for (int64_t t = 0; t < tasks; ++t)
      fn(t);
  } else {
    pool->run(tasks, fn);
  }
}

}  // namespace troupe::kernels::cpu
