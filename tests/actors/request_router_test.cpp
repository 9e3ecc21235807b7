#include "actors/request_router.hpp"

#include <gtest/gtest.h>

#include "actors/inference_engine.hpp"

namespace troupe::actors {
namespace {

using router = request_router;

generation_request router_request(uint64_t id, int prompt, int max_tokens) {
  generation_request r;
  r.id = id;
  for (int i = 0; i < prompt; ++i)
    r.prompt.push_back(static_cast<int32_t>('a' + (i * 7 + id) % 26));
  r.max_tokens = max_tokens;
  r.temperature = 0.8f;
  r.seed = id * 31;
  return r;
}

template <class T>
std::vector<T> all(const std::vector<router::command>& commands) {
  std::vector<T> out;
  for (const auto& c : commands) {
    if (const T* x = std::get_if<T>(&c)) out.push_back(*x);
  }
  return out;
}

TEST(RequestRouter, SendsEachRequestToTheLeastLoadedWorker) {
  router r({.max_queue = 2, .max_per_worker = 2});
  EXPECT_TRUE(r.add_worker("w1").empty());
  r.add_worker("w2");
  auto c = *r.submit(router_request(1, 10, 100));  // w1 (ties go to the first name)
  EXPECT_EQ(all<router::dispatch>(c).at(0).worker, "w1");
  c = *r.submit(router_request(2, 10, 10));  // w2 is empty
  EXPECT_EQ(all<router::dispatch>(c).at(0).worker, "w2");
  c = *r.submit(router_request(3, 10, 10));  // w2 owes 20 tokens, w1 110
  EXPECT_EQ(all<router::dispatch>(c).at(0).worker, "w2");
  EXPECT_EQ(r.load("w2"), 40);
  // w2 is full (2 requests), w1 takes one more; then the queue fills, then refusals.
  EXPECT_EQ(all<router::dispatch>(*r.submit(router_request(4, 1, 1))).at(0).worker, "w1");
  EXPECT_TRUE(r.submit(router_request(5, 1, 1))->empty());
  EXPECT_TRUE(r.submit(router_request(6, 1, 1))->empty());
  EXPECT_EQ(r.queued(), 2u);
  EXPECT_EQ(r.submit(router_request(7, 1, 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.submit(router_request(6, 1, 1)).status().code(), absl::StatusCode::kAlreadyExists);
  // A finished request frees a place: the oldest waiting request takes it.
  c = r.on_event("w2", {2, {'x'}, 0, true, finish_reason::length});
  ASSERT_EQ(all<router::deliver>(c).size(), 1u);
  EXPECT_EQ(all<router::dispatch>(c).at(0).request.id, 5u);
  // Cancelling a queued request frees its queue place; a placed one is stopped on its worker.
  EXPECT_TRUE(r.cancel(6).empty());
  EXPECT_EQ(r.queued(), 0u);
  EXPECT_EQ(all<router::cancel_on>(r.cancel(1)).at(0).worker, "w1");
}

// With the workers' prefix caching, a request goes to the worker that was sent its prompt's
// longest prefix (by whole blocks), unless that worker owes more tokens beyond the least loaded
// one's than the prefix saves; a worker's prefixes are forgotten with it.
TEST(RequestRouter, PrefersTheWorkerHoldingTheLongestPrefix) {
  const auto prompt_of = [](uint64_t id, int system, int own) {
    generation_request r = router_request(id, 0, 4);
    for (int i = 0; i < system; ++i)
      r.prompt.push_back(static_cast<int32_t>('A' + i % 26));  // the shared system prompt
    for (int i = 0; i < own; ++i)
      r.prompt.push_back(static_cast<int32_t>('a' + (i + id) % 26));
    return r;
  };
  router r({.max_per_worker = 8, .prefix_block_size = 4, .prefix_blocks = 64});
  r.add_worker("w1");
  r.add_worker("w2");
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(1, 0, 6))).at(0).worker, "w1");
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(2, 20, 2))).at(0).worker, "w2");
  r.on_event("w2", {2, {'x'}, 0});  // its prompt computed: w2 owes its 3 last tokens
  // w1 owes 10 tokens, w2 3: w2, which also holds the 20-token prefix.
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(3, 20, 5))).at(0).worker, "w2");
  r.on_event("w1", {1, {'x'}, 0, true, finish_reason::length});  // w1 owes nothing
  // w2 owes 3 + 29: more than the 20 tokens it would save. w1 it is.
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(4, 20, 1))).at(0).worker, "w1");
  r.on_event("w2", {3, {'x'}, 0, true, finish_reason::length});
  // Both hold the prefix now: the least loaded of them.
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(5, 20, 3))).at(0).worker, "w2");
  r.on_event("w1", {4, {'x'}, 0, true, finish_reason::length});
  EXPECT_TRUE(r.remove_worker("w1").empty());
  r.add_worker("w1");
  r.on_event("w2", {5, {'x'}, 0, true, finish_reason::length});
  r.on_event("w2", {2, {'x'}, 1, true, finish_reason::length});
  EXPECT_EQ(r.load("w2"), 0);
  // w1 came back empty-handed: the prefix is w2's alone; a prompt with none goes by load.
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(6, 20, 1))).at(0).worker, "w2");
  EXPECT_EQ(all<router::dispatch>(*r.submit(prompt_of(7, 0, 3))).at(0).worker, "w1");

  router plain({.max_per_worker = 8});
  plain.add_worker("w1");
  plain.add_worker("w2");
  plain.submit(prompt_of(1, 20, 1));
  plain.on_event("w1", {1, {'x'}, 0});
  EXPECT_EQ(all<router::dispatch>(*plain.submit(prompt_of(2, 20, 1))).at(0).worker, "w2");
}

TEST(RequestRouter, WithoutAQueueOnlyFullWorkersRefuse) {
  router r({.max_queue = 0, .max_per_worker = 1});
  r.add_worker("w1");
  EXPECT_EQ(all<router::dispatch>(*r.submit(router_request(1, 1, 1))).size(), 1u);
  EXPECT_EQ(r.submit(router_request(2, 1, 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// Two real engines serve a stream of requests; one is lost midway. Every client stream must
// equal the one a single engine produces: each token exactly once, in order.
TEST(RequestRouter, ALostWorkersRequestsContinueElsewhereWithoutRepeatsOrGaps) {
  const models::decoder_config config{256, 64, 2, 32, 4};
  models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 9);
  const inference_engine::options o{.scheduler = {.ctx = 64, .max_batch_tokens = 64}};

  // The reference: every request on one engine.
  std::map<uint64_t, std::vector<int32_t>> reference;
  {
    auto engine = *inference_engine::create(layout, params.data(), o);
    inference_engine& e = *engine;
    for (uint64_t id = 1; id <= 8; ++id)
      ASSERT_TRUE(e.add(router_request(id, 4 + id, 12)).ok());
    while (!e.idle()) {
      auto events = e.step();
      ASSERT_TRUE(events.ok()) << events.status();
      for (const auto& ev : *events)
        reference[ev.id].insert(reference[ev.id].end(), ev.tokens.begin(), ev.tokens.end());
    }
  }

  std::map<std::string, std::unique_ptr<inference_engine>> engines;
  engines["w1"] = *inference_engine::create(layout, params.data(), o);
  engines["w2"] = *inference_engine::create(layout, params.data(), o);
  router r({.max_queue = 64, .max_per_worker = 3});
  std::map<uint64_t, std::vector<int32_t>> streams;
  std::map<uint64_t, int> finished;
  int ended = 0;
  const auto apply = [&](const std::vector<router::command>& commands) {
    for (const auto& c : commands) {
      if (auto* d = std::get_if<router::dispatch>(&c)) {
        ASSERT_TRUE(engines.at(d->worker)->add(d->request).ok());
      } else if (auto* v = std::get_if<router::deliver>(&c)) {
        auto& s = streams[v->event.id];
        ASSERT_EQ(v->event.first_index, static_cast<int>(s.size())) << "a gap or a repeat";
        s.insert(s.end(), v->event.tokens.begin(), v->event.tokens.end());
        finished[v->event.id] += v->event.finished;
        ended += v->event.finished;
      }
    }
  };
  apply(r.add_worker("w1"));
  apply(r.add_worker("w2"));
  for (uint64_t id = 1; id <= 8; ++id)
    apply(*r.submit(router_request(id, 4 + id, 12)));
  for (int iteration = 0; iteration < 500 && ended < 8; ++iteration) {
    if (iteration == 5) {
      engines.erase("w2");  // killed: whatever it held is gone
      apply(r.remove_worker("w2"));
    }
    for (auto& [name, engine] : engines) {
      auto events = engine->step();
      ASSERT_TRUE(events.ok());
      for (const auto& ev : *events)
        apply(r.on_event(name, ev));
    }
  }
  EXPECT_GT(r.replays(), 0u);
  EXPECT_EQ(streams, reference);
  for (uint64_t id = 1; id <= 8; ++id)
    EXPECT_EQ(finished[id], 1) << "request " << id << " ends exactly once";
  EXPECT_EQ(r.in_flight(), 0u);
  EXPECT_EQ(engines.at("w1")->blocks().used_blocks(), 0);
}

TEST(RequestRouter, ADrainingWorkerFinishesItsRequestsAndTakesNoNewOnes) {
  router r({.max_queue = 8, .max_per_worker = 1});
  r.add_worker("w1");
  r.add_worker("w2");
  (void)*r.submit(router_request(1, 4, 8));  // w1
  EXPECT_TRUE(r.set_draining("w1", true).empty());
  auto c = *r.submit(router_request(2, 4, 8));  // w1 is draining: w2
  EXPECT_EQ(all<router::dispatch>(c).at(0).worker, "w2");
  c = *r.submit(router_request(3, 4, 8));  // w2 is full and w1 draining: it waits
  EXPECT_TRUE(all<router::dispatch>(c).empty());
  EXPECT_EQ(r.queued(), 1u);
  // w1's request still streams to its client, and its end does not bring w1 new work.
  generation_event done{1, {5, 6}, 0, true, finish_reason::length};
  c = r.on_event("w1", done);
  ASSERT_EQ(all<router::deliver>(c).size(), 1u);
  EXPECT_TRUE(all<router::dispatch>(c).empty());
  EXPECT_EQ(r.running_on("w1"), 0u);
  // Serving again, w1 takes the waiting request at once.
  c = r.set_draining("w1", false);
  ASSERT_EQ(all<router::dispatch>(c).size(), 1u);
  EXPECT_EQ(all<router::dispatch>(c).at(0).worker, "w1");
  EXPECT_EQ(r.running_on("w1"), 1u);
}

}  // namespace
}  // namespace troupe::actors
