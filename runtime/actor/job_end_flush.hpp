#pragma once

#include <memory>

namespace troupe::actor {

/// Output that gathers what a scheduler worker's job sends (frames for one peer node) and sends
/// it all at once when the job ends: one ZeroMQ message for many actor messages when an actor
/// answers a burst of requests in one turn. Made with make_shared (a job holds it weakly).
class batched_output : public std::enable_shared_from_this<batched_output> {
 public:
  virtual ~batched_output() = default;
  /// Sends whatever is gathered. Any thread.
  virtual void flush() = 0;
};

/// True while the calling thread runs a job of a scheduler that flushes at the job's end
/// (io_work_stealing workers); elsewhere (the node thread, detached and blocking actors, the main
/// thread) output must be flushed at once.
[[nodiscard]] bool flushes_at_job_end();

/// Has `out` flushed when the calling thread's current job ends (once, however often it is
/// called in the job). Only while `flushes_at_job_end()`.
void flush_at_job_end(batched_output& out);

/// Sends what the calling thread's current job queued so far, without waiting for its end: for
/// a message whose receiver should start on it while the job goes on. Elsewhere a no-op.
void flush_job_output();

/// For the scheduler: a job starts on the calling thread; and it ended (flushes what it queued).
void job_begins();
void job_ends();

}  // namespace troupe::actor
