#include "actors/inference_worker_actor.hpp"

#include <map>

#include <gtest/gtest.h>

#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const served_model> tiny_model(int ctx = 64) {
  const models::gpt_config config{256, ctx, 2, 32, 4};
  auto m = std::make_shared<served_model>();
  m->layout = std::make_unique<models::gpt_layout>(config, models::layer_range::all(config));
  m->params.resize(m->layout->total());
  m->layout->initialize(m->params.data(), 3);
  return m;
}

actor::generation_request request(uint64_t id, int max_tokens) {
  actor::generation_request r;
  r.id = id;
  r.prompt = {'H', 'e', 'l', 'l', 'o'};
  r.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return r;
}

// Requests in, long polls out, as a router drives a worker.
TEST(InferenceWorkerActor, GeneratesStreamsAndRefusesBadRequests) {
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system(*cfg);
  metrics::registry metrics;
  auto worker = *spawn_inference_worker(system, metrics, "worker/0", tiny_model(),
                                        {.scheduler = {.ctx = 64, .max_batch_tokens = 64}}, 50ms);
  caf::scoped_actor self(system);
  for (uint64_t id : {1, 2}) {
    self->request(worker, 10s, actor::generate_atom_v, request(id, 5 * id))
        .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  auto too_long = request(3, 5);
  too_long.prompt.assign(64, 'a');
  self->request(worker, 10s, actor::generate_atom_v, too_long)
      .receive([](caf::ok_atom) { FAIL() << "a prompt filling the context was accepted"; },
               [](caf::error& e) {
                 EXPECT_EQ(actor::to_status(e).code(), absl::StatusCode::kOutOfRange);
               });

  std::map<uint64_t, std::vector<int32_t>> streams;
  std::map<uint64_t, bool> finished;
  int max_blocks_used = 0, max_batch = 0;
  for (int i = 0; i < 200 && !(finished[1] && finished[2]); ++i) {
    self->request(worker, 10s, actor::poll_atom_v)
        .receive(
            [&](actor::worker_report& report) {
              EXPECT_EQ(report.kv_blocks_total, 256);  // inference_engine::options' default
              max_blocks_used = std::max(max_blocks_used, report.kv_blocks_used);
              for (int32_t n : report.batch_sizes)
                max_batch = std::max(max_batch, n);
              for (const auto& e : report.events) {
                EXPECT_EQ(e.first_index, static_cast<int>(streams[e.id].size()));
                streams[e.id].insert(streams[e.id].end(), e.tokens.begin(), e.tokens.end());
                if (e.finished) finished[e.id] = true;
              }
            },
            [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  EXPECT_EQ(streams[1].size(), 5u);
  EXPECT_EQ(streams[2].size(), 10u);
  // Greedy decoding of the same prompt: the shorter output is a prefix of the longer one.
  EXPECT_TRUE(std::equal(streams[1].begin(), streams[1].end(), streams[2].begin()));
  // The reports showed iterations of one or both sequences, holding blocks.
  EXPECT_GE(max_batch, 1);
  EXPECT_LE(max_batch, 2);
  EXPECT_GT(max_blocks_used, 0);

  // An idle worker's poll comes back empty after the wait, with every block free again.
  self->request(worker, 10s, actor::poll_atom_v)
      .receive(
          [](actor::worker_report& report) {
            EXPECT_TRUE(report.events.empty());
            EXPECT_EQ(report.kv_blocks_used, 0);
            EXPECT_EQ(report.running, 0);
          },
          [](caf::error& e) { FAIL() << caf::to_string(e); });
  self->send_exit(worker, caf::exit_reason::user_shutdown);

  // A long generation (1000 tokens, a long context) cancelled right after it starts ends early,
  // as cancelled.
  auto long_worker =
      *spawn_inference_worker(system, metrics, "worker/1", tiny_model(1024),
                              {.scheduler = {.ctx = 1024, .max_batch_tokens = 64}}, 50ms);
  auto accepted = self->request(long_worker, 10s, actor::generate_atom_v, request(4, 1000));
  self->send(long_worker, actor::cancel_atom_v, uint64_t{4});
  accepted.receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  bool cancelled = false;
  for (int i = 0; i < 50 && !cancelled; ++i) {
    self->request(long_worker, 10s, actor::poll_atom_v)
        .receive(
            [&](actor::worker_report& report) {
              for (const auto& e : report.events) {
                if (e.id == 4 && e.finished) {
                  cancelled = true;
                  EXPECT_EQ(e.reason, actor::finish_reason::cancelled);
                }
              }
            },
            [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  EXPECT_TRUE(cancelled);
  self->send_exit(long_worker, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors
