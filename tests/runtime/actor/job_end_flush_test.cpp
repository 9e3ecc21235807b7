#include "runtime/actor/job_end_flush.hpp"

#include <future>

#include <gtest/gtest.h>

#include "caf/all.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::actor {
namespace {

using namespace std::chrono_literals;

// Counts its flushes.
class counting_output final : public batched_output {
 public:
  void flush() override { flushes_.fetch_add(1); }
  int flushes() const { return flushes_.load(); }

 private:
  std::atomic<int> flushes_{0};
};

// Runs one message on an actor of `system` that queues output on `out` twice and reports whether
// its thread flushes at the job's end and how many flushes had happened by then.
std::pair<bool, int> queue_in_a_job(caf::actor_system& system,
                                    const std::shared_ptr<counting_output>& out) {
  auto result = std::make_shared<std::promise<std::pair<bool, int>>>();
  auto future = result->get_future();
  auto a = system.spawn([out, result](caf::event_based_actor* self) -> caf::behavior {
    return {[self, out, result](int32_t) {
      const bool deferred = flushes_at_job_end();
      if (deferred) {
        flush_at_job_end(*out);
        flush_at_job_end(*out);  // listed once
      }
      result->set_value({deferred, out->flushes()});
      self->quit();
    }};
  });
  caf::anon_send(a, int32_t{0});
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
  return future.get();
}

TEST(JobEndFlush, TroupesWorkersFlushOnceWhenTheJobEnds) {
  auto cfg = make_system_config({.scheduler_threads = 2});
  caf::actor_system system{*cfg};
  auto out = std::make_shared<counting_output>();
  const auto [deferred, flushes_during_job] = queue_in_a_job(system, out);
  EXPECT_TRUE(deferred);
  EXPECT_EQ(flushes_during_job, 0);  // not while the handler runs
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (out->flushes() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(out->flushes(), 1);
}

// Counts its flushes, and says when the second has come.
class second_flush_output final : public batched_output {
 public:
  void flush() override {
    if (++flushes_ == 2) second_.set_value();
  }
  std::future<void> second() { return second_.get_future(); }

 private:
  std::atomic<int> flushes_{0};
  std::promise<void> second_;
};

// flush_job_output sends what the job queued so far (the RL controller's weight sync, before it
// makes the step's requests); what it queues afterwards still leaves at the job's end.
TEST(JobEndFlush, AJobCanSendWhatItQueuedSoFar) {
  auto cfg = make_system_config({.scheduler_threads = 2});
  caf::actor_system system{*cfg};
  auto out = std::make_shared<second_flush_output>();
  auto second = out->second();
  auto during = std::make_shared<std::promise<bool>>();
  auto during_future = during->get_future();
  auto a = system.spawn([out, during](caf::event_based_actor* self) -> caf::behavior {
    return {[self, out, during](int32_t) {
      flush_at_job_end(*out);
      flush_job_output();
      flush_at_job_end(*out);  // listed anew: the flush above emptied the list
      during->set_value(true);
      self->quit();
    }};
  });
  caf::anon_send(a, int32_t{0});
  ASSERT_EQ(during_future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(second.wait_for(10s), std::future_status::ready) << "one flush in, one at the end";
  flush_job_output();  // outside a job: nothing queued, nothing happens
}

TEST(JobEndFlush, OtherThreadsAndSchedulersFlushAtOnce) {
  EXPECT_FALSE(flushes_at_job_end());  // the test's own thread
  auto cfg = make_system_config({.scheduler_threads = 2, .scheduler_policy = "sharing"});
  caf::actor_system system{*cfg};
  auto out = std::make_shared<counting_output>();
  EXPECT_FALSE(queue_in_a_job(system, out).first);
}

}  // namespace
}  // namespace troupe::actor
