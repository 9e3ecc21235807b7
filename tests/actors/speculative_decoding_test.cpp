#include "actors/speculative_decoding.hpp"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "actors/inference_engine.hpp"

namespace troupe::actors {
namespace {

using tokens_t = std::vector<int32_t>;

// vLLM's example: [2, 3] ends the sequence and occurs at its start, followed by [4, 2, 3].
TEST(PromptLookup, ProposesWhatFollowedTheLongestEarlierMatchOfTheEnd) {
  EXPECT_EQ(propose_by_prompt_lookup(tokens_t{1, 2, 3, 4, 2, 3}, 2, 3, 4), (tokens_t{4, 2, 3}));
  EXPECT_EQ(propose_by_prompt_lookup(tokens_t{1, 2, 3, 4, 2, 3}, 2, 3, 2), (tokens_t{4, 2}));
  // The longest match wins over a shorter, later one: [7, 2, 3] is followed by 8.
  EXPECT_EQ(propose_by_prompt_lookup(tokens_t{7, 2, 3, 8, 5, 2, 3, 9, 7, 2, 3}, 1, 3, 1),
            (tokens_t{8}));
  // Among the longest, the earliest.
  EXPECT_EQ(propose_by_prompt_lookup(tokens_t{5, 6, 1, 5, 6, 2, 5, 6}, 2, 2, 1), (tokens_t{1}));
  // Nothing of at least min_n tokens recurs; a sequence too short; no drafts wanted.
  EXPECT_TRUE(propose_by_prompt_lookup(tokens_t{1, 2, 3, 4, 3}, 2, 4, 3).empty());
  EXPECT_TRUE(propose_by_prompt_lookup(tokens_t{3}, 1, 4, 3).empty());
  EXPECT_TRUE(propose_by_prompt_lookup(tokens_t{1, 2, 1, 2}, 1, 4, 0).empty());
}

// The token that results from checking a draft is distributed as the model's sampling
// distribution exactly, whatever the draft and however the proposer drew it (fixed counters: the
// verdict is the same on every machine).
TEST(VerifyDraftToken, KeepsTheTargetDistribution) {
  const std::vector<float> logits = {2.0f, 1.5f, 0.2f, -1.0f, 1.1f, 0.0f, -3.0f, 0.7f};
  const int vocab = static_cast<int>(logits.size());
  const kernels::sampling_params p{0.8f, 6, 1.0f};  // top_k cuts two tokens
  std::vector<float> target(vocab);
  kernels::cpu::sampling_weights(logits.data(), vocab, p, target.data());
  double sum = 0;
  for (float w : target)
    sum += w;
  for (float& w : target)
    w = static_cast<float>(w / sum);
  // A draft model's distribution, unlike the target (and giving mass to a cut token).
  const std::vector<float> draft_probs = {0.05f, 0.4f, 0.1f, 0.05f, 0.1f, 0.1f, 0.1f, 0.1f};
  const int n = 200000;
  for (const bool sure : {true, false}) {
    for (const int32_t fixed_draft : {0, 2, 6}) {
      std::vector<int> seen(vocab, 0);
      int accepted = 0;
      for (int i = 0; i < n; ++i) {
        int32_t draft = fixed_draft;
        if (!sure) {  // drawn from the draft model's distribution
          draft =
              kernels::cpu::draw_token(draft_probs.data(), vocab, kernels::seeded_uniform(99, i));
        }
        const draft_verdict v = verify_draft_token(logits.data(), vocab, p, 7, i, draft,
                                                   sure ? nullptr : draft_probs.data());
        ++seen[v.token];
        accepted += v.accepted;
        if (v.accepted) {
          EXPECT_EQ(v.token, draft);
        }
      }
      for (int t = 0; t < vocab; ++t) {
        EXPECT_NEAR(static_cast<double>(seen[t]) / n, target[t], 0.006)
            << "token " << t << (sure ? ", sure draft " : ", drawn drafts ") << fixed_draft;
      }
      if (sure) {
        EXPECT_NEAR(static_cast<double>(accepted) / n, target[fixed_draft], 0.006);
      }
    }
  }
  // Greedy: the draft stands when it is the most likely token, else that token replaces it.
  EXPECT_TRUE(verify_draft_token(logits.data(), vocab, {0.0f}, 1, 0, 0).accepted);
  const draft_verdict replaced = verify_draft_token(logits.data(), vocab, {0.0f}, 1, 0, 4);
  EXPECT_FALSE(replaced.accepted);
  EXPECT_EQ(replaced.token, 0);
}

const models::decoder_config speculated_model{256, 96, 2, 32, 4};

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  SpeculativeEngineTest() : layout_(speculated_model, models::layer_range::all(speculated_model)) {
    params_.resize(layout_.total());
    layout_.initialize(params_.data(), 11);
  }

  struct output {
    tokens_t tokens;
    std::vector<float> logprobs;
    std::vector<int32_t> top_tokens;
    actor::finish_reason reason{};
    bool operator==(const output&) const = default;
  };

  // Runs `requests` to the end together.
  std::map<uint64_t, output> generate(inference_engine::options o,
                                      const std::vector<generation_request>& requests) {
    auto created = inference_engine::create(layout_, params_.data(), o);
    EXPECT_TRUE(created.ok()) << created.status();
    engine_ = std::move(*created);
    std::map<uint64_t, output> out;
    for (const auto& r : requests)
      EXPECT_TRUE(engine_->add(r).ok());
    for (int i = 0; i < 2000 && !engine_->idle(); ++i) {
      auto events = engine_->step();
      EXPECT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events) {
        output& o = out[e.id];
        o.tokens.insert(o.tokens.end(), e.tokens.begin(), e.tokens.end());
        o.logprobs.insert(o.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        o.top_tokens.insert(o.top_tokens.end(), e.top_tokens.begin(), e.top_tokens.end());
        if (e.finished) o.reason = e.reason;
      }
    }
    EXPECT_TRUE(engine_->idle());
    EXPECT_EQ(engine_->blocks().used_blocks(), 0);
    return out;
  }

  // Greedy requests whose prompts repeat a phrase (so that prompt lookup has something to
  // find), with top log-probs, penalties, a stop token and lengths that end some of them early.
  static std::vector<generation_request> greedy_requests() {
    std::vector<generation_request> requests;
    for (uint64_t id = 1; id <= 6; ++id) {
      generation_request r;
      r.id = id;
      for (int rep = 0; rep < 3; ++rep) {
        for (int i = 0; i < 6 + static_cast<int>(id); ++i)
          r.prompt.push_back(static_cast<int32_t>('a' + (i * id + 3) % 26));
      }
      r.temperature = 0.0f;
      r.seed = id;
      r.max_tokens = 20 + 7 * static_cast<int>(id);
      r.top_logprobs = id % 2 == 0 ? 2 : 0;
      if (id == 3) r.frequency_penalty = 0.3f;
      if (id == 4) r.repetition_penalty = 1.2f;
      if (id == 5) r.stop_token_ids = {'q'};
      if (id == 6) r.stream = false;
      requests.push_back(r);
    }
    return requests;
  }

  models::decoder_layout layout_;
  std::vector<float> params_;
  std::unique_ptr<inference_engine> engine_;
};

// Greedy output with prompt lookup is the same tokens, log-probs and top alternatives as
// without, with drafts accepted along the way; under continuous batching with chunked prefill,
// under preemption, and at the context's end.
TEST_F(SpeculativeEngineTest, GreedyOutputIsTheSameAsWithoutSpeculation) {
  const inference_engine::options plain{.scheduler = {.ctx = 96, .max_batch_tokens = 64}};
  const auto reference = generate(plain, greedy_requests());
  ASSERT_EQ(reference.size(), 6u);
  for (const int k : {1, 3, 5}) {
    inference_engine::options o = plain;
    o.speculative = {.num_speculative_tokens = k, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
    EXPECT_EQ(generate(o, greedy_requests()), reference) << k << " speculative tokens";
    const auto& counts = engine_->speculation();
    EXPECT_GT(counts.drafts, 0u);
    EXPECT_GT(counts.accepted_tokens, 0u) << k;
    EXPECT_LE(counts.accepted_tokens, counts.draft_tokens);
    EXPECT_LE(counts.draft_tokens, counts.drafts * k);
  }
  // Few blocks: sequences are preempted and recomputed, drafts and all.
  inference_engine::options tight = plain;
  tight.kv_blocks = 14;
  tight.block_size = 8;
  tight.speculative = {.num_speculative_tokens = 4, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
  EXPECT_EQ(generate(tight, greedy_requests()), reference);
  EXPECT_GT(engine_->scheduler().preemptions(), 0u);
  EXPECT_GT(engine_->speculation().accepted_tokens, 0u);
}

// disable_by_batch_size: while more sequences run than it allows, no step checks drafts; once few
// enough remain, they do again. Greedy output is the same either way.
TEST_F(SpeculativeEngineTest, ALargeBatchDecodesWithoutDrafts) {
  const inference_engine::options plain{.scheduler = {.ctx = 96, .max_batch_tokens = 256}};
  const auto reference = generate(plain, greedy_requests());
  inference_engine::options o = plain;
  o.speculative = {.num_speculative_tokens = 3, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
  o.speculative.disable_by_batch_size = 6;  // the six requests run at once: never more than 6
  EXPECT_EQ(generate(o, greedy_requests()), reference);
  const uint64_t drafts_at_six = engine_->speculation().drafts;
  EXPECT_GT(drafts_at_six, 0u);
  o.speculative.disable_by_batch_size = 5;  // drafts once a request has ended
  EXPECT_EQ(generate(o, greedy_requests()), reference);
  const uint64_t drafts_at_five = engine_->speculation().drafts;
  EXPECT_GT(drafts_at_five, 0u);
  EXPECT_LT(drafts_at_five, drafts_at_six);
}

// A sampled request's output with speculation is its seed's: the same again, and unchanged by
// what it is batched with.
TEST_F(SpeculativeEngineTest, SampledOutputIsReproducibleFromItsSeed) {
  std::vector<generation_request> requests = greedy_requests();
  for (auto& r : requests) {
    r.temperature = 0.1f;  // peaked enough that drafts stand
    r.top_k = 20;
  }
  inference_engine::options o{.scheduler = {.ctx = 96, .max_batch_tokens = 256}};
  o.speculative = {.num_speculative_tokens = 3, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
  const auto together = generate(o, requests);
  EXPECT_GT(engine_->speculation().accepted_tokens, 0u);
  EXPECT_EQ(generate(o, requests), together);
  for (const auto& r : requests) {
    const auto alone = generate(o, {r});
    EXPECT_EQ(alone.at(r.id), together.at(r.id)) << "request " << r.id;
  }
}

// Only blocks of confirmed tokens enter the prefix cache: a later request whose prompt is an
// earlier one's prompt and output finds them, and continues as without speculation.
TEST_F(SpeculativeEngineTest, PrefixCacheHoldsOnlyConfirmedTokens) {
  generation_request first = greedy_requests()[1];
  first.max_tokens = 40;
  first.top_logprobs = 0;
  inference_engine::options o{.scheduler = {.ctx = 96, .max_batch_tokens = 64}, .block_size = 4};
  const auto plain_first = generate(o, {first});
  o.speculative = {.num_speculative_tokens = 4, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
  const auto speculated_first = generate(o, {first});
  ASSERT_EQ(speculated_first, plain_first);
  ASSERT_GT(engine_->speculation().accepted_tokens, 0u);
  // The same engine: its cache holds the first request's blocks.
  generation_request second = first;
  second.id = 9;
  second.prompt.insert(second.prompt.end(), plain_first.at(first.id).tokens.begin(),
                       plain_first.at(first.id).tokens.end());
  second.max_tokens = 12;
  ASSERT_TRUE(engine_->add(second).ok());
  tokens_t continued;
  while (!engine_->idle()) {
    auto events = engine_->step();
    ASSERT_TRUE(events.ok()) << events.status();
    for (const auto& e : *events)
      continued.insert(continued.end(), e.tokens.begin(), e.tokens.end());
  }
  const int prompt = static_cast<int>(second.prompt.size());
  EXPECT_EQ(engine_->scheduler().prefix_cache_hits(), static_cast<uint64_t>((prompt - 1) / 4 * 4));
  o.speculative = {};
  EXPECT_EQ(generate(o, {second}).at(second.id).tokens, continued);
}

// A draft model with the target's own weights guesses what the target draws: every draft token
// is accepted, greedy or sampled (its distribution q is the target's p, bit for bit, so that
// min(1, p / q) is 1), and greedy output is the target's alone.
TEST_F(SpeculativeEngineTest, ADraftModelEqualToTheTargetHasEveryDraftAccepted) {
  std::vector<generation_request> requests = greedy_requests();
  for (auto& r : requests) {  // a draft model knows no penalties
    r.frequency_penalty = 0;
    r.repetition_penalty = 1;
  }
  const inference_engine::options plain{.scheduler = {.ctx = 96, .max_batch_tokens = 64}};
  inference_engine::options o = plain;
  o.speculative.num_speculative_tokens = 3;
  o.draft_layout = &layout_;
  o.draft_params = params_.data();
  EXPECT_EQ(generate(o, requests), generate(plain, requests));
  const auto greedy = engine_->speculation();
  EXPECT_GT(greedy.draft_tokens, 0u);
  EXPECT_EQ(greedy.accepted_tokens, greedy.draft_tokens);
  for (auto& r : requests) {
    r.temperature = 0.8f;
    r.top_k = 50;
  }
  const auto sampled = generate(o, requests);
  EXPECT_EQ(generate(o, requests), sampled);  // the seed's
  EXPECT_GT(engine_->speculation().draft_tokens, 0u);
  EXPECT_EQ(engine_->speculation().accepted_tokens, engine_->speculation().draft_tokens);
}

// A draft model of other weights (smaller, another seed) guesses worse, and greedy output is
// still the target's alone; its cache follows each sequence through rejections and preemption.
TEST_F(SpeculativeEngineTest, ADraftModelOfOtherWeightsLeavesGreedyOutputUnchanged) {
  models::decoder_config small{256, 96, 1, 32, 2};
  const models::decoder_layout draft(small, models::layer_range::all(small));
  std::vector<float> draft_params(draft.total());
  draft.initialize(draft_params.data(), 3);
  const inference_engine::options plain{.scheduler = {.ctx = 96, .max_batch_tokens = 64}};
  const auto reference = generate(plain, greedy_requests());
  inference_engine::options o = plain;
  o.speculative.num_speculative_tokens = 4;
  o.draft_layout = &draft;
  o.draft_params = draft_params.data();
  EXPECT_EQ(generate(o, greedy_requests()), reference);
  EXPECT_GT(engine_->speculation().draft_tokens, 0u);
  o.kv_blocks = 14;
  o.block_size = 8;
  EXPECT_EQ(generate(o, greedy_requests()), reference);
  EXPECT_GT(engine_->scheduler().preemptions(), 0u);
  // A draft model must share the target's vocabulary.
  small.vocab = 128;
  const models::decoder_layout other(small, models::layer_range::all(small));
  std::vector<float> other_params(other.total());
  o.draft_layout = &other;
  o.draft_params = other_params.data();
  const auto refused = inference_engine::create(layout_, params_.data(), o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("128 tokens and the served model's 256"),
            std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace troupe::actors
