#include "kernels/cpu/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::kernels::cpu {
namespace {

using std::chrono::microseconds;

// Regions of 0 to 40 tasks, back to back: each task runs exactly once in its region.
void expect_every_task_once(thread_pool& pool) {
  for (int region = 0; region < 300; ++region) {
    const int tasks = region % 41;
    std::vector<std::atomic<int>> runs(tasks);
    pool.run(tasks, [&](int64_t t) { runs[t].fetch_add(1); });
    for (int t = 0; t < tasks; ++t)
      ASSERT_EQ(runs[t].load(), 1) << "region " << region << ", task " << t;
  }
}

TEST(ThreadPool, RunsEveryTaskOnceWhetherItsThreadsBlockOrSpin) {
  thread_pool blocking(3, microseconds(0));  // the workers block after every region
  expect_every_task_once(blocking);
  thread_pool spinning(2, std::chrono::seconds(1));  // they spin through all the regions
  expect_every_task_once(spinning);
  thread_pool by_default(3);
  expect_every_task_once(by_default);
  // They spin, then look on while yielding their cores (the inference engine's pool).
  thread_pool yielding(3, microseconds(0), std::chrono::seconds(1));
  expect_every_task_once(yielding);
}

TEST(ThreadPool, ADestroyedPoolStopsItsSpinningThreadsAtOnce) {
  // The workers would spin for an hour waiting for the next region: the destructor must end the
  // spin rather than wait it out (the test's timeout fails it otherwise).
  for (const auto& [spin, yielding] : {std::pair{std::chrono::hours(1), std::chrono::hours(0)},
                                       std::pair{std::chrono::hours(0), std::chrono::hours(1)}}) {
    auto pool = std::make_unique<thread_pool>(3, spin, yielding);
    std::atomic<int> ran = 0;
    pool->run(8, [&](int64_t) { ran.fetch_add(1); });
    pool.reset();
    EXPECT_EQ(ran.load(), 8);
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
