#include "actors/data_loader_actor.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "runtime/actor/system_config.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

TEST(DataLoaderActor, PrefetchesUnderCreditsAndServesTheStreamInOrder) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system{*cfg};
  metrics::registry metrics;
  testing::temp_dir dir;
  std::string text;
  for (int i = 0; text.size() < 20000; ++i)
    text += "record " + std::to_string(i) + "\n";
  auto corpus =
      std::make_shared<const text_corpus>(*text_corpus::load(dir.write("t.txt", text), 0.05, 16));
  auto reference = *data_loader::create(*corpus, 16, 4, 1, 2, 9);
  auto loader = spawn_data_loader(system, metrics, "data/1", corpus,
                                  prefetch_queue(*data_loader::create(*corpus, 16, 4, 1, 2, 9)));
  caf::scoped_actor self{system};
  auto next = [&] {
    actor::token_batch out;
    self->request(loader, 10s, actor::next_atom_v)
        .receive([&](actor::token_batch& b) { out = std::move(b); },
                 [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return out;
  };
  auto cursor = [&] {
    int64_t out = -1;
    self->request(loader, 10s, actor::cursor_atom_v)
        .receive([&](int64_t c) { out = c; },
                 [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return out;
  };
  self->send(loader, actor::credit_atom_v, int32_t{3});
  // The credit and three (produce) prompts handled: three batches prepared, the cursor unmoved.
  const auto stats = metrics.actor("data/1");
  ASSERT_TRUE(testing::wait_until([&] { return stats->messages() >= 4; }));
  ASSERT_EQ(stats->messages(), 4u);
  EXPECT_EQ(cursor(), 0);
  for (int i = 0; i < 5; ++i) {
    const actor::token_batch b = next();
    EXPECT_EQ(b.tokens, reference.next().tokens) << i;
    EXPECT_EQ(b.batch, 2);                                 // rank 1's half of a global batch of 4
    self->send(loader, actor::credit_atom_v, int32_t{1});  // a credit back per batch taken
  }
  EXPECT_EQ(cursor(), 5 * 4);
  self->request(loader, 10s, actor::seek_atom_v, int64_t{8})
      .receive([](caf::ok_atom) {}, [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  reference.seek(8);
  EXPECT_EQ(next().tokens, reference.next().tokens);
  self->send_exit(loader, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors
