#include "actors/batch_scheduler.hpp"

#include <map>

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

generation_request scheduler_request(uint64_t id, int prompt, int max_tokens,
                                     std::vector<std::string> stop = {}) {
  generation_request r;
  r.id = id;
  r.prompt.assign(prompt, 'a');
  r.max_tokens = max_tokens;
  r.stop = std::move(stop);
  return r;
}

// Runs one iteration as an engine would, sampling `token` for every chunk that samples (its
// log-prob -token, to tell them apart).
std::vector<generation_event> run(batch_scheduler& s, std::vector<batch_chunk>& batch,
                                  int32_t token = 'x') {
  batch = s.schedule();
  s.computed(batch);
  std::vector<generation_event> events;
  for (const auto& c : batch) {
    if (!c.samples) continue;
    for (auto& e : s.on_token(c.id, token, -static_cast<float>(token)))
      events.push_back(e);
  }
  return events;
}

TEST(KvBlockPool, HandsOutAndTakesBackBlocks) {
  kv_block_pool pool(4, 16);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.reserve(a, 17));  // two blocks
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(pool.reserve(a, 32));   // still two
  EXPECT_FALSE(pool.reserve(b, 48));  // three do not fit
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.used_blocks(), 2);
  pool.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.free_blocks(), 4);
}

// Whatever order blocks come back in, the lowest-numbered free ones go out first.
TEST(KvBlockPool, TheLowestFreeBlocksGoOutFirst) {
  kv_block_pool pool(6, 16);
  std::vector<int32_t> a, b, c;
  ASSERT_TRUE(pool.reserve(a, 32));  // 0, 1
  ASSERT_TRUE(pool.reserve(b, 32));  // 2, 3
  ASSERT_TRUE(pool.reserve(c, 32));  // 4, 5
  pool.release(c);
  pool.release(a);
  ASSERT_TRUE(pool.reserve(c, 48));
  EXPECT_EQ(c, (std::vector<int32_t>{0, 1, 4}));
  pool.release(b);
  ASSERT_TRUE(pool.reserve(a, 48));
  EXPECT_EQ(a, (std::vector<int32_t>{2, 3, 5}));
}

// A full block is cached under its hash chain when computed, kept when released, and shared by
// a sequence with the same tokens; it is evicted, least recently released first, only when no
// uncached block is free; a hash whose block holds other tokens (a collision) is not a hit.
TEST(KvBlockPool, CachesFullBlocksAndEvictsTheLeastRecentlyReleased) {
  kv_block_pool pool(4, 2);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  std::vector<uint64_t> chain;
  kv_block_pool::extend_hashes(chain, tokens, 2, 7);
  ASSERT_EQ(chain.size(), 3u);  // the salt and two full blocks
  EXPECT_EQ(chain[0], 7u);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.reserve(a, 5));  // blocks 0, 1, 2
  pool.cache(a, chain, tokens, 0, 2);
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_EQ(pool.share_cached(b, chain, tokens, 2), 2);
  EXPECT_EQ(b, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool.used_blocks(), 3);  // shared, not copied
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 4);  // free, and still cached
  EXPECT_EQ(pool.cached_blocks(), 2);

  // Another salt (other weights) or other tokens under the same hashes: no hit.
  std::vector<uint64_t> salted;
  kv_block_pool::extend_hashes(salted, tokens, 2, 8);
  EXPECT_EQ(pool.share_cached(b, salted, tokens, 2), 0);
  const std::vector<int32_t> other = {1, 2, 9, 9};
  EXPECT_EQ(pool.share_cached(b, chain, other, 2), 1) << "the second block's tokens differ";
  pool.release(b);

  // Uncached blocks go out first (2, 3), then the cached ones, least recently released first:
  // block 0 went back last above, so block 1 is evicted before it.
  ASSERT_TRUE(pool.reserve(a, 6));
  EXPECT_EQ(a, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(pool.cached_blocks(), 1);
  EXPECT_EQ(pool.share_cached(b, chain, tokens, 2), 1);
  pool.release(b);
  pool.forget_cached();
  EXPECT_EQ(pool.cached_blocks(), 0);
  EXPECT_EQ(pool.share_cached(b, chain, tokens, 2), 0);
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 4);
}

// A request whose prompt another one computed starts after the cached blocks (short of its last
// token, whose logits it needs); two arriving together share too: the second waits one
// iteration for the first's blocks. New weights forget the cache.
TEST(BatchScheduler, ARepeatedPromptStartsFromItsCachedPrefix) {
  kv_block_pool pool(16, 4);
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 10, 1)).ok());
  std::vector<batch_chunk> batch;
  run(s, batch);  // computes positions 0..9: blocks 0 and 1 full
  EXPECT_EQ(s.prefix_cache_queries(), 10u);
  EXPECT_EQ(s.prefix_cache_hits(), 0u);
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_EQ(pool.used_blocks(), 0);  // request 1 ended

  ASSERT_TRUE(s.add(scheduler_request(2, 10, 1)).ok());
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].first_position, 8);  // two cached blocks
  EXPECT_EQ(batch[0].count, 2);
  EXPECT_EQ(s.prefix_cache_hits(), 8u);

  ASSERT_TRUE(s.add(scheduler_request(3, 8, 1)).ok());  // all cached: its last block is not
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].first_position, 4);
  EXPECT_EQ(batch[0].count, 4);

  s.new_weights(1);
  EXPECT_EQ(pool.cached_blocks(), 0);
  ASSERT_TRUE(s.add(scheduler_request(4, 10, 1)).ok());
  ASSERT_TRUE(s.add(scheduler_request(5, 10, 1)).ok());
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u) << "request 5 waits for request 4's blocks";
  EXPECT_EQ(batch[0].first_position, 0);
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].id, 5u);
  EXPECT_EQ(batch[0].first_position, 8);

  kv_block_pool plain_pool(16, 4);
  batch_scheduler plain({.ctx = 64, .max_batch_tokens = 64, .prefix_caching = false}, plain_pool);
  ASSERT_TRUE(plain.add(scheduler_request(1, 10, 1)).ok());
  ASSERT_TRUE(plain.add(scheduler_request(2, 10, 1)).ok());
  run(plain, batch);
  EXPECT_EQ(batch.size(), 2u);
  EXPECT_EQ(plain_pool.cached_blocks(), 0);
  EXPECT_EQ(plain.prefix_cache_queries(), 0u);
}

TEST(BatchScheduler, NewRequestsJoinAtTheNextIteration) {
  kv_block_pool pool(64, 16);
  batch_scheduler s({.ctx = 128, .max_batch_tokens = 64}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 10, 5)).ok());
  std::vector<batch_chunk> batch;
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].count, 10);
  ASSERT_TRUE(s.add(scheduler_request(2, 20, 5)).ok());
  run(s, batch);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].id, 1u);  // a decode step
  EXPECT_EQ(batch[0].count, 1);
  EXPECT_EQ(batch[0].first_position, 10);
  EXPECT_EQ(batch[1].id, 2u);  // the newcomer's prefill, in the same batch
  EXPECT_EQ(batch[1].count, 20);
}

TEST(BatchScheduler, StaticBatchingWaitsForTheWholeBatchToEnd) {
  kv_block_pool pool(64, 16);
  batch_scheduler s({.ctx = 128, .max_batch_tokens = 64, .continuous = false}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 10, 3)).ok());
  std::vector<batch_chunk> batch;
  run(s, batch);
  ASSERT_TRUE(s.add(scheduler_request(2, 10, 3)).ok());
  run(s, batch);
  run(s, batch);  // request 1 ends here (3 tokens)
  for (const auto& c : batch)
    EXPECT_EQ(c.id, 1u) << "request 2 joined a running static batch";
  EXPECT_EQ(s.running(), 1u);  // its row is freed when the batch is over, at the next iteration
  run(s, batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].id, 2u);
  EXPECT_EQ(pool.used_blocks(), 1);  // request 2's only
}

// A static batch runs dense, like a padded batch: a sequence that ended keeps its row (one
// padding position per iteration, nothing sampled, nothing streamed) and its blocks until the
// longest one ends.
TEST(BatchScheduler, AStaticBatchKeepsTheRowsOfEndedSequencesUntilItEnds) {
  kv_block_pool pool(64, 4);
  batch_scheduler s({.ctx = 128, .max_batch_tokens = 64, .continuous = false}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 4, 2)).ok());
  ASSERT_TRUE(s.add(scheduler_request(2, 4, 6)).ok());
  std::vector<batch_chunk> batch;
  std::map<uint64_t, int> produced;
  for (int i = 0; i < 6; ++i) {  // the prefill, then 5 more steps of the longest
    for (const auto& e : run(s, batch))
      produced[e.id] += static_cast<int>(e.tokens.size());
    ASSERT_EQ(batch.size(), 2u) << "iteration " << i;
    if (i >= 2) {
      EXPECT_FALSE(batch[0].samples) << "request 1 ended; its row is padding";
      EXPECT_EQ(batch[0].first_position, 4 + i - 1);
    }
  }
  EXPECT_EQ(produced[1], 2);
  EXPECT_EQ(produced[2], 6);
  EXPECT_EQ(s.running(), 2u);
  EXPECT_GT(pool.used_blocks(), 0);
  EXPECT_TRUE(s.schedule().empty());  // the batch is over: every row and block is freed
  EXPECT_EQ(s.running(), 0u);
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_TRUE(s.cancel(1).empty());
}

TEST(BatchScheduler, LongPromptsArePrefilledInChunksUnderTheBudget) {
  kv_block_pool pool(64, 16);
  batch_scheduler s({.ctx = 128, .max_batch_tokens = 16}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 40, 2)).ok());
  std::vector<batch_chunk> batch;
  std::vector<std::pair<int, bool>> chunks;
  for (int i = 0; i < 3; ++i) {
    run(s, batch);
    ASSERT_EQ(batch.size(), 1u);
    chunks.emplace_back(batch[0].count, batch[0].samples);
  }
  EXPECT_EQ(chunks, (std::vector<std::pair<int, bool>>{{16, false}, {16, false}, {8, true}}));
  EXPECT_EQ(s.output_size(1), 1);
}

TEST(BatchScheduler, OutOfBlocksTheNewestIsPreemptedAndRecomputedLater) {
  kv_block_pool pool(4, 4);  // 16 positions in all
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 6, 8)).ok());
  ASSERT_TRUE(s.add(scheduler_request(2, 6, 8)).ok());
  std::vector<batch_chunk> batch;
  std::map<uint64_t, int> produced;
  std::map<uint64_t, bool> done;
  for (int i = 0; i < 40 && !(done[1] && done[2]); ++i) {
    for (const auto& e : run(s, batch)) {
      produced[e.id] += static_cast<int>(e.tokens.size());
      if (e.finished) done[e.id] = true;
    }
    EXPECT_LE(pool.used_blocks(), 4);
  }
  EXPECT_TRUE(done[1] && done[2]);
  EXPECT_EQ(produced[1], 8);
  EXPECT_EQ(produced[2], 8);
  EXPECT_GT(s.preemptions(), 0u);
  EXPECT_EQ(pool.used_blocks(), 0) << "every block comes back";
}

TEST(BatchScheduler, StopStringsEndTheOutputAndAreHeldBackWhileTheyMightStart) {
  kv_block_pool pool(16, 16);
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 4, 10, {"yz"})).ok());
  std::vector<batch_chunk> batch;
  std::string streamed;
  bool finished = false;
  finish_reason reason{};
  for (char c : std::string("xyxyz")) {
    for (const auto& e : run(s, batch, c)) {
      ASSERT_EQ(e.logprobs.size(), e.tokens.size()) << "each token comes with its log-prob";
      for (size_t i = 0; i < e.tokens.size(); ++i) {
        streamed.push_back(static_cast<char>(e.tokens[i]));
        EXPECT_EQ(e.logprobs[i], -static_cast<float>(e.tokens[i]));
      }
      finished = e.finished;
      reason = e.reason;
    }
    if (c == 'y' && !finished) {
      EXPECT_EQ(streamed.back(), 'x') << "a 'y' that may start \"yz\" is held back";
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(reason, finish_reason::stop);
  EXPECT_EQ(streamed, "xyx");
}

// vLLM's include_stop_str_in_output: the stop string stays in the output with its log-probs.
TEST(BatchScheduler, AStopStringCanStayInTheOutput) {
  kv_block_pool pool(16, 16);
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  generation_request r = scheduler_request(1, 4, 10, {"yz"});
  r.include_stop_str_in_output = true;
  ASSERT_TRUE(s.add(r).ok());
  std::vector<batch_chunk> batch;
  std::string streamed;
  std::vector<float> logprobs;
  finish_reason reason{};
  for (char c : std::string("xyz")) {
    for (const auto& e : run(s, batch, c)) {
      for (int32_t t : e.tokens)
        streamed.push_back(static_cast<char>(t));
      logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      reason = e.reason;
    }
  }
  EXPECT_EQ(reason, finish_reason::stop);
  EXPECT_EQ(streamed, "xyz");
  EXPECT_EQ(logprobs, (std::vector<float>{-'x', -'y', -'z'}));
}

// vLLM's stop_token_ids (the model's end of turn): the output ends at one, without it unless
// include_stop_str_in_output.
TEST(BatchScheduler, AStopTokenEndsTheOutput) {
  for (bool include : {false, true}) {
    kv_block_pool pool(16, 16);
    batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
    generation_request r = scheduler_request(1, 4, 10);
    r.stop_token_ids = {7, 9};
    r.include_stop_str_in_output = include;
    ASSERT_TRUE(s.add(r).ok());
    std::vector<batch_chunk> batch;
    std::vector<int32_t> output;
    std::vector<generation_event> events;
    for (int32_t t : {int32_t{'x'}, int32_t{'y'}, 9}) {
      for (const auto& e : events = run(s, batch, t))
        output.insert(output.end(), e.tokens.begin(), e.tokens.end());
    }
    ASSERT_EQ(events.size(), 1u);
    EXPECT_TRUE(events[0].finished);
    EXPECT_EQ(events[0].reason, finish_reason::stop);
    EXPECT_EQ(output,
              include ? (std::vector<int32_t>{'x', 'y', 9}) : (std::vector<int32_t>{'x', 'y'}));
  }
}

// vLLM's min_tokens: a stop string completed before the output has min_tokens tokens does not
// end it, and one completed after does.
TEST(BatchScheduler, StopStringsCountOnceTheOutputHasMinTokens) {
  kv_block_pool pool(16, 16);
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  generation_request r = scheduler_request(1, 4, 10, {"yz"});
  r.min_tokens = 4;
  ASSERT_TRUE(s.add(r).ok());
  std::vector<batch_chunk> batch;
  std::string streamed;
  finish_reason reason = finish_reason::length;
  bool finished = false;
  for (char c : std::string("yzxyzq")) {
    ASSERT_FALSE(finished) << "ended before the second \"yz\"";
    for (const auto& e : run(s, batch, c)) {
      for (int32_t t : e.tokens)
        streamed.push_back(static_cast<char>(t));
      finished = e.finished;
      reason = e.reason;
    }
    if (c == 'z' && streamed.size() > 2) break;
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(reason, finish_reason::stop);
  EXPECT_EQ(streamed, "yzx");
}

// With a real vocabulary a token is several bytes: a stop string is found in the output's text
// wherever it starts. Tokens wholly inside it go; one holding text before it stays (the API
// cuts the text), and a token that may begin one is held back while streaming.
TEST(BatchScheduler, StopStringsAreMatchedOnTheTokensText) {
  // 0 "ab", 1 "c\n", 2 "\n", 3 "\nd", 4 "é" split as 5 "\xC3" + 6 "\xA9"
  auto text = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"ab", "c\n", "\n", "\nd", "é", "\xC3", "\xA9"});
  struct example {
    std::vector<int32_t> said;
    std::vector<int32_t> streamed_before_end;  // released before the last token
    std::vector<int32_t> output;
  };
  for (const example& e : {
           // "ab" "c\n" "\nd": "\n\n" starts inside "c\n", which stays, held until the end
           example{{0, 1, 3}, {0}, {0, 1, 3}},
           // "ab" "\n" "\n": both newline tokens are the stop string
           example{{0, 2, 2}, {0}, {0}},
           // a character whose bytes are two tokens, then the stop string
           example{{5, 6, 2, 2}, {5, 6}, {5, 6}},
       }) {
    kv_block_pool pool(16, 16);
    batch_scheduler s({.ctx = 64, .max_batch_tokens = 64, .token_text = text}, pool);
    generation_request r = scheduler_request(1, 4, 10, {"\n\n"});
    ASSERT_TRUE(s.add(r).ok());
    std::vector<batch_chunk> batch;
    std::vector<int32_t> output;
    bool finished = false;
    for (size_t i = 0; i < e.said.size(); ++i) {
      if (i + 1 == e.said.size()) EXPECT_EQ(output, e.streamed_before_end);
      for (const auto& ev : run(s, batch, e.said[i])) {
        output.insert(output.end(), ev.tokens.begin(), ev.tokens.end());
        finished = finished || (ev.finished && ev.reason == finish_reason::stop);
      }
    }
    EXPECT_TRUE(finished);
    EXPECT_EQ(output, e.output);
  }
}

// stream false (OpenAI's, an RL rollout's): no event until the request ends, then one with its
// whole output and every log-prob, whether a stop string or max_tokens ended it.
TEST(BatchScheduler, AQuietRequestGetsItsWholeOutputInOneEventAtItsEnd) {
  kv_block_pool pool(16, 16);
  batch_scheduler s({.ctx = 64, .max_batch_tokens = 64}, pool);
  generation_request stopped = scheduler_request(1, 4, 10, {"yz"});
  stopped.include_stop_str_in_output = true;
  generation_request cut = scheduler_request(2, 4, 4);
  for (generation_request* r : {&stopped, &cut}) {
    r->stream = false;
    ASSERT_TRUE(s.add(*r).ok());
  }
  std::vector<batch_chunk> batch;
  std::map<uint64_t, std::vector<generation_event>> events;
  for (char c : std::string("xwyz")) {
    for (auto& e : run(s, batch, c))
      events[e.id].push_back(e);
  }
  for (uint64_t id : {1, 2}) {
    ASSERT_EQ(events[id].size(), 1u) << "request " << id;
    EXPECT_TRUE(events[id][0].finished);
    EXPECT_EQ(events[id][0].first_index, 0);
  }
  EXPECT_EQ(events[1][0].reason, finish_reason::stop);
  EXPECT_EQ(std::string(events[1][0].tokens.begin(), events[1][0].tokens.end()), "xwyz");
  EXPECT_EQ(events[1][0].logprobs, (std::vector<float>{-'x', -'w', -'y', -'z'}));
  EXPECT_EQ(events[2][0].reason, finish_reason::length);
  EXPECT_EQ(std::string(events[2][0].tokens.begin(), events[2][0].tokens.end()), "xwyz");
}

TEST(BatchScheduler, RefusesWhatCannotRunAndCancelsAnywhere) {
  kv_block_pool pool(4, 16);
  batch_scheduler s({.ctx = 32, .max_batch_tokens = 64}, pool);
  EXPECT_EQ(s.add(scheduler_request(1, 0, 4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add(scheduler_request(1, 32, 4)).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.add(scheduler_request(1, 4, 0)).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.add(scheduler_request(1, 4, 100)).ok());  // ends at the context: 28 tokens
  EXPECT_EQ(s.add(scheduler_request(1, 4, 4)).code(), absl::StatusCode::kAlreadyExists);
  kv_block_pool small(1, 16);
  batch_scheduler t({.ctx = 64, .max_batch_tokens = 64}, small);
  EXPECT_EQ(t.add(scheduler_request(2, 10, 10)).code(), absl::StatusCode::kOutOfRange);

  std::vector<batch_chunk> batch;
  run(s, batch);
  EXPECT_GT(pool.used_blocks(), 0);
  auto events = s.cancel(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].finished);
  EXPECT_EQ(events[0].reason, finish_reason::cancelled);
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_TRUE(s.cancel(1).empty());
  EXPECT_TRUE(s.schedule().empty());
}

TEST(BatchScheduler, GenerationEndsAtTheContext) {
  kv_block_pool pool(4, 16);
  batch_scheduler s({.ctx = 16, .max_batch_tokens = 64}, pool);
  ASSERT_TRUE(s.add(scheduler_request(1, 12, 100)).ok());
  std::vector<batch_chunk> batch;
  int produced = 0;
  bool finished = false;
  for (int i = 0; i < 10 && !finished; ++i) {
    for (const auto& e : run(s, batch)) {
      produced += static_cast<int>(e.tokens.size());
      finished = e.finished;
      EXPECT_EQ(e.reason, finish_reason::length);
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(produced, 4);
}

}  // namespace
}  // namespace troupe::actors
