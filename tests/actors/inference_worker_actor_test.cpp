#include "actors/inference_worker_actor.hpp"

#include <functional>
#include <map>

#include <gtest/gtest.h>

#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const served_model> tiny_model(int ctx = 64) {
  const models::decoder_config config{256, ctx, 2, 32, 4};
  auto m = std::make_shared<served_model>();
  m->layout = std::make_unique<models::decoder_layout>(config, models::layer_range::all(config));
  m->params.resize(m->layout->total());
  m->layout->initialize(m->params.data(), 3);
  return m;
}

// A worker of tiny_model() with room for 64 tokens a batch, answering a poll after `poll_wait`
// at the latest.
actor::inference_worker_actor tiny_worker(caf::actor_system& system, metrics::registry& metrics,
                                          std::chrono::milliseconds poll_wait) {
  return *spawn_inference_worker(system, metrics, "worker/0", tiny_model(),
                                 {.scheduler = {.ctx = 64, .max_batch_tokens = 64}}, {}, poll_wait);
}

actor::generation_request worker_request(uint64_t id, int max_tokens) {
  actor::generation_request r;
  r.id = id;
  r.prompt = {'H', 'e', 'l', 'l', 'o'};
  r.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return r;
}

using report_handler = std::function<void(actor::worker_report&)>;

void poll(caf::scoped_actor& self, const actor::inference_worker_actor& worker,
          const report_handler& handle) {
  self->request(worker, 10s, actor::poll_atom_v)
      .receive([&](actor::worker_report& report) { handle(report); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
}

// Requests in, long polls out, as a router drives a worker.
TEST(InferenceWorkerActor, GeneratesStreamsAndRefusesBadRequests) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  // A long poll wait: the first poll, sent before any request, is answered by the first
  // iteration's events, never by the wait running out.
  auto worker = tiny_worker(system, metrics, 10s);
  caf::scoped_actor self(system);
  auto first_poll = self->request(worker, 20s, actor::poll_atom_v);
  for (uint64_t id : {1, 2}) {
    self->request(worker, 10s, actor::generate_atom_v, worker_request(id, 5 * id))
        .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  auto too_long = worker_request(3, 5);
  too_long.prompt.assign(64, 'a');
  self->request(worker, 10s, actor::generate_atom_v, too_long)
      .receive([](caf::ok_atom) { FAIL() << "a prompt filling the context was accepted"; },
               [](caf::error& e) {
                 EXPECT_EQ(actor::to_status(e).code(), absl::StatusCode::kOutOfRange);
               });

  std::map<uint64_t, std::vector<int32_t>> streams;
  std::map<uint64_t, bool> finished;
  int max_batch = 0;
  auto collect = [&](actor::worker_report& report) {
    EXPECT_EQ(report.kv_blocks_total, 256);  // inference_engine::options' default
    // Running sequences hold blocks; none are held without one.
    EXPECT_EQ(report.running > 0, report.kv_blocks_used > 0)
        << report.running << " running, " << report.kv_blocks_used << " blocks used";
    for (int32_t n : report.batch_sizes)
      max_batch = std::max(max_batch, n);
    for (const auto& e : report.events) {
      EXPECT_EQ(e.first_index, static_cast<int>(streams[e.id].size()));
      streams[e.id].insert(streams[e.id].end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) finished[e.id] = true;
    }
  };
  // Request 1 has four tokens to go after the first iteration: the report shows it running.
  first_poll.receive(
      [&](actor::worker_report& report) {
        EXPECT_FALSE(report.events.empty());
        EXPECT_GE(report.running, 1);
        EXPECT_GT(report.kv_blocks_used, 0);
        collect(report);
      },
      [](caf::error& e) { FAIL() << caf::to_string(e); });
  for (int i = 0; i < 200 && !(finished[1] && finished[2]); ++i)
    poll(self, worker, collect);
  EXPECT_EQ(streams[1].size(), 5u);
  EXPECT_EQ(streams[2].size(), 10u);
  // Greedy decoding of the same prompt: the shorter output is a prefix of the longer one.
  EXPECT_TRUE(std::equal(streams[1].begin(), streams[1].end(), streams[2].begin()));
  // The reports showed iterations of one or both sequences.
  EXPECT_GE(max_batch, 1);
  EXPECT_LE(max_batch, 2);
  self->send_exit(worker, caf::exit_reason::user_shutdown);

  // A generation of 1000 tokens that is held after two iterations, however fast the machine,
  // and then cancelled ends early, as cancelled, with the tokens it had.
  testing::temp_dir dir;
  const std::string hold = dir.write("hold", "2");
  auto long_worker =
      *spawn_inference_worker(system, metrics, "worker/1", tiny_model(1024),
                              {.scheduler = {.ctx = 1024, .max_batch_tokens = 64}},
                              run::work_pacer(config::test_hooks{.hold_file = hold}), 50ms);
  self->request(long_worker, 10s, actor::generate_atom_v, worker_request(4, 1000))
      .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  size_t tokens = 0;
  bool cancelled = false;
  auto until_finished = [&](actor::worker_report& report) {
    for (const auto& e : report.events) {
      if (e.id != 4) continue;
      tokens += e.tokens.size();
      if (e.finished) {
        cancelled = true;
        EXPECT_EQ(e.reason, actor::finish_reason::cancelled);
      }
    }
  };
  for (int i = 0; i < 200 && tokens < 2; ++i)  // both iterations ran; the third is held
    poll(self, long_worker, until_finished);
  ASSERT_EQ(tokens, 2u);
  self->send(long_worker, actor::cancel_atom_v, uint64_t{4});
  for (int i = 0; i < 50 && !cancelled; ++i)
    poll(self, long_worker, until_finished);
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(tokens, 2u);

  // An idle worker's poll comes back empty after the wait, with every block free again.
  poll(self, long_worker, [](actor::worker_report& report) {
    EXPECT_TRUE(report.events.empty());
    EXPECT_EQ(report.kv_blocks_used, 0);
    EXPECT_EQ(report.running, 0);
  });
  self->send_exit(long_worker, caf::exit_reason::user_shutdown);
}

// Requests that do not stream (RL rollouts): a poll is answered only when one of them ends, with
// its tokens merged into one event (the others' stay with the worker until they end), so two
// requests of 5 and 10 tokens take two polls, not ten. The poll wait is far longer than the
// generation: the requests' ends answer the polls. The first poll waits before the requests
// arrive, so the first end answers it however fast the machine; the second end answers the
// second poll, or waits for it.
TEST(InferenceWorkerActor, RequestsThatDoNotStreamAreAnsweredWhenTheyEnd) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  auto worker = tiny_worker(system, metrics, 100s);
  caf::scoped_actor self(system);
  auto first_poll = self->request(worker, 100s, actor::poll_atom_v);
  std::vector<actor::generation_request> requests = {worker_request(1, 5), worker_request(2, 10)};
  for (auto& r : requests)
    r.stream = false;
  self->request(worker, 10s, actor::generate_atom_v, requests)
      .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  std::vector<std::vector<actor::generation_event>> polls;
  auto keep = [&](actor::worker_report& report) { polls.push_back(report.events); };
  auto fail = [](caf::error& e) { FAIL() << caf::to_string(e); };
  first_poll.receive(keep, fail);
  self->request(worker, 100s, actor::poll_atom_v).receive(keep, fail);
  ASSERT_EQ(polls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(polls[i].size(), 1u) << "poll " << i << ": the request that ended, alone";
    const actor::generation_event& e = polls[i][0];
    EXPECT_EQ(e.id, i + 1);
    EXPECT_TRUE(e.finished);
    EXPECT_EQ(e.first_index, 0);
    EXPECT_EQ(e.tokens.size(), 5u * (i + 1));
    EXPECT_EQ(e.logprobs.size(), e.tokens.size());
  }
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// `(poll, true)`, the RL controller's: one answer once every request that does not stream has
// ended, with all of them, however many iterations apart they end. The poll is sent before
// the requests and the wait is far longer than the generation, so nothing but their ends can
// answer it.
TEST(InferenceWorkerActor, APollUntilQuietTakesEveryEndedRequestInOneAnswer) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  auto worker = tiny_worker(system, metrics, 100s);
  caf::scoped_actor self(system);
  auto whole = self->request(worker, 100s, actor::poll_atom_v, true);
  std::vector<actor::generation_request> requests = {worker_request(1, 3), worker_request(2, 7),
                                                     worker_request(3, 12)};
  for (auto& r : requests)
    r.stream = false;
  self->request(worker, 10s, actor::generate_atom_v, requests)
      .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  whole.receive(
      [&](actor::worker_report& report) {
        ASSERT_EQ(report.events.size(), 3u);
        EXPECT_EQ(report.running, 0);
        for (const actor::generation_event& e : report.events) {
          EXPECT_TRUE(e.finished) << e.id;
          EXPECT_EQ(e.tokens.size(), static_cast<size_t>(requests.at(e.id - 1).max_tokens)) << e.id;
        }
      },
      [](caf::error& e) { FAIL() << caf::to_string(e); });
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// Each poll waits its whole poll_wait: the timer of an earlier poll, answered early by its
// request's end, does not answer a later poll. Poll A, sent before its request, is answered
// when the request ends. An idle second worker with half the wait then answers a poll of its
// own, by its timer, so at least half a second has passed since A's timer started. Poll B, sent
// then with nothing running, must wait its own second, where A's timer would answer it at least
// half a second early.
TEST(InferenceWorkerActor, APollWaitsItsOwnWaitWhateverAnEarlierPollsTimer) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  constexpr std::chrono::milliseconds wait = 1s;
  auto worker = tiny_worker(system, metrics, wait);
  auto clock =
      *spawn_inference_worker(system, metrics, "worker/1", tiny_model(),
                              {.scheduler = {.ctx = 64, .max_batch_tokens = 64}}, {}, wait / 2);
  caf::scoped_actor self(system);
  auto fail = [](caf::error& e) { FAIL() << caf::to_string(e); };
  auto a = self->request(worker, 10s, actor::poll_atom_v, true);
  actor::generation_request r = worker_request(1, 3);
  r.stream = false;
  self->request(worker, 10s, actor::generate_atom_v, r).receive([](caf::ok_atom) {}, fail);
  a.receive([](actor::worker_report& report) { EXPECT_EQ(report.events.size(), 1u); }, fail);

  self->request(clock, 10s, actor::poll_atom_v, true)
      .receive([](actor::worker_report& report) { EXPECT_TRUE(report.events.empty()); }, fail);
  const auto b_sent = std::chrono::steady_clock::now();
  self->request(worker, 10s, actor::poll_atom_v, true)
      .receive(
          [&](actor::worker_report& report) {
            EXPECT_TRUE(report.events.empty());
            EXPECT_GE(std::chrono::steady_clock::now() - b_sent, wait)
                << "poll B was answered before its wait passed";
          },
          fail);
  self->send_exit(worker, caf::exit_reason::user_shutdown);
  self->send_exit(clock, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors
