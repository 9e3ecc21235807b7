#include "actors/reward_actor.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/actor/role_actor.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

struct reward_state {
  reward_rule rule;
};

using self_ptr = actor::role_pointer<actor::reward_actor, reward_state>;

}  // namespace

absl::StatusOr<std::vector<double>> score_all(const reward_rule& rule,
                                              const actor::reward_request& request) {
  const size_t n = request.prompts.size();
  if (request.responses.size() != n || request.ended.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward request: ", n, " prompts, ", request.responses.size(),
                     " responses and ", request.ended.size(), " end flags; they must pair up"));
  }
  std::vector<double> scores(n);
  for (size_t i = 0; i < n; ++i)
    scores[i] = rule(request.prompts[i], request.responses[i], request.ended[i] != 0);
  return scores;
}

actor::reward_actor spawn_rule_reward(caf::actor_system& system, metrics::registry& metrics,
                                      const std::string& name, reward_rule rule) {
  return system.spawn<actor::role_actor<actor::reward_actor, reward_state>>(
      metrics.actor(name), [rule](self_ptr self) -> actor::reward_actor::behavior_type {
        self->state.rule = rule;
        return {
            [self](actor::score_atom,
                   const actor::reward_request& request) -> caf::result<std::vector<double>> {
              absl::StatusOr<std::vector<double>> scores = score_all(self->state.rule, request);
              if (!scores.ok()) return actor::to_error(scores.status());
              return *std::move(scores);
            },
        };
      });
}

}  // namespace troupe::actors
