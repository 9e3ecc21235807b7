#include "actors/inference_engine.hpp"

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "models/decoder/cpu_paged_decoder.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "nlohmann/json.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config engine_model{256, 64, 2, 32, 4};

class InferenceEngineTest : public ::testing::Test {
 protected:
  InferenceEngineTest() : layout_(engine_model, models::layer_range::all(engine_model)) {
    params_.resize(layout_.total());
    layout_.initialize(params_.data(), 5);
  }

  // Runs every request to the end; returns each one's output and how many preemptions happened.
  std::map<uint64_t, std::vector<int32_t>> generate(inference_engine::options o,
                                                    uint64_t* preemptions = nullptr) {
    auto created = inference_engine::create(layout_, params_.data(), o);
    EXPECT_TRUE(created.ok()) << created.status();
    inference_engine& engine = **created;
    std::map<uint64_t, std::vector<int32_t>> out;
    for (uint64_t id = 1; id <= 6; ++id) {
      generation_request r;
      r.id = id;
      for (int i = 0; i < 5 + static_cast<int>(id) * 3; ++i)
        r.prompt.push_back(static_cast<int32_t>('a' + (i * id) % 26));
      r.temperature = id % 2 == 0 ? 0.0f : 0.9f;
      r.top_k = 40;
      r.top_p = 0.95f;
      r.seed = 100 + id;
      r.max_tokens = 6 + static_cast<int>(id);
      EXPECT_TRUE(engine.add(r).ok());
    }
    for (int i = 0; i < 1000 && !engine.idle(); ++i) {
      auto events = engine.step();
      EXPECT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events)
        out[e.id].insert(out[e.id].end(), e.tokens.begin(), e.tokens.end());
    }
    EXPECT_TRUE(engine.idle());
    EXPECT_EQ(engine.blocks().used_blocks(), 0);
    if (preemptions) *preemptions = engine.scheduler().preemptions();
    return out;
  }

  models::decoder_layout layout_;
  std::vector<float> params_;
};

// Seeded sampling makes a request's output independent of what it was batched with, of chunked
// prefill, and of being preempted and recomputed.
TEST_F(InferenceEngineTest, OutputsDoNotDependOnBatchingOrPreemption) {
  const auto reference = generate({.scheduler = {.ctx = 64, .max_batch_tokens = 256}});
  ASSERT_EQ(reference.size(), 6u);
  for (const auto& [id, tokens] : reference)
    EXPECT_EQ(static_cast<int>(tokens.size()), 6 + static_cast<int>(id));
  EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 256, .continuous = false}}),
            reference);
  EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 8}}), reference);
  uint64_t preemptions = 0;
  EXPECT_EQ(
      generate({.scheduler = {.ctx = 64, .max_batch_tokens = 64}, .kv_blocks = 6, .block_size = 8},
               &preemptions),
      reference);
  EXPECT_GT(preemptions, 0u);
}

// Quantized weights and an int8 KV cache keep the engine's promise: a request's output does not
// depend on its batch, chunked prefill or preemption, with int8 and with int4 block weights.
TEST_F(InferenceEngineTest, QuantizedWeightsKeepOutputsIndependentOfBatching) {
  for (const models::weight_quantization q :
       {models::weight_quantization{8, 0}, models::weight_quantization{4, 32}}) {
    SCOPED_TRACE(q.describe());
    const auto reference =
        generate({.scheduler = {.ctx = 64, .max_batch_tokens = 256}, .quantization = q});
    ASSERT_EQ(reference.size(), 6u);
    EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 8}, .quantization = q}),
              reference);
    EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 64},
                        .kv_blocks = 6,
                        .block_size = 8,
                        .threads = 2,
                        .quantization = q}),
              reference);
  }
  // And with an int8 KV cache besides.
  const inference_engine::options int8_kv{.scheduler = {.ctx = 64, .max_batch_tokens = 256},
                                          .quantization = {8, 0},
                                          .kv_cache_dtype = models::kv_cache_dtype::int8};
  const auto reference = generate(int8_kv);
  inference_engine::options chunked = int8_kv;
  chunked.scheduler.max_batch_tokens = 8;
  chunked.threads = 2;
  EXPECT_EQ(generate(chunked), reference);
  const auto refused = inference_engine::create(
      layout_, params_.data(), {.scheduler = {.ctx = 64}, .quantization = {4, 48}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

// Prefix caching changes what is computed, never what comes out: requests sharing a 40-token
// system prompt (and one repeating another's whole prompt), in a burst and then again, give the
// same tokens and bit-identical log-probs with the cache as without, with a roomy cache and with
// one so small that blocks are evicted and sequences preempted.
TEST_F(InferenceEngineTest, PrefixCachingChangesNothingButTheWork) {
  struct output {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    bool operator==(const output&) const = default;
  };
  const auto serve = [&](bool caching, int kv_blocks, uint64_t* hits = nullptr) {
    inference_engine::options o{
        .scheduler = {.ctx = 64, .max_batch_tokens = 48}, .kv_blocks = kv_blocks, .block_size = 8};
    o.scheduler.prefix_caching = caching;
    auto engine = *inference_engine::create(layout_, params_.data(), o);
    std::map<uint64_t, output> out;
    for (int wave = 0; wave < 2; ++wave) {
      for (uint64_t i = 1; i <= 4; ++i) {
        generation_request r;
        r.id = wave * 10 + i;
        for (int t = 0; t < 40; ++t)
          r.prompt.push_back(static_cast<int32_t>('A' + t % 23));
        for (uint64_t t = 0; t < (i == 4 ? 1 : i); ++t)  // 4 repeats 1's prompt
          r.prompt.push_back(static_cast<int32_t>('a' + t));
        r.temperature = i % 2 == 0 ? 0.0f : 0.8f;
        r.seed = r.id;
        r.max_tokens = 10;
        EXPECT_TRUE(engine->add(r).ok());
      }
      for (int step = 0; step < 1000 && !engine->idle(); ++step) {
        auto events = engine->step();
        EXPECT_TRUE(events.ok()) << events.status();
        for (const auto& e : *events) {
          out[e.id].tokens.insert(out[e.id].tokens.end(), e.tokens.begin(), e.tokens.end());
          out[e.id].logprobs.insert(out[e.id].logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        }
      }
      EXPECT_TRUE(engine->idle());
    }
    EXPECT_EQ(engine->blocks().used_blocks(), 0);
    if (hits != nullptr) *hits = engine->scheduler().prefix_cache_hits();
    return out;
  };
  const auto reference = serve(false, 256);
  ASSERT_EQ(reference.size(), 8u);
  uint64_t hits = 0;
  EXPECT_EQ(serve(true, 256, &hits), reference);
  // Three of the first burst and all four of the second share the system prompt's 5 blocks.
  EXPECT_EQ(hits, 7u * 40);
  EXPECT_EQ(serve(true, 8, &hits), reference) << "evicting and preempting";
}

// The first iteration prefills every prompt together; the next decodes one token for each.
TEST_F(InferenceEngineTest, ReportsTheBatchItRan) {
  auto created = inference_engine::create(layout_, params_.data(), {.scheduler = {.ctx = 64}});
  ASSERT_TRUE(created.ok()) << created.status();
  inference_engine& engine = **created;
  for (uint64_t id = 1; id <= 3; ++id) {
    generation_request r;
    r.id = id;
    r.prompt.assign(4 * id, 'x');
    ASSERT_TRUE(engine.add(r).ok());
  }
  ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.last_batch_sequences(), 3);
  EXPECT_EQ(engine.last_batch_tokens(), 4 + 8 + 12);
  EXPECT_EQ(engine.blocks().used_blocks(), 3);  // one 16-position block each
  ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.last_batch_sequences(), 3);
  EXPECT_EQ(engine.last_batch_tokens(), 3);
}

// Each sampled token's log-prob is what the training forward gives the same tokens under the
// request's temperature (1 when greedy), up to the decoder's float rounding.
TEST_F(InferenceEngineTest, EachTokenComesWithItsLogProbUnderTheSamplingTemperature) {
  auto engine = *inference_engine::create(layout_, params_.data(),
                                          {.scheduler = {.ctx = 64, .max_batch_tokens = 64}});
  std::map<uint64_t, generation_request> requests;
  for (uint64_t id = 1; id <= 3; ++id) {
    generation_request r;
    r.id = id;
    r.prompt = {'a', 'b', static_cast<int32_t>('c' + id)};
    r.temperature = id == 3 ? 0.0f : 0.6f * static_cast<float>(id);
    r.seed = id;
    r.max_tokens = 10;
    r.top_logprobs = id == 3 ? 3 : 0;
    ASSERT_TRUE(engine->add(r).ok());
    requests[id] = r;
  }
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::vector<float>> logprobs;
  std::vector<int32_t> top_tokens;  // the greedy request's
  std::vector<float> top_values;
  for (int i = 0; i < 100 && !engine->idle(); ++i) {
    const auto events = engine->step();
    ASSERT_TRUE(events.ok()) << events.status();
    for (const auto& e : *events) {
      ASSERT_EQ(e.logprobs.size(), e.tokens.size());
      tokens[e.id].insert(tokens[e.id].end(), e.tokens.begin(), e.tokens.end());
      logprobs[e.id].insert(logprobs[e.id].end(), e.logprobs.begin(), e.logprobs.end());
      EXPECT_EQ(e.top_tokens.size(), e.id == 3 ? 3 * e.tokens.size() : 0u);
      top_tokens.insert(top_tokens.end(), e.top_tokens.begin(), e.top_tokens.end());
      top_values.insert(top_values.end(), e.top_values.begin(), e.top_values.end());
    }
  }
  for (const auto& [id, r] : requests) {
    std::vector<int32_t> sequence = r.prompt;
    sequence.insert(sequence.end(), tokens[id].begin(), tokens[id].end());
    const int n = static_cast<int>(sequence.size()), prompt = static_cast<int>(r.prompt.size());
    std::vector<int32_t> targets(n, -1);
    for (int t = prompt - 1; t + 1 < n; ++t)
      targets[t] = sequence[t + 1];
    models::decoder_cpu_stage stage(layout_, 1, nullptr);
    stage.forward(params_.data(), 1, n, sequence.data(), nullptr, targets.data(),
                  r.temperature > 0 ? r.temperature : 1.0f);
    ASSERT_EQ(logprobs[id].size(), 10u);
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(logprobs[id][k], -stage.token_losses()[prompt - 1 + k], 2e-5)
          << "request " << id << " token " << k;
      EXPECT_LT(logprobs[id][k], 0.0f);
      if (id != 3) continue;
      // Greedy: the sampled token is the most likely one, then two less likely alternatives.
      EXPECT_EQ(top_tokens[3 * k], tokens[id][k]);
      EXPECT_EQ(top_values[3 * k], logprobs[id][k]);
      EXPECT_GE(top_values[3 * k + 1], top_values[3 * k + 2]);
      EXPECT_LE(top_values[3 * k + 1], top_values[3 * k]);
    }
  }
}

// New weights between generations: the next outputs are the new model's, tagged with its version
// (the prompt's two full blocks, cached under the old weights, are not reused); a swap while a
// request is in flight is refused.
TEST_F(InferenceEngineTest, WeightsSwapBetweenGenerationsAndOutputsCarryTheirVersion) {
  std::vector<float> other(layout_.total());
  layout_.initialize(other.data(), 6);
  const auto greedy = [](inference_engine& engine) {
    generation_request r;
    r.id = 1;
    for (int i = 0; i < 20; ++i)
      r.prompt.insert(r.prompt.end(), {'h', 'i'});
    r.temperature = 0;
    r.max_tokens = 12;
    EXPECT_TRUE(engine.add(r).ok());
    std::vector<float> out;  // each token and its log-prob
    std::set<uint64_t> versions;
    while (!engine.idle()) {
      const auto events = engine.step();
      EXPECT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events) {
        for (size_t i = 0; i < e.tokens.size(); ++i)
          out.insert(out.end(), {static_cast<float>(e.tokens[i]), e.logprobs.at(i)});
        versions.insert(e.weights_version);
      }
    }
    return std::pair{out, versions};
  };
  const inference_engine::options o{.scheduler = {.ctx = 64, .max_batch_tokens = 64}};
  auto fresh = *inference_engine::create(layout_, other.data(), o);
  const auto [want, fresh_versions] = greedy(*fresh);

  auto engine = *inference_engine::create(layout_, params_.data(), o);
  const auto [before, first_versions] = greedy(*engine);
  EXPECT_EQ(first_versions, std::set<uint64_t>{0});
  ASSERT_TRUE(engine->swap_weights(other.data(), 7).ok());
  const auto [after, versions] = greedy(*engine);
  EXPECT_EQ(after, want) << "generates as a fresh engine on the new weights";
  EXPECT_NE(after, before);
  EXPECT_EQ(versions, std::set<uint64_t>{7});

  generation_request r;
  r.id = 2;
  r.prompt = {'x'};
  ASSERT_TRUE(engine->add(r).ok());
  const absl::Status busy = engine->swap_weights(params_.data(), 8);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.message().find("1 wait"), std::string::npos) << busy;
  EXPECT_EQ(engine->weights_version(), 7u);
}

// The request's logit adjustments reach the draw with the sequence split right: the prompt
// counts for the repetition penalty, only the output for the frequency and presence penalties,
// and min_tokens keeps a stop token out until it is met.
TEST_F(InferenceEngineTest, LogitBiasPenaltiesAndMinTokensSteerTheDraw) {
  auto engine = *inference_engine::create(layout_, params_.data(),
                                          {.scheduler = {.ctx = 64, .max_batch_tokens = 64}});
  uint64_t next_id = 1;
  const auto run = [&](generation_request r) {
    r.id = next_id++;
    r.temperature = 0;
    EXPECT_TRUE(engine->add(r).ok());
    std::vector<int32_t> out;
    while (!engine->idle()) {
      const auto events = engine->step();
      EXPECT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events)
        out.insert(out.end(), e.tokens.begin(), e.tokens.end());
    }
    return out;
  };
  generation_request base;
  base.prompt = {'y', 'y', 'y', 'y'};
  base.max_tokens = 8;
  // +100 on 'y' and 'z' makes them the only candidates; the model's own preference between them
  // is far below the penalties.
  base.logit_bias = {{'y', 100.0f}, {'z', 100.0f}};
  const std::vector<int32_t> plain = run(base);
  ASSERT_EQ(plain.size(), 8u);
  EXPECT_EQ(std::set<int32_t>(plain.begin(), plain.end()).size(), 1u)
      << "the model's preference between the two holds without penalties";
  generation_request r = base;
  r.frequency_penalty = 2.0f;
  r.presence_penalty = 2.0f;
  const std::vector<int32_t> penalized = run(r);
  EXPECT_EQ(penalized.front(), plain.front()) << "the prompt is not the output";
  int balance = 0;  // 'y's less 'z's so far: the penalties keep it within one
  for (size_t i = 0; i < penalized.size(); ++i) {
    balance += penalized[i] == 'y' ? 1 : -1;
    EXPECT_LE(std::abs(balance), 1) << i;
  }
  r = base;
  r.repetition_penalty = 2.0f;
  EXPECT_EQ(run(r).front(), 'z') << "the prompt's 'y' is penalized";
  // The first greedy token as a stop token ends the output at once, unless min_tokens holds it.
  r = base;
  r.logit_bias = {};
  const int32_t first = run(r).front();
  r.stop_token_ids = {first};
  EXPECT_TRUE(run(r).empty());
  r.min_tokens = 3;
  const std::vector<int32_t> held = run(r);
  ASSERT_GE(held.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_NE(held[i], first) << i;
  r.logit_bias = {{300, 1.0f}};
  r.id = 99;
  EXPECT_EQ(engine->add(r).code(), absl::StatusCode::kInvalidArgument);
}

// Structured output: a random model's samples, masked by the schema's grammar, end as soon as
// the value is whole ("stop") and parse as the schema asks; a schema outside the subset is
// refused when the request is added.
TEST_F(InferenceEngineTest, StructuredOutputIsAlwaysAValueOfTheSchema) {
  auto engine = *inference_engine::create(layout_, params_.data(),
                                          {.scheduler = {.ctx = 64, .max_batch_tokens = 64}});
  const std::string schema = R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 6}, "n": {"type": "integer"},
      "sunny": {"type": "boolean"}}, "required": ["city", "sunny"]})";
  std::map<uint64_t, std::vector<int32_t>> out;
  std::map<uint64_t, finish_reason> reasons;
  for (uint64_t id = 1; id <= 8; ++id) {
    generation_request r;
    r.id = id;
    r.prompt = {'J', 'S', 'O', 'N', ':'};
    r.seed = id;
    r.temperature = id == 1 ? 0.0f : 1.0f;
    r.max_tokens = 59;
    r.json_schema = id % 2 == 0 ? R"({"type": "object"})" : schema;
    ASSERT_TRUE(engine->add(r).ok());
  }
  generation_request again;  // a second request 1 is refused, and leaves the first guided
  again.id = 1;
  again.prompt = {'x'};
  EXPECT_EQ(engine->add(again).code(), absl::StatusCode::kAlreadyExists);
  while (!engine->idle()) {
    const auto events = engine->step();
    ASSERT_TRUE(events.ok()) << events.status();
    for (const auto& e : *events) {
      out[e.id].insert(out[e.id].end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) reasons[e.id] = e.reason;
    }
  }
  for (const auto& [id, tokens] : out) {
    const std::string text(tokens.begin(), tokens.end());
    SCOPED_TRACE(text);
    if (reasons[id] != finish_reason::stop) {  // a free object may outgrow max_tokens
      EXPECT_EQ(id % 2, 0u);
      continue;
    }
    const auto value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(value.is_object());
    if (id % 2 == 0) continue;
    ASSERT_TRUE(value.contains("city") && value["city"].is_string());
    ASSERT_TRUE(value.contains("sunny") && value["sunny"].is_boolean());
    if (value.contains("n")) EXPECT_TRUE(value["n"].is_number_integer());
  }
  EXPECT_EQ(reasons[1], finish_reason::stop);
  EXPECT_EQ(reasons[3], finish_reason::stop);
  generation_request bad;
  bad.id = 20;
  bad.prompt = {'x'};
  bad.json_schema = R"({"type": "string", "pattern": "x"})";
  const absl::Status refused = engine->add(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("'pattern'"), std::string::npos) << refused;
}

// Pooling requests (embeddings) end at their prompts with the final norm's hidden state: at the
// last token (LAST), or averaged over the prompt (MEAN), the same bits however the prompt is
// chunked and whatever runs beside it, the generations beside them unchanged.
TEST_F(InferenceEngineTest, PoolingRequestsEndWithTheirEmbeddings) {
  const int C = engine_model.dim;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i)
    prompt.push_back('a' + (i * 7) % 26);
  // The reference: the decoder's hidden rows of the whole prompt in one pass.
  models::cpu_paged_decoder decoder(layout_, params_.data(), 64, 8, 8);
  const std::vector<int32_t> table = {0, 1, 2};
  models::decode_request whole{prompt.data(), 21, 0, table.data(), 3, 21, true};
  std::vector<float> rows(21 * C);
  ASSERT_TRUE(decoder.forward({&whole, 1}, nullptr, rows.data()).ok());
  std::vector<float> last(rows.end() - C, rows.end()), mean(C);
  for (int k = 0; k < C; ++k) {
    double sum = 0;
    for (int t = 0; t < 21; ++t)
      sum += rows[t * C + k];
    mean[k] = static_cast<float>(sum / 21);
  }
  generation_request text;
  text.id = 1;
  text.prompt = {'h', 'i'};
  text.temperature = 0;
  text.max_tokens = 6;
  std::vector<int32_t> alone;  // the generation without pooling requests beside it
  {
    auto engine = inference_engine::create(layout_, params_.data(), {.scheduler = {.ctx = 64}});
    ASSERT_TRUE(engine.ok() && (*engine)->add(text).ok());
    while (!(*engine)->idle()) {
      auto events = (*engine)->step();
      ASSERT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events)
        alone.insert(alone.end(), e.tokens.begin(), e.tokens.end());
    }
  }
  for (const int budget : {256, 8}) {  // whole, and in chunks of 8 beside a generation
    auto engine = inference_engine::create(layout_, params_.data(),
                                           {.scheduler = {.ctx = 64, .max_batch_tokens = budget}});
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->add(text).ok());
    for (const auto [id, pooling] :
         {std::pair{2, actor::pooling_type::last}, std::pair{3, actor::pooling_type::mean}}) {
      generation_request r;
      r.id = id;
      r.prompt = prompt;
      r.max_tokens = 1;
      r.pooling = pooling;
      ASSERT_TRUE((*engine)->add(r).ok());
    }
    std::map<uint64_t, std::vector<float>> embeddings;
    std::vector<int32_t> generated;
    while (!(*engine)->idle()) {
      auto events = (*engine)->step();
      ASSERT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events) {
        if (e.id == 1) generated.insert(generated.end(), e.tokens.begin(), e.tokens.end());
        if (e.id != 1) {
          EXPECT_TRUE(e.finished && e.tokens.empty());
          embeddings[e.id] = e.embedding;
        }
      }
    }
    EXPECT_EQ(embeddings[2], last) << "budget " << budget;
    EXPECT_EQ(embeddings[3], mean) << "budget " << budget;
    EXPECT_EQ(generated, alone);
    EXPECT_EQ((*engine)->blocks().used_blocks(), 0);
  }
}

TEST_F(InferenceEngineTest, RefusesTokensOutsideTheVocabulary) {
  auto created = inference_engine::create(layout_, params_.data(), {});
  ASSERT_TRUE(created.ok()) << created.status();
  inference_engine& engine = **created;
  generation_request r;
  r.id = 1;
  r.prompt = {1, 2, 300};
  const absl::Status s = engine.add(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token 2 is 300"), std::string::npos) << s;
}

}  // namespace
}  // namespace troupe::actors
