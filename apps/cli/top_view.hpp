#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::cli {

/// What `troupe top` shows, read from the head's /api/status and /api/series.
struct top_snapshot {
  nlohmann::json status;  ///< /api/status
  struct actor_row {
    std::string node;
    std::string actor;
    double messages = 0;
    double per_second = 0;  ///< over the last few seconds of samples
    double mailbox = 0;
    double handler_age_s = 0;
    bool stuck = false;
  };
  std::vector<actor_row> actors;
  /// The job's key figures that the head has (name, latest value), e.g. troupe_train_loss.
  std::vector<std::pair<std::string, double>> figures;
};

/// The families whose latest values `troupe top` shows as the job's key figures, when the job
/// reports them.
[[nodiscard]] const std::vector<std::string>& top_figure_families();

/// Builds the actor rows from /api/series answers for troupe_actor_messages_total,
/// troupe_actor_mailbox_depth, troupe_actor_handler_age_seconds and troupe_actor_stuck: the
/// busiest first (stuck ones before all).
[[nodiscard]] std::vector<top_snapshot::actor_row> top_actor_rows(const nlohmann::json& messages,
                                                                  const nlohmann::json& mailbox,
                                                                  const nlohmann::json& age,
                                                                  const nlohmann::json& stuck);

/// The picture as text `width` columns wide: the members, the key figures, and the busiest
/// `max_actors` actors (stuck ones marked).
[[nodiscard]] std::string render_top(const top_snapshot& s, size_t max_actors = 20);

}  // namespace troupe::cli
