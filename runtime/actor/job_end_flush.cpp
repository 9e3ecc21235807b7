#include "runtime/actor/job_end_flush.hpp"

#include <vector>

namespace troupe::actor {
namespace {

// An output a job queued on; `raw` spares the weak reference's atomics when it is listed already.
struct listed_output {
  const batched_output* raw;
  std::weak_ptr<batched_output> weak;
};

struct job_state {
  bool running = false;
  std::vector<listed_output> to_flush;
};

// Initial-exec: read at every job's start and end, and libtroupe_core is linked, never dlopened,
// so its thread-locals sit at a fixed offset instead of behind __tls_get_addr.
thread_local job_state current __attribute__((tls_model("initial-exec")));

}  // namespace

bool flushes_at_job_end() {
  return current.running;
}

void flush_at_job_end(batched_output& out) {
  auto& list = current.to_flush;
  // A job talks to few peers: a linear look beats a set. An entry whose output died may name a
  // new one at the same address: it is replaced.
  for (auto& x : list) {
    if (x.raw != &out) continue;
    if (x.weak.expired()) x.weak = out.weak_from_this();
    return;
  }
  list.push_back({&out, out.weak_from_this()});
}

void job_begins() {
  current.running = true;
}

// Flushes every output the current job queued on.
static void flush_listed() {
  if (current.to_flush.empty()) return;  // most jobs send nothing to other processes
  // Swapped out first: a flush may itself queue output (it then flushes at once).
  std::vector<listed_output> list;
  list.swap(current.to_flush);
  for (auto& x : list) {
    if (auto out = x.weak.lock()) out->flush();
  }
  list.clear();
  if (current.to_flush.empty()) current.to_flush.swap(list);  // keep the capacity
}

void flush_job_output() {
  if (current.running) flush_listed();
}

void job_ends() {
  current.running = false;
  flush_listed();
}

}  // namespace troupe::actor
