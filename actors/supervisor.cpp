#include "actors/supervisor.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

void supervision::add(const std::string& actor, const config::failure_policy& policy) {
  children_[actor] = child{policy, 0};
}

supervision::decision supervision::on_exit(absl::string_view actor, const absl::Status& reason) {
  auto it = children_.find(actor);
  if (it == children_.end()) return {};
  child& c = it->second;
  // Role actors live as long as the job: stopping early, even without an error, is a failure.
  const absl::Status cause =
      reason.ok() ? absl::AbortedError("stopped on its own while the job was running") : reason;
  using action = config::failure_policy::action;
  decision d;
  if (c.policy.on_failure == action::fail_job) {
    d.what = decision::action::fail_job;
    d.cause = absl::StrCat(actor, " failed: ", cause.message(), " (on_failure: fail_job)");
    return d;
  }
  if (c.restarts >= c.policy.restart.max) {
    d.what = decision::action::fail_job;
    d.cause = absl::StrCat(actor, " failed: ", cause.message(), " (after ", c.restarts,
                           " restarts; on_failure.restart.max is ", c.policy.restart.max, ")");
    return d;
  }
  d.what = decision::action::restart;
  d.attempt = ++c.restarts;
  // Exponential backoff: backoff_ms, 2x, 4x, ... capped at max_backoff.
  int64_t delay = c.policy.restart.backoff_ms;
  for (int i = 1; i < d.attempt && delay < max_backoff.count(); ++i)
    delay *= 2;
  d.delay = std::min(std::chrono::milliseconds(delay), max_backoff);
  return d;
}

int supervision::restarts(absl::string_view actor) const {
  auto it = children_.find(actor);
  return it == children_.end() ? 0 : it->second.restarts;
}

}  // namespace troupe::actors
