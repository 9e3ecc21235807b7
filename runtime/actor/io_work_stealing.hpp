#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "caf/actor_system.hpp"
#include "caf/policy/work_stealing.hpp"
#include "caf/scheduler/coordinator.hpp"
#include "runtime/actor/idle_io.hpp"
#include "runtime/actor/job_end_flush.hpp"

namespace troupe::actor {

/// troupe's CAF scheduler policy: CAF's work stealing, except for how an idle worker waits.
///
/// CAF 0.17's workers poll their queue with 50 us sleeps for a while after each job before they
/// block, so work handed over from another thread (a frame from a peer, a timer) waits 50-100 us
/// to be seen, and the sleeps keep the CPUs busy. Here an idle worker spins briefly
/// (`work-stealing.aggressive-*`) and then blocks at once:
///
/// - one worker in the attached `idle_io` (the node's peer socket): a frame from a peer is
///   decoded, and its actor runs, on the worker that received it, with no thread in between;
/// - the others on their condition variable, woken by whoever enqueues work for them.
///
/// A busy worker that queues a second job wakes an idle worker to steal it. Around every job
/// the worker calls job_begins/job_ends (job_end_flush), so what the job sent to other
/// processes leaves together when it ends. The blocking waits time out after
/// `work-stealing.relaxed-sleep-duration` (make_system_config: idle_recheck), so that a worker
/// that found the input taken by another thread, which then went on to a long job, takes it over
/// (the node thread drains the input at its turns too).
class io_work_stealing : public caf::policy::work_stealing {
 public:
  using base = caf::policy::work_stealing;

  /// How long an idle worker blocks before it looks again with no wake-up. Every wake-up of an
  /// idle thread takes a core from the work of others: CAF's 10 ms, in the 3 processes of an RLHF
  /// run with 2 workers each, woke 600 times a second and slowed a generation sharing the cores
  /// (docs/benchmarks.md, rlhf_bench).
  static constexpr std::chrono::milliseconds idle_recheck{100};

  struct coordinator_data : base::coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator* parent)
        : base::coordinator_data(parent) {}
    std::mutex io_mu;
    std::shared_ptr<idle_io> io;              // under io_mu
    std::atomic<uint64_t> io_attachments{0};  // so that a worker going to sleep sees a new one
  };

  struct worker_data : base::worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator* parent)
        : base::worker_data(parent) {}
    worker_data(const worker_data& other) : base::worker_data(other) {}
    std::shared_ptr<idle_io> polling;  // under waitdata.lock: the input this worker waits in
    bool woken = false;                // under waitdata.lock: to steal, or to take the input
    std::atomic<bool> idle{false};     // from its last look for work until it has work again
  };

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    d(self).queue.append(job);
    wake(self);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    auto& w = d(self);
    const bool had_work = !w.queue.empty();
    w.queue.prepend(job);
    if (had_work) wake_idle_peer(self);  // two jobs queued here: one can run elsewhere
  }

  // Output a job queues for other processes leaves when the job ends (batched_output).
  template <class Worker>
  void before_resume(Worker*, caf::resumable*) {
    job_begins();
  }

  template <class Worker>
  void after_resume(Worker*, caf::resumable*) {
    job_ends();
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& w = d(self);
    const auto& spin = w.strategies[0];
    for (size_t i = 0; i < spin.attempts; i += spin.step_size) {
      if (auto* job = w.queue.take_head()) return job;
      if (i % spin.steal_interval == 0) {
        if (auto* job = try_steal(self)) return job;
      }
    }
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(w.strategies[2].sleep_duration);
    auto& attachments = d(self->parent()).io_attachments;
    for (;;) {
      if (auto* job = w.queue.take_head()) return job;
      // Idle before the last look at the others' queues: a busy worker that queues a second job
      // after that look sees it and wakes this one (wake_idle_peer; `woken` if it has not
      // blocked yet), so the job does not wait for the timeout.
      w.idle.store(true, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with wake_idle_peer's
      if (auto* job = steal_from_any(self)) {
        w.idle.store(false);
        return job;
      }
      const uint64_t seen = attachments.load();
      std::shared_ptr<idle_io> io = attached(self);
      if (io == nullptr || !block_in(self, std::move(io), timeout)) {
        std::unique_lock<std::mutex> guard(w.waitdata.lock);
        w.waitdata.sleeping = true;
        w.waitdata.cv.wait_for(guard, w.strategies[2].sleep_duration, [&] {
          return !w.queue.empty() || w.woken || attachments.load() != seen;
        });
        w.woken = false;
        w.waitdata.sleeping = false;
      }
      w.idle.store(false);
    }
  }

  /// Wakes worker `self` if it blocks, or makes it look again before it blocks if it is about to;
  /// true if it did.
  template <class Worker>
  static bool wake(Worker* self) {
    auto& w = d(self);
    std::lock_guard<std::mutex> guard(w.waitdata.lock);
    if (w.waitdata.sleeping) {
      w.woken = true;
      w.waitdata.cv.notify_one();
      return true;
    }
    if (w.polling) {
      w.polling->wake();
      return true;
    }
    if (w.idle.load()) {
      w.woken = true;  // seen under the lock before it polls or sleeps
      return true;
    }
    return false;
  }

 private:
  // Before blocking, and after each wake-up, every other worker's queue is looked at (a worker
  // woken to steal must find the job whichever worker queued it).
  template <class Worker>
  static caf::resumable* steal_from_any(Worker* self) {
    auto* parent = self->parent();
    const size_t n = parent->num_workers();
    for (size_t k = 1; k < n; ++k) {
      if (auto* job = d(parent->worker_by_id((self->id() + k) % n)).queue.take_tail()) return job;
    }
    return nullptr;
  }

  template <class Worker>
  static std::shared_ptr<idle_io> attached(Worker* self) {
    auto& c = d(self->parent());
    std::lock_guard<std::mutex> guard(c.io_mu);
    return c.io;
  }

  // Waits in `io`; false if another thread holds it.
  template <class Worker>
  static bool block_in(Worker* self, std::shared_ptr<idle_io> io,
                       std::chrono::milliseconds timeout) {
    auto& w = d(self);
    {
      std::lock_guard<std::mutex> guard(w.waitdata.lock);
      if (!w.queue.empty() || w.woken) {  // work came since the last look: no wake-up would come
        w.woken = false;
        return true;
      }
      w.polling = io;
    }
    const bool polled = io->poll(self, timeout);
    std::lock_guard<std::mutex> guard(w.waitdata.lock);
    w.polling.reset();
    return polled;
  }

  template <class Worker>
  static void wake_idle_peer(Worker* self) {
    auto* parent = self->parent();
    const size_t n = parent->num_workers();
    // The job queued before, the idle flags read after: a peer that went idle after its last
    // look at this queue is seen here (dequeue's fence).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (size_t k = 1; k < n; ++k) {
      auto* peer = parent->worker_by_id((self->id() + k) % n);
      if (d(peer).idle.load(std::memory_order_relaxed) && wake(peer)) return;
    }
  }
};

/// The scheduler module for `caf::actor_system_config::module_factories`.
[[nodiscard]] caf::actor_system::module* make_io_work_stealing(caf::actor_system& system);

/// Wakes `system`'s blocked workers (each looks for work, then for the attached input).
void wake_idle_workers(caf::actor_system& system);

/// Lets `system`'s idle workers wait in `io` (the sleeping ones are woken to). False if the system
/// does not run io_work_stealing or has an input attached already (then the caller must poll `io`
/// itself).
[[nodiscard]] bool attach_idle_io(caf::actor_system& system, std::shared_ptr<idle_io> io);

/// Stops handing `system`'s idle workers the attached input. Workers already in it return at
/// their next wake-up; the input must refuse polls (return false) before it goes away.
void detach_idle_io(caf::actor_system& system);

}  // namespace troupe::actor

#include "runtime/actor/io_worker.hpp"  // IWYU pragma: export
