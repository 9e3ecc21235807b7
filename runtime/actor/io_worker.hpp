#pragma once

// The scheduler worker of io_work_stealing (included by io_work_stealing.hpp, so that every use
// of caf::scheduler::worker<io_work_stealing> sees it).
//
// CAF 0.17's generic worker tags each job with its actor's id for CAF's logger before it runs
// it, through a dynamic_cast from `resumable*` to `abstract_actor*`: a cross-cast through the
// actor's whole class hierarchy, about 50 ns per job on the development machine, 7% of an
// in-process round trip. Debian builds CAF with its logging compiled out, so the id is never
// read. This worker is the same loop (the policy's dequeue, before_resume, resume,
// after_resume, then keep, finish or release the job) without the tag; it offers what
// caf::scheduler::coordinator and the work-stealing policy ask of a worker.

#include <cstddef>
#include <thread>

#include "caf/actor_system.hpp"
#include "caf/detail/set_thread_name.hpp"
#include "caf/execution_unit.hpp"
#include "caf/resumable.hpp"

namespace caf::scheduler {

template <class Policy>
class coordinator;

template <>
class worker<troupe::actor::io_work_stealing> : public execution_unit {
 public:
  using policy = troupe::actor::io_work_stealing;
  using job_ptr = resumable*;
  using coordinator_ptr = coordinator<policy>*;
  using policy_data = policy::worker_data;

  worker(size_t worker_id, coordinator_ptr parent, const policy_data& init, size_t throughput)
      : execution_unit(&parent->system()),
        max_throughput_(throughput),
        id_(worker_id),
        parent_(parent),
        data_(init) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  void start() {
    thread_ = std::thread{[this] {
      logger::set_current_actor_system(&system());
      detail::set_thread_name("caf.worker");
      system().thread_started();
      run();
      system().thread_terminates();
    }};
  }

  /// A job from another thread.
  void external_enqueue(job_ptr job) { policy_.external_enqueue(this, job); }

  /// A job from the job this worker runs now; only from this worker's thread.
  void exec_later(job_ptr job) override { policy_.internal_enqueue(this, job); }

  coordinator_ptr parent() { return parent_; }
  size_t id() const { return id_; }
  std::thread& get_thread() { return thread_; }
  policy_data& data() { return data_; }
  size_t max_throughput() { return max_throughput_; }

 private:
  void run() {
    for (;;) {
      job_ptr job = policy_.dequeue(this);
      policy_.before_resume(this, job);
      const resumable::resume_result result = job->resume(this, max_throughput_);
      policy_.after_resume(this, job);
      switch (result) {
        case resumable::resume_later:
          policy_.resume_job_later(this, job);  // the queue keeps the reference
          break;
        case resumable::done:
          policy_.after_completion(this, job);
          intrusive_ptr_release(job);
          break;
        case resumable::awaiting_message:
          intrusive_ptr_release(job);  // its next message enqueues it again
          break;
        case resumable::shutdown_execution_unit:
          policy_.after_completion(this, job);
          policy_.before_shutdown(this);
          return;
      }
    }
  }

  size_t max_throughput_;
  std::thread thread_;
  size_t id_;
  coordinator_ptr parent_;
  policy_data data_;
  policy policy_;
};

}  // namespace caf::scheduler
