#include "runtime/actor/io_work_stealing.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "caf/all.hpp"
#include "runtime/actor/system_config.hpp"
#include "tests/support/wait.hpp"

namespace troupe::actor {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using thread_reporter = caf::typed_actor<caf::reacts_to<int32_t>>;

// An eventfd as input: `push` makes it readable; a poll that finds it readable delivers one
// message to `target` through the polling worker and records which thread polled.
class fake_input final : public idle_io {
 public:
  explicit fake_input(caf::actor target) : target_(std::move(target)) {}
  ~fake_input() override {
    close(data_fd_);
    close(wake_fd_);
  }

  bool poll(caf::execution_unit* here, std::chrono::milliseconds timeout) override {
    if (held_.exchange(true)) return false;
    ++polls_;
    pollfd fds[] = {{data_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(fds, 2, static_cast<int>(timeout.count()));
    uint64_t n = 0;
    if (fds[1].revents & POLLIN) (void)!read(wake_fd_, &n, sizeof n);
    if ((fds[0].revents & POLLIN) && read(data_fd_, &n, sizeof n) == sizeof n) {
      poller_ = std::this_thread::get_id();
      caf::actor_cast<caf::strong_actor_ptr>(target_)->enqueue(
          caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                    caf::make_message(int32_t{1})),
          here);
    }
    held_.store(false);
    return true;
  }

  void wake() override {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }

  void push() {
    const uint64_t one = 1;
    (void)!write(data_fd_, &one, sizeof one);
  }

  // Held by a thread that is not a worker (as the node thread holds its inbox to drain it):
  // workers' polls are refused meanwhile.
  void hold() { held_.store(true); }
  void release() { held_.store(false); }

  std::thread::id poller() const { return poller_.load(); }
  int polls() const { return polls_; }

 private:
  caf::actor target_;
  int data_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::atomic<bool> held_{false};
  std::atomic<int> polls_{0};
  std::atomic<std::thread::id> poller_;
};

// A config whose idle workers would sleep 10 s without a wake-up: every prompt reaction below
// comes from a wake-up, never from a timeout.
std::unique_ptr<caf::actor_system_config> config_with_long_sleeps() {
  auto cfg = make_system_config({.scheduler_threads = 2});
  cfg->set("work-stealing.relaxed-sleep-duration", caf::timespan{10s});
  return cfg;
}

// Kills `actor` when a test ends, also early (else the actor system would wait for it forever).
struct killed_at_exit {
  caf::actor actor;
  ~killed_at_exit() { caf::anon_send_exit(actor, caf::exit_reason::kill); }
};

// Whether `polling` workers of `system` wait in the attached input and every other one is blocked
// on its condition variable (the scheduler's own state, read under its locks): none of them can
// then take work but what is handed to it. Waited for with a bound, never slept for.
bool workers_blocked(caf::actor_system& system, size_t polling_wanted) {
  auto* scheduler =
      dynamic_cast<caf::scheduler::coordinator<io_work_stealing>*>(&system.scheduler());
  if (scheduler == nullptr) return false;
  size_t polling = 0;
  size_t sleeping = 0;
  for (size_t i = 0; i < scheduler->num_workers(); ++i) {
    auto& w = scheduler->worker_by_id(i)->data();
    std::lock_guard<std::mutex> guard(w.waitdata.lock);
    polling += w.polling != nullptr;
    sleeping += w.waitdata.sleeping;
  }
  return polling == polling_wanted && polling + sleeping == scheduler->num_workers();
}

// An actor that reports the thread each message runs on.
thread_reporter spawn_reporter(caf::actor_system& system,
                               std::shared_ptr<std::promise<std::thread::id>> ran_on) {
  return system.spawn([ran_on](thread_reporter::pointer self) -> thread_reporter::behavior_type {
    return {[self, ran_on](int32_t) {
      ran_on->set_value(std::this_thread::get_id());
      self->quit();
    }};
  });
}

// The threads an actor's messages ran on, in order.
struct thread_log {
  std::mutex mu;
  std::vector<std::thread::id> ids;

  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return ids.size();
  }
  std::thread::id last() {
    std::lock_guard<std::mutex> lock(mu);
    return ids.back();
  }
};

caf::actor spawn_logger(caf::actor_system& system, std::shared_ptr<thread_log> log) {
  return system.spawn([log](caf::event_based_actor*) -> caf::behavior {
    return {[log](int32_t) {
      std::lock_guard<std::mutex> lock(log->mu);
      log->ids.push_back(std::this_thread::get_id());
    }};
  });
}

// A system whose idle workers sleep 10 s without a wake-up, and an input whose messages go to
// an actor that logs the threads they ran on.
struct logged_input {
  std::unique_ptr<caf::actor_system_config> cfg = config_with_long_sleeps();
  caf::actor_system system{*cfg};
  std::shared_ptr<thread_log> log = std::make_shared<thread_log>();
  caf::actor logger = spawn_logger(system, log);
  killed_at_exit guard{logger};
  std::shared_ptr<fake_input> input = std::make_shared<fake_input>(logger);
};

// With the workers idle (one in the input, the others asleep), the input's next messages are
// handled; true once one ran on the worker that polled it, within `tries`. (Another worker
// woken meanwhile, by CAF's own work, may steal a message before its poller runs it, as it
// should: that is not a handoff.)
bool ran_on_the_poller(logged_input& s, int tries) {
  for (int i = 0; i < tries; ++i) {
    // A deadline under the workers' 10 s sleeps: only a wake-up puts one in the input by then.
    if (!testing::wait_until([&] { return workers_blocked(s.system, 1); }, 5s)) {
      ADD_FAILURE() << "no idle worker polls the attached input while the others sleep";
      return false;
    }
    const size_t before = s.log->size();
    s.input->push();
    if (!testing::wait_until([&] { return s.log->size() > before; }, 5s)) {
      ADD_FAILURE() << "a message from the input was not handled";
      return false;
    }
    if (s.log->last() == s.input->poller()) return true;
  }
  return false;
}

TEST(IoWorkStealing, AMessageFromTheInputRunsOnTheWorkerThatPolledIt) {
  logged_input s;
  ASSERT_TRUE(attach_idle_io(s.system, s.input));
  // The workers asleep when the input came are woken to wait in it: one takes it, the other
  // goes back to sleep.
  EXPECT_TRUE(ran_on_the_poller(s, 5));
  detach_idle_io(s.system);
}

TEST(IoWorkStealing, WorkersRefusedByAnotherHolderOfTheInputWaitInItOnceWoken) {
  logged_input s;
  s.input->hold();
  ASSERT_TRUE(attach_idle_io(s.system, s.input));
  // Every worker found the input held and went to sleep, for 10 s.
  ASSERT_TRUE(testing::wait_until([&] { return workers_blocked(s.system, 0); }));
  s.input->release();
  wake_idle_workers(s.system);  // what the node thread does after a drain that refused a worker
  EXPECT_TRUE(ran_on_the_poller(s, 5));
  detach_idle_io(s.system);
}

TEST(IoWorkStealing, WorkEnqueuedFromOutsideWakesTheWorkerInTheInput) {
  auto cfg = config_with_long_sleeps();
  caf::actor_system system{*cfg};
  auto input = std::make_shared<fake_input>(caf::actor{});
  ASSERT_TRUE(attach_idle_io(system, input));
  // Every worker idle: one waits in the input (it polled), the other is asleep or about to be.
  ASSERT_TRUE(testing::wait_until([&] { return input->polls() > 0; }))
      << "no idle worker polls the attached input";
  for (int i = 0; i < 20; ++i) {
    auto ran_on = std::make_shared<std::promise<std::thread::id>>();
    auto reporter = spawn_reporter(system, ran_on);
    killed_at_exit guard{caf::actor_cast<caf::actor>(reporter)};
    const auto t0 = clock::now();
    caf::anon_send(reporter, int32_t{0});
    auto ran = ran_on->get_future();
    // A deadline, not a speed: a worker not woken would sleep for 10 s.
    ASSERT_EQ(ran.wait_for(5s), std::future_status::ready);
    EXPECT_LT(clock::now() - t0, 5s);
  }
  detach_idle_io(system);
}

TEST(IoWorkStealing, ABusyWorkerWithASecondJobWakesAnIdleOneToStealIt) {
  auto cfg = config_with_long_sleeps();
  caf::actor_system system{*cfg};
  // Both workers asleep first (else nothing is shown).
  ASSERT_TRUE(testing::wait_until([&] { return workers_blocked(system, 0); }));
  auto first = std::make_shared<std::promise<std::thread::id>>();
  auto second = std::make_shared<std::promise<std::thread::id>>();
  auto f1 = first->get_future().share();
  auto f2 = second->get_future().share();
  auto a = spawn_reporter(system, first);
  auto b = spawn_reporter(system, second);
  killed_at_exit guard_a{caf::actor_cast<caf::actor>(a)};
  killed_at_exit guard_b{caf::actor_cast<caf::actor>(b)};
  std::promise<bool> busy_done;  // whether both jobs ran while the worker was busy
  // The busy actor queues two jobs on its own worker, then keeps the worker until both ran
  // elsewhere (at most 20 s): they can only run if an idle worker was woken to steal them.
  auto busy =
      system.spawn([&, a, b](thread_reporter::pointer self) -> thread_reporter::behavior_type {
        return {[&, self, a, b](int32_t) {
          self->send(a, int32_t{0});
          self->send(b, int32_t{0});
          const auto until = clock::now() + 20s;
          bool both = false;
          while (!both && clock::now() < until) {
            both = f1.wait_for(0s) == std::future_status::ready &&
                   f2.wait_for(0s) == std::future_status::ready;
          }
          busy_done.set_value(both);
        }};
      });
  killed_at_exit guard_busy{caf::actor_cast<caf::actor>(busy)};
  caf::anon_send(busy, int32_t{0});
  auto done = busy_done.get_future();
  ASSERT_EQ(done.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(done.get()) << "the queued jobs did not run while their worker was busy";
}

TEST(IoWorkStealing, OneInputPerSystemAndNoneOnOtherSchedulers) {
  auto cfg = make_system_config({.scheduler_threads = 2});
  caf::actor_system system{*cfg};
  auto input = std::make_shared<fake_input>(caf::actor{});
  EXPECT_TRUE(attach_idle_io(system, input));
  EXPECT_FALSE(attach_idle_io(system, std::make_shared<fake_input>(caf::actor{})));
  detach_idle_io(system);
  EXPECT_TRUE(attach_idle_io(system, input));
  detach_idle_io(system);

  auto sharing_cfg = make_system_config({.scheduler_threads = 2, .scheduler_policy = "sharing"});
  caf::actor_system sharing{*sharing_cfg};
  EXPECT_FALSE(attach_idle_io(sharing, input));
}

}  // namespace
}  // namespace troupe::actor
