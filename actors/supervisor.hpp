#pragma once

#include <chrono>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/config/app_spec.hpp"

namespace troupe::actors {

/// The supervisor's decisions, without CAF: which failures are restarted, after what delay, and
/// when the job must fail instead.
///
///   running --failure, restarts left--> (restart after backoff) --> running
///   running --failure, fail_job or no restarts left--> (job fails)
///
/// Role actors live as long as the job, so an actor that stops on its own, even without an
/// error, has failed.
class supervision {
 public:
  struct decision {
    enum class action { restart, fail_job, ignore };
    action what = action::ignore;
    /// For `restart`: how long to wait first.
    std::chrono::milliseconds delay{0};
    /// For `restart`: which restart this is (1-based).
    int attempt = 0;
    /// For `fail_job`: the cause, naming the actor and its error.
    std::string cause;
  };

  /// Longest wait between restarts.
  static constexpr std::chrono::milliseconds max_backoff{30000};

  /// Starts supervising `actor` ("rot13/0") under `policy`.
  void add(const std::string& actor, const config::failure_policy& policy);

  /// Decides what to do now that `actor` exited with `reason` (OK for a normal exit). Unknown
  /// actors are ignored.
  [[nodiscard]] decision on_exit(absl::string_view actor, const absl::Status& reason);

  /// Restarts so far of `actor`.
  [[nodiscard]] int restarts(absl::string_view actor) const;

 private:
  struct child {
    config::failure_policy policy;
    int restarts = 0;
  };
  std::map<std::string, child, std::less<>> children_;
};

}  // namespace troupe::actors
