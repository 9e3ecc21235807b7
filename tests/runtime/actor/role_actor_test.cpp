#include "runtime/actor/role_actor.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::actor {
namespace {

using echo_actor = caf::typed_actor<caf::replies_to<ping_atom, int32_t>::with<int32_t>>;

struct counter_state {
  int calls = 0;
};

class RoleActorTest : public ::testing::Test {
 protected:
  RoleActorTest() : cfg_(make_system_config({.scheduler_threads = 2})), system_(*cfg_) {}

  std::unique_ptr<caf::actor_system_config> cfg_;
  caf::actor_system system_;
};

TEST_F(RoleActorTest, CountsEveryMessageAndTimesSome) {
  auto stats = std::make_shared<metrics::actor_stats>();
  auto echo = system_.spawn<role_actor<echo_actor, counter_state>>(
      stats, [](role_pointer<echo_actor, counter_state> self) -> echo_actor::behavior_type {
        return {[self](ping_atom, int32_t x) {
          ++self->state.calls;
          return x + 1;
        }};
      });
  caf::scoped_actor client{system_};
  for (int i = 0; i < 40; ++i) {
    client->request(echo, std::chrono::seconds(5), ping_atom_v, int32_t{i})
        .receive([i](int32_t y) { EXPECT_EQ(y, i + 1); },
                 [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  // The actor records a message after its handler returns, so the last reply can arrive first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stats->messages() < 40 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(stats->messages(), 40u);
  EXPECT_GT(stats->busy_nanos(), 0u);
  // The timed messages stand for the others (ActorStats.* pins down which are timed): the first,
  // then one in 16 or, were some handlers long, more.
  uint64_t bucketed = 0;
  for (int i = 0; i < metrics::actor_stats::bucket_count; ++i)
    bucketed += stats->bucket(i);
  EXPECT_GE(bucketed, 33u);
  EXPECT_LE(bucketed, 40u + metrics::actor_stats::sampling_stride - 1);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_F(RoleActorTest, AThrowingHandlerFailsTheActorWithTheExceptionText) {
  auto stats = std::make_shared<metrics::actor_stats>();
  auto bomb = system_.spawn<role_actor<echo_actor>>(
      stats, [](role_pointer<echo_actor>) -> echo_actor::behavior_type {
        return {[](ping_atom, int32_t) -> int32_t { throw std::logic_error("bad input"); }};
      });
  caf::scoped_actor client{system_};
  client->monitor(bomb);
  client->request(bomb, std::chrono::seconds(5), ping_atom_v, int32_t{1})
      .receive([](int32_t) { FAIL() << "expected an error"; }, [](caf::error&) {});
  client->receive([](caf::down_msg& down) {
    EXPECT_EQ(to_status(down.reason).message(),
              "unhandled exception (std::logic_error): bad input");
  });
}

TEST_F(RoleActorTest, AFailedResultQuitsTheActor) {
  auto stats = std::make_shared<metrics::actor_stats>();
  auto failing = system_.spawn<role_actor<echo_actor>>(
      stats, [](role_pointer<echo_actor> self) -> echo_actor::behavior_type {
        return {[self](ping_atom, int32_t) {
          return to_result(self, absl::StatusOr<int32_t>(absl::DataLossError("corrupt")));
        }};
      });
  caf::scoped_actor client{system_};
  client->monitor(failing);
  client->request(failing, std::chrono::seconds(5), ping_atom_v, int32_t{1})
      .receive([](int32_t) { FAIL() << "expected an error"; },
               [](caf::error& e) { EXPECT_EQ(to_status(e), absl::DataLossError("corrupt")); });
  client->receive([](caf::down_msg& down) {
    EXPECT_EQ(to_status(down.reason), absl::DataLossError("corrupt"));
  });
}

}  // namespace
}  // namespace troupe::actor
