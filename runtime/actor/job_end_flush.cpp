#include "runtime/actor/job_end_flush.hpp"

#include <algorithm>
#include <vector>

namespace troupe::actor {
namespace {

struct job_state {
  bool running = false;
  std::vector<std::weak_ptr<batched_output>> to_flush;
};

thread_local job_state current;

}  // namespace

bool flushes_at_job_end() {
  return current.running;
}

void flush_at_job_end(std::weak_ptr<batched_output> out) {
  auto& list = current.to_flush;
  // A job talks to few peers: a linear look beats a set.
  const bool listed = std::any_of(list.begin(), list.end(), [&](const auto& x) {
    return !x.owner_before(out) && !out.owner_before(x);
  });
  if (!listed) list.push_back(std::move(out));
}

void job_begins() {
  current.running = true;
}

void job_ends() {
  current.running = false;
  // Swapped out first: a flush may itself queue output (it then flushes at once).
  std::vector<std::weak_ptr<batched_output>> list;
  list.swap(current.to_flush);
  for (auto& weak : list) {
    if (auto out = weak.lock()) out->flush();
  }
  list.clear();
  if (current.to_flush.empty()) current.to_flush.swap(list);  // keep the capacity
}

}  // namespace troupe::actor
