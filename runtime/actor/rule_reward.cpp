#include "runtime/actor/rule_reward.hpp"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/role_actor.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actor {
namespace {

struct reward_state {
  reward_scorer scorer;
};

using reward_self = role_pointer<reward_actor, reward_state>;

struct no_options {};

}  // namespace

absl::StatusOr<std::vector<double>> score_all(const std::string& name, const reward_rule& rule,
                                              const reward_request& request) {
  const size_t n = request.prompts.size();
  if (request.responses.size() != n || request.ended.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward request: ", n, " prompts, ", request.responses.size(),
                     " responses and ", request.ended.size(), " end flags; they must pair up"));
  }
  std::vector<double> scores(n);
  for (size_t i = 0; i < n; ++i) {
    scores[i] = rule(request.prompts[i], request.responses[i], request.ended[i] != 0);
    if (!std::isfinite(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reward rule '", name, "' scored response ", i, " (\"",
          absl::CHexEscape(request.responses[i]), "\" to \"", absl::CHexEscape(request.prompts[i]),
          "\") ", scores[i], "; a rule must return a finite number"));
    }
  }
  return scores;
}

reward_actor spawn_reward(caf::actor_system& system, metrics::registry& metrics,
                          const std::string& actor_name, reward_scorer scorer) {
  return system.spawn<role_actor<reward_actor, reward_state>>(
      metrics.actor(actor_name),
      [scorer = std::move(scorer)](reward_self self) -> reward_actor::behavior_type {
        self->state.scorer = scorer;
        return {
            [self](score_atom, const reward_request& request) -> caf::result<std::vector<double>> {
              absl::StatusOr<std::vector<double>> scores = self->state.scorer(request);
              if (!scores.ok()) return to_error(scores.status());
              return *std::move(scores);
            },
        };
      });
}

reward_actor spawn_rule_reward(caf::actor_system& system, metrics::registry& metrics,
                               const std::string& actor_name, std::string name, reward_rule rule) {
  return spawn_reward(system, metrics, actor_name,
                      [name = std::move(name), rule = std::move(rule)](const reward_request& r) {
                        return score_all(name, rule, r);
                      });
}

role_factory rule_reward_factory(std::string name, std::string description, reward_rule rule) {
  return make_role_factory<no_options>(
      std::move(description), config::object_schema<no_options>(),
      [name = std::move(name), rule = std::move(rule)](
          role_context& ctx, const no_options&) -> absl::StatusOr<caf::actor> {
        return caf::actor_cast<caf::actor>(
            spawn_rule_reward(ctx.system, ctx.metrics, ctx.actor_name(), name, rule));
      });
}

}  // namespace troupe::actor
