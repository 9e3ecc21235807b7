#include "runtime/actor/rule_reward.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::actor {
namespace {

// The response's length, plus one when it ended.
double length_rule(std::string_view, std::string_view response, bool ended) {
  return static_cast<double>(response.size()) + (ended ? 1 : 0);
}

TEST(RuleReward, ScoresEachResponseInOrder) {
  const reward_request request{{"a", "b", "c"}, {"", "xy", "xyz"}, {1, 0, 1}};
  absl::StatusOr<std::vector<double>> scores = score_all("length", length_rule, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_EQ(*scores, (std::vector<double>{1, 2, 4}));
}

TEST(RuleReward, RefusesListsThatDoNotPairUp) {
  const reward_request request{{"a", "b"}, {"x"}, {1, 1}};
  absl::StatusOr<std::vector<double>> scores = score_all("length", length_rule, request);
  ASSERT_FALSE(scores.ok());
  EXPECT_TRUE(absl::StrContains(scores.status().message(), "2 prompts, 1 responses"))
      << scores.status();
}

TEST(RuleReward, RefusesAScoreThatIsNotFiniteNamingTheRuleAndTheResponse) {
  const reward_rule nan_on_b = [](std::string_view, std::string_view response, bool) {
    return response == "b" ? std::numeric_limits<double>::quiet_NaN() : 0.5;
  };
  const reward_request request{{"p", "q"}, {"a", "b"}, {1, 1}};
  absl::StatusOr<std::vector<double>> scores = score_all("broken", nan_on_b, request);
  ASSERT_FALSE(scores.ok());
  EXPECT_TRUE(absl::StrContains(scores.status().message(), "reward rule 'broken'"));
  EXPECT_TRUE(absl::StrContains(scores.status().message(), "response 1 (\"b\" to \"q\")"))
      << scores.status();
}

TEST(RuleReward, TheRoleAnswersScoresAndErrors) {
  auto cfg = make_system_config({.scheduler_threads = 1});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  const reward_actor reward = spawn_rule_reward(system, metrics, "reward/0", "length", length_rule);
  caf::scoped_actor client{system};
  client
      ->request(reward, std::chrono::seconds(10), score_atom_v, reward_request{{"p"}, {"abc"}, {1}})
      .receive([](const std::vector<double>& scores) { EXPECT_EQ(scores, std::vector<double>{4}); },
               [](const caf::error& e) { FAIL() << caf::to_string(e); });
  client->request(reward, std::chrono::seconds(10), score_atom_v, reward_request{{"p"}, {}, {}})
      .receive([](const std::vector<double>&) { FAIL() << "a bad request was scored"; },
               [](const caf::error& e) {
                 EXPECT_TRUE(absl::StrContains(caf::to_string(e), "must pair up"));
               });
  client->send_exit(reward, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actor
