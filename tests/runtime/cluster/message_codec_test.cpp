#include "runtime/cluster/message_codec.hpp"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "runtime/actor/messages.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::cluster {
namespace {

caf::message round_trip(const caf::message& m) {
  auto bytes = encode_message(m);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto handle = msgpack::unpack(bytes->data(), bytes->size());
  auto back = decode_message(handle.get());
  EXPECT_TRUE(back.ok()) << back.status();
  return *back;
}

TEST(MessageCodec, RoundTripsTroupeMessages) {
  auto m = round_trip(
      caf::make_message(actor::process_atom_v, actor::work_item{3, std::string("a\0b", 3)}));
  ASSERT_TRUE((m.match_elements<caf::atom_value, actor::work_item>()));
  EXPECT_EQ(m.get_as<caf::atom_value>(0), actor::process_atom::value);
  EXPECT_EQ(m.get_as<actor::work_item>(1).payload, std::string("a\0b", 3));

  m = round_trip(caf::make_message(actor::next_atom_v, uint64_t{7}, uint32_t{64}));
  ASSERT_TRUE((m.match_elements<caf::atom_value, uint64_t, uint32_t>()));
  EXPECT_EQ(m.get_as<uint32_t>(2), 64u);

  actor::source_batch batch{{{1, "x"}, {2, "y"}}, 10};
  m = round_trip(caf::make_message(batch));
  EXPECT_EQ(m.get_as<actor::source_batch>(0).items[1].payload, "y");
  m = round_trip(caf::make_message(actor::sink_report{2, 5, "fnv1a64:00"}, std::string("s"),
                                   int32_t{-4}, true, 1.5, int64_t{-9}));
  EXPECT_EQ(m.get_as<actor::sink_report>(0).digest, "fnv1a64:00");
  EXPECT_EQ(m.get_as<int32_t>(2), -4);
  EXPECT_EQ(m.get_as<double>(4), 1.5);
  m = round_trip(caf::make_message(actor::actor_down{"rot/0", 13, "boom"}, caf::ok_atom::value));
  EXPECT_EQ(m.get_as<actor::actor_down>(0).message, "boom");
}

TEST(MessageCodec, RoundTripsTokenBatchesAndRefusesInconsistentOnes) {
  actor::token_batch b{2, 3, {1, 2, 3, 250, 0, 7}, {2, 3, 4, -1, 7, 9}, 40, 36, 11};
  caf::message m = round_trip(caf::make_message(b));
  const auto& back = m.get_as<actor::token_batch>(0);
  EXPECT_EQ(back.tokens, b.tokens);
  EXPECT_EQ(back.targets, b.targets);
  EXPECT_EQ(back.cursor, 36);
  EXPECT_EQ(back.global_targets, 11);
  EXPECT_TRUE(back.margins.empty());
  // A reward model's pairs carry their margins: one a pair.
  b.margins = {0.75f};
  EXPECT_EQ(round_trip(caf::make_message(b)).get_as<actor::token_batch>(0).margins, b.margins);
  b.margins = {0.75f, 1.0f};
  auto two = encode_message(caf::make_message(b));
  ASSERT_TRUE(two.ok());
  auto two_handle = msgpack::unpack(two->data(), two->size());
  EXPECT_NE(decode_message(two_handle.get()).status().message().find("one margin per pair"),
            std::string::npos);
  b.margins.clear();
  // A DPO batch carries each row's reference log-probability.
  b.reference_logps = {-3.5f, -4.25f};
  EXPECT_EQ(round_trip(caf::make_message(b)).get_as<actor::token_batch>(0).reference_logps,
            b.reference_logps);
  b.reference_logps = {-3.5f};
  auto one = encode_message(caf::make_message(b));
  ASSERT_TRUE(one.ok());
  auto one_handle = msgpack::unpack(one->data(), one->size());
  EXPECT_NE(decode_message(one_handle.get()).status().message().find("one log-probability per row"),
            std::string::npos);
  b.reference_logps.clear();
  b.targets.pop_back();  // 5 targets for 2 x 3 tokens
  auto bytes = encode_message(caf::make_message(b));
  ASSERT_TRUE(bytes.ok());
  auto handle = msgpack::unpack(bytes->data(), bytes->size());
  auto refused = decode_message(handle.get());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("batch x ctx"), std::string::npos);
}

TEST(MessageCodec, RoundTripsStepReports) {
  caf::message m = round_trip(caf::make_message(
      actor::step_report{.step = 12,
                         .loss = 2.5,
                         .grad_norm = 0.75,
                         .lr = 1e-3,
                         .data_s = 0.01,
                         .compute_s = 0.2,
                         .comm_s = 0.03,
                         .replica_s = 0.02,
                         .stage_busy_s = 0.15,
                         .stage_idle_s = 0.05,
                         .first_sample = 96,
                         .samples = 3,
                         .pairs = {.count = 8, .accuracy = 0.75, .logp_rejected = -9}}));
  const auto& r = m.get_as<actor::step_report>(0);
  EXPECT_EQ(r.step, 12);
  EXPECT_EQ(r.loss, 2.5);
  EXPECT_EQ(r.lr, 1e-3);
  EXPECT_EQ(r.comm_s, 0.03);
  EXPECT_EQ(r.replica_s, 0.02);
  EXPECT_EQ(r.stage_busy_s, 0.15);
  EXPECT_EQ(r.stage_idle_s, 0.05);
  EXPECT_EQ(r.first_sample, 96);
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.pairs.count, 8);
  EXPECT_EQ(r.pairs.accuracy, 0.75);
  EXPECT_EQ(r.pairs.logp_rejected, -9);
}

// A remote trainer's evaluation: a reward model's (or DPO's) carries its pairs' figures.
TEST(MessageCodec, RoundTripsEvalReports) {
  const actor::pair_metrics pairs{.count = 40,
                                  .accuracy = 0.9,
                                  .margin = 1.5,
                                  .reward_chosen = 0.5,
                                  .reward_rejected = -1,
                                  .logp_chosen = -2.5,
                                  .logp_rejected = -7};
  caf::message m = round_trip(caf::make_message(actor::eval_report{.loss = 0.5, .pairs = pairs}));
  const auto& r = m.get_as<actor::eval_report>(0);
  EXPECT_EQ(r.loss, 0.5);
  EXPECT_EQ(r.pairs.count, 40);
  EXPECT_EQ(r.pairs.accuracy, 0.9);
  EXPECT_EQ(r.pairs.margin, 1.5);
  EXPECT_EQ(r.pairs.reward_chosen, 0.5);
  EXPECT_EQ(r.pairs.reward_rejected, -1);
  EXPECT_EQ(r.pairs.logp_chosen, -2.5);
  EXPECT_EQ(r.pairs.logp_rejected, -7);
}

TEST(MessageCodec, RoundTripsCheckpointShards) {
  actor::checkpoint_shard shard{40,    1,   1280, {{"optimizer-1.safetensors", 4096, "ab12"}},
                                0.002, 0.05};
  caf::message m = round_trip(caf::make_message(shard));
  const auto& r = m.get_as<actor::checkpoint_shard>(0);
  EXPECT_EQ(r.step, 40);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.cursor, 1280);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].name, "optimizer-1.safetensors");
  EXPECT_EQ(r.files[0].bytes, 4096u);
  EXPECT_EQ(r.files[0].sha256, "ab12");
  EXPECT_EQ(r.write_s, 0.05);
}

// Decodes a message of one element, [tag, {key: value, ...}], as a peer could send it.
template <class... KeyValues>
absl::StatusOr<caf::message> decode_struct(const char* tag, const KeyValues&... kvs) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(1);
  pk.pack_array(2);
  pk.pack(tag);
  pk.pack_map(sizeof...(kvs));
  ((pk.pack(kvs.first), pk.pack(kvs.second)), ...);
  auto handle = msgpack::unpack(buf.data(), buf.size());
  return decode_message(handle.get());
}

TEST(MessageCodec, RefusesCheckpointShardsWithoutFiles) {
  auto refused = decode_struct("checkpoint_shard", std::pair{"step", 3});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("'files'"), std::string::npos);
}

TEST(MessageCodec, FiguresAreNumbersOfEitherKind) {
  auto whole = decode_struct("step_report", std::pair{"step", 2}, std::pair{"loss", 3});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->get_as<actor::step_report>(0).loss, 3.0);
  auto refused = decode_struct("step_report", std::pair{"loss", "low"});
  EXPECT_EQ(refused.status().message(), "step_report: 'loss' must be a number");
}

TEST(MessageCodec, RoundTripsGroupChangesAndRefusesImpossibleOnes) {
  using source = actor::group_change::source;
  caf::message m = round_trip(caf::make_message(
      actor::regroup_atom_v,
      actor::group_change{7, 1, 3, source::checkpoint, 5, 40, 4096, "/run/checkpoints/step-40"}));
  const auto& c = m.get_as<actor::group_change>(1);
  EXPECT_EQ(c.generation, 7u);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.ranks, 3);
  EXPECT_EQ(c.from, source::checkpoint);
  EXPECT_EQ(c.basis, 5u);
  EXPECT_EQ(c.steps, 40);
  EXPECT_EQ(c.cursor, 4096);
  EXPECT_EQ(c.checkpoint, "/run/checkpoints/step-40");
  const auto change = [](int rank, int from) {
    return decode_struct("group_change", std::pair{"generation", 1}, std::pair{"rank", rank},
                         std::pair{"ranks", 3}, std::pair{"from", from}, std::pair{"basis", 0},
                         std::pair{"steps", 0}, std::pair{"cursor", 0},
                         std::pair{"checkpoint", ""});
  };
  ASSERT_TRUE(change(2, 0).ok()) << change(2, 0).status();
  auto outside = change(3, 0);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("must be a rank of a group of 3"), std::string::npos)
      << outside.status();
  EXPECT_EQ(change(-1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(change(0, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MessageCodec, RoundTripsGenerationRequestsAndEvents) {
  actor::generation_request r{7, {72, 105}, 0.7f, 40, 0.9f, 1234, 32, {"\n\n"}, {151645, 2}, true};
  r.stream = false;
  r.min_weights_version = 12;
  r.frequency_penalty = 0.5f;
  r.presence_penalty = -0.25f;
  r.repetition_penalty = 1.125f;
  r.logit_bias = {{65, -100.0f}, {7, 2.5f}};
  r.min_tokens = 3;
  r.json_schema = R"({"type": "object"})";
  r.pooling = actor::pooling_type::mean;
  caf::message m = round_trip(caf::make_message(actor::generate_atom_v, r));
  const auto& back = m.get_as<actor::generation_request>(1);
  EXPECT_EQ(back.frequency_penalty, 0.5f);
  EXPECT_EQ(back.presence_penalty, -0.25f);
  EXPECT_EQ(back.repetition_penalty, 1.125f);
  EXPECT_EQ(back.logit_bias, r.logit_bias);
  EXPECT_EQ(back.min_tokens, 3);
  EXPECT_EQ(back.json_schema, r.json_schema);
  EXPECT_EQ(back.pooling, actor::pooling_type::mean);
  EXPECT_EQ(back.min_weights_version, 12u);
  EXPECT_TRUE(back.include_stop_str_in_output);
  EXPECT_FALSE(back.stream);
  EXPECT_EQ(back.id, 7u);
  EXPECT_EQ(back.prompt, (std::vector<int32_t>{72, 105}));
  EXPECT_FLOAT_EQ(back.temperature, 0.7f);
  EXPECT_EQ(back.top_k, 40);
  EXPECT_EQ(back.seed, 1234u);
  EXPECT_EQ(back.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(back.stop_token_ids, (std::vector<int32_t>{151645, 2}));
  actor::worker_report report{{{7,
                                {1, 2, 3},
                                4,
                                false,
                                actor::finish_reason::length,
                                {-0.5f, -1.25f, -0.0f},
                                9,
                                {10, 11, 12, 13, 14, 15},
                                {-0.1f, -2.5f, -0.2f, -2.0f, -0.3f, -1.5f}},
                               {8, {}, 0, true, actor::finish_reason::stop}},
                              12,
                              64,
                              3,
                              5,
                              96,
                              48,
                              7,
                              20,
                              13,
                              {5, 4}};
  m = round_trip(caf::make_message(report));
  const auto& back_report = m.get_as<actor::worker_report>(0);
  EXPECT_EQ(back_report.kv_blocks_used, 12);
  EXPECT_EQ(back_report.kv_blocks_total, 64);
  EXPECT_EQ(back_report.waiting, 3);
  EXPECT_EQ(back_report.running, 5);
  EXPECT_EQ(back_report.prefix_cache_queries, 96);
  EXPECT_EQ(back_report.prefix_cache_hits, 48);
  EXPECT_EQ(back_report.spec_decode_drafts, 7);
  EXPECT_EQ(back_report.spec_decode_draft_tokens, 20);
  EXPECT_EQ(back_report.spec_decode_accepted_tokens, 13);
  EXPECT_EQ(back_report.batch_sizes, (std::vector<int32_t>{5, 4}));
  const auto& got = back_report.events;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(got[0].first_index, 4);
  EXPECT_EQ(got[0].logprobs, (std::vector<float>{-0.5f, -1.25f, -0.0f}));
  EXPECT_TRUE(std::signbit(got[0].logprobs[2])) << "log-probs cross bit for bit, -0 too";
  EXPECT_TRUE(got[1].logprobs.empty());
  EXPECT_EQ(got[0].top_tokens, (std::vector<int32_t>{10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(got[0].top_values, (std::vector<float>{-0.1f, -2.5f, -0.2f, -2.0f, -0.3f, -1.5f}));
  EXPECT_EQ(got[0].weights_version, 9u);
  EXPECT_TRUE(got[1].finished);
  EXPECT_EQ(got[1].reason, actor::finish_reason::stop);
  EXPECT_EQ(got[1].first_index, 0);
  EXPECT_TRUE(got[1].top_tokens.empty() && got[1].top_values.empty());
  // An embedding crosses bit for bit in the final event that carries it.
  actor::generation_event pooled{11, {}, 0, true, actor::finish_reason::stop};
  pooled.embedding = {0.25f, -1.5f, 3.0e-8f};
  m = round_trip(caf::make_message(actor::worker_report{{report.events[0], pooled}}));
  const auto& with_embedding = m.get_as<actor::worker_report>(0).events;
  ASSERT_EQ(with_embedding.size(), 2u);
  EXPECT_TRUE(with_embedding[0].embedding.empty());
  EXPECT_EQ(with_embedding[1].embedding, pooled.embedding);
  // Keys at their defaults stay off the wire (a report carries hundreds of events).
  auto lean = encode_message(caf::make_message(actor::worker_report{{report.events[1]}}));
  ASSERT_TRUE(lean.ok()) << lean.status();
  for (const char* key : {"first_index", "top_tokens", "top_values", "embeddings", "pooling"})
    EXPECT_EQ(lean->find(key), std::string::npos) << key;
}

// A peer's event whose log-probs do not pair with its tokens is refused, not half-read.
TEST(MessageCodec, RefusesEventsWhoseLogProbsDoNotMatchTheirTokens) {
  actor::worker_report report{{{7, {1, 2, 3}, 0, false, actor::finish_reason::length, {-0.5f}}}};
  auto bytes = encode_message(caf::make_message(report));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto handle = msgpack::unpack(bytes->data(), bytes->size());
  auto refused = decode_message(handle.get());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("1 logprobs for 3 tokens"), std::string::npos)
      << refused.status();
}

template <class T>
void pack_bin(msgpack::packer<msgpack::sbuffer>& pk, const std::vector<T>& xs) {
  pk.pack_bin(static_cast<uint32_t>(sizeof(T) * xs.size()));
  pk.pack_bin_body(reinterpret_cast<const char*>(xs.data()),
                   static_cast<uint32_t>(sizeof(T) * xs.size()));
}

void pack_i32s(msgpack::packer<msgpack::sbuffer>& pk, const std::vector<int32_t>& ids) {
  pack_bin(pk, ids);
}

// A worker_report holding one event (id 7) of `count` tokens, with its tokens and log-probs as
// written by `write_tokens` and `write_logprobs` (into its report's columns), decoded.
absl::StatusOr<caf::message> decoded_event(
    const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write_tokens,
    const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write_logprobs,
    int32_t count = 2) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(1);
  pk.pack_array(2);
  pk.pack("worker_report");
  pk.pack_map(2);
  pk.pack("batch_sizes");
  pack_i32s(pk, {});
  pk.pack("events");
  pk.pack_map(5);
  pk.pack("id");
  pack_bin(pk, std::vector<uint64_t>{7});
  pk.pack("token_counts");
  pack_i32s(pk, {count});
  pk.pack("tokens");
  write_tokens(pk);
  pk.pack("logprob_counts");
  pack_i32s(pk, {count});
  pk.pack("logprobs");
  write_logprobs(pk);
  auto handle = msgpack::unpack(buf.data(), buf.size());
  return decode_message(handle.get());
}

// A peer's log-probs as a list of numbers (not bin f32) are refused, naming the field.
TEST(MessageCodec, RefusesEventLogProbsThatAreNotBin) {
  auto refused = decoded_event(
      [](auto& pk) {
        pack_i32s(pk, {1, 2});
      },
      [](auto& pk) {
        pk.pack(std::vector<float>{-0.5f, -1.5f});
      });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("events' 'logprobs' must be bin"), std::string::npos)
      << refused.status();
}

// A report's events travel as columns (protocol version 3): columns whose lengths or counts do
// not agree, and codes out of range, are refused, naming the field, not half-read.
TEST(MessageCodec, RefusesEventColumnsThatDoNotAgree) {
  const auto tokens = [](std::vector<int32_t> ids) {
    return [ids](auto& pk) { pack_i32s(pk, ids); };
  };
  const auto logprobs = [](auto& pk) { pack_bin(pk, std::vector<float>{-0.5f, -1.5f}); };
  const auto expect_refused = [](const absl::StatusOr<caf::message>& m, const std::string& why) {
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_NE(m.status().message().find(why), std::string::npos) << m.status();
  };
  {
    auto ok = decoded_event(tokens({1, 2}), logprobs);
    ASSERT_TRUE(ok.ok()) << ok.status();
  }
  expect_refused(decoded_event(tokens({1, 2, 3}), logprobs),
                 "events' 'tokens' holds 3 values where the counts add up to 2");
  expect_refused(decoded_event(tokens({}), logprobs, -1), "events' 'tokens': a count of -1");

  // One event, then the column `key` replaced by `write`.
  const auto with_column = [](const char* key,
                              std::function<void(msgpack::packer<msgpack::sbuffer>&)> write) {
    actor::generation_event e{7, {1, 2}, 0, true, actor::finish_reason::stop, {-0.5f, -1.5f}};
    auto bytes = encode_message(caf::make_message(actor::worker_report{{e}}));
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    auto handle = msgpack::unpack(bytes->data(), bytes->size());
    msgpack::zone zone;
    msgpack::object copy(handle.get(), zone);
    msgpack::object_map& events = copy.via.array.ptr[0].via.array.ptr[1].via.map.ptr[0].val.via.map;
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    write(pk);
    auto replacement = msgpack::unpack(buf.data(), buf.size());
    bool found = false;
    for (uint32_t i = 0; i < events.size; ++i) {
      if (events.ptr[i].key.as<std::string>() != key) continue;
      events.ptr[i].val = msgpack::object(replacement.get(), zone);
      found = true;
    }
    EXPECT_TRUE(found) << key;
    return decode_message(copy);
  };
  expect_refused(with_column("finished",
                             [](auto& pk) {
                               pack_bin(pk, std::vector<uint8_t>{1, 1});
                             }),
                 "events' 'finished' has 2 values for 1 events");
  expect_refused(
      with_column("reason", [](auto& pk) { pack_bin(pk, std::vector<uint8_t>{5}); }),
      "generation_event 7: 'reason' is 5; it must be 0 (length), 1 (stop) or 2 (cancelled)");
  expect_refused(with_column("finished", [](auto& pk) { pack_bin(pk, std::vector<uint8_t>{2}); }),
                 "generation_event 7: 'finished' is 2; it must be 0 or 1");
  expect_refused(with_column("weights_version", [](auto& pk) { pack_i32s(pk, {1}); }),
                 "events' 'weights_version' must be bin of 8-byte ints");
}

// Token ids travel as bin i32 (since protocol version 2): a list of ints (version 1's form), a bin
// that is not whole int32s, and a negative id are refused, naming the field.
TEST(MessageCodec, RefusesTokenIdsThatAreNotBinI32OrNegative) {
  const auto logprobs = [](auto& pk) { pk.pack_bin(0); };
  for (const auto& [write, expected] :
       std::vector<std::pair<std::function<void(msgpack::packer<msgpack::sbuffer>&)>, std::string>>{
           {[](auto& pk) {
              pk.pack(std::vector<int32_t>{1, 2});
            },
            "events' 'tokens' must be bin of 4-byte ints"},
           {[](auto& pk) {
              pk.pack_bin(3);
              pk.pack_bin_body("abc", 3);
            },
            "events' 'tokens' must be bin of 4-byte ints"},
           {[](auto& pk) {
              pack_i32s(pk, {5, -3});
            },
            "events' 'tokens' holds -3 at 1; the least allowed is 0"}}) {
    auto refused = decoded_event(write, logprobs);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(expected), std::string::npos) << refused.status();
  }
}

// The RL roles' messages cross processes bit for bit (floats as raw f32 / f64).
TEST(MessageCodec, RoundTripsTheRlMessages) {
  actor::rl_batch b{1,
                    3,
                    {5, 6, 7},
                    {-1, 6, 7},
                    {0.0f, -1.25f, -0.1f},
                    {0.0f, -1.5f, 1e-30f},
                    {0.0f, 0.7f, -0.7f},
                    {0.0f, 0.25f, -2.0f},
                    {0.0f, 1.0f, 0.5f},
                    {0.0f, 0.5f, 0.5f}};
  caf::message m = round_trip(caf::make_message(actor::rl_step_atom_v, b));
  const auto& back = m.get_as<actor::rl_batch>(1);
  EXPECT_EQ(back.targets, b.targets);
  EXPECT_EQ(back.old_log_probs, b.old_log_probs);
  EXPECT_EQ(back.ref_log_probs, b.ref_log_probs);
  EXPECT_EQ(back.advantages, b.advantages);
  EXPECT_EQ(back.values, b.values);
  EXPECT_EQ(back.returns, b.returns);
  EXPECT_EQ(back.weights, b.weights);
  b.values.clear();  // a field its reader does not use travels empty
  m = round_trip(caf::make_message(actor::values_atom_v, b));
  EXPECT_TRUE(m.get_as<actor::rl_batch>(1).values.empty());

  actor::rl_step_report r;
  r.step = 7;
  r.pg_loss = -0.25;
  r.ppo_kl = -1e-3;
  r.entropy = 3.5;
  r.vf_loss = 0.125;
  r.vf_clipfrac = 0.5;
  r.vpred_mean = -0.75;
  r.kl_loss = -2.0;  // msgpack packs an integral float as a (negative) integer
  m = round_trip(caf::make_message(r));
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).kl_loss, -2.0);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).vf_loss, 0.125);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).vf_clipfrac, 0.5);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).vpred_mean, -0.75);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).pg_loss, -0.25);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).ppo_kl, -1e-3);
  EXPECT_EQ(m.get_as<actor::rl_step_report>(0).step, 7);

  m = round_trip(caf::make_message(std::vector<float>{1.0f, -0.5f, 3e-8f}));
  EXPECT_EQ(m.get_as<std::vector<float>>(0), (std::vector<float>{1.0f, -0.5f, 3e-8f}));
  m = round_trip(caf::make_message(std::vector<double>{0.1, 1.0 / 3}));
  EXPECT_EQ(m.get_as<std::vector<double>>(0), (std::vector<double>{0.1, 1.0 / 3}));
  m = round_trip(caf::make_message(actor::weights_ack{4, "ab12", 0.25}));
  EXPECT_EQ(m.get_as<actor::weights_ack>(0).checksum, "ab12");
  EXPECT_EQ(m.get_as<actor::weights_ack>(0).swap_s, 0.25);
  m = round_trip(caf::make_message(actor::weight_sync_round{3, 2, 1, 3, -17, "boot+0.0"}));
  EXPECT_EQ(m.get_as<actor::weight_sync_round>(0).ranks, 3);
  EXPECT_EQ(m.get_as<actor::weight_sync_round>(0).sent_at_ns, -17);
  EXPECT_EQ(m.get_as<actor::weight_sync_round>(0).clock_domain, "boot+0.0");
  m = round_trip(caf::make_message(actor::reward_request{{"1,2:9,1="}, {"3"}, {1}}));
  EXPECT_EQ(m.get_as<actor::reward_request>(0).ended, (std::vector<uint8_t>{1}));
  actor::generation_request g;
  g.id = 3;
  g.prompt = {1, 2};
  m = round_trip(caf::make_message(std::vector<actor::generation_request>{g, g}));
  EXPECT_EQ(m.get_as<std::vector<actor::generation_request>>(0).size(), 2u);

  // A reward request whose lists do not pair up is refused.
  auto bytes = encode_message(caf::make_message(actor::reward_request{{"a", "b"}, {"c"}, {1, 0}}));
  ASSERT_TRUE(bytes.ok());
  auto handle = msgpack::unpack(bytes->data(), bytes->size());
  EXPECT_EQ(decode_message(handle.get()).status().code(), absl::StatusCode::kInvalidArgument);
  // So is an acknowledgement whose swap time is negative or not a number.
  for (double swap_s : {-0.5, std::nan("")}) {
    bytes = encode_message(caf::make_message(actor::weights_ack{1, "ab", swap_s}));
    ASSERT_TRUE(bytes.ok());
    handle = msgpack::unpack(bytes->data(), bytes->size());
    const absl::Status why = decode_message(handle.get()).status();
    EXPECT_EQ(why.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_NE(why.message().find("swap_s"), std::string::npos) << why;
  }
}

TEST(MessageCodec, RoundTripsErrors) {
  auto m = round_trip(caf::make_message(actor::to_error(absl::UnavailableError("node w2 died"))));
  EXPECT_EQ(actor::to_status(m.get_as<caf::error>(0)), absl::UnavailableError("node w2 died"));
  m = round_trip(caf::make_message(caf::make_error(caf::sec::request_timeout)));
  EXPECT_EQ(m.get_as<caf::error>(0), caf::sec::request_timeout);
}

TEST(MessageCodec, RefusesWhatCannotTravel) {
  auto bytes = encode_message(caf::make_message(actor::actor_update{"x", {}}));
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bytes.status().message().find("has no wire form"), absl::string_view::npos);
}

// One element, and an atom with one element, are built directly (not with a message builder):
// they must match handlers like any other message.
TEST(MessageCodec, RoundTripsTheCommonShapes) {
  caf::message m = round_trip(caf::make_message(actor::ping_atom_v, int32_t{41}));
  ASSERT_TRUE((m.match_elements<caf::atom_value, int32_t>()));
  EXPECT_EQ(m.get_as<int32_t>(1), 41);
  m = round_trip(caf::make_message(int32_t{42}));
  ASSERT_TRUE(m.match_elements<int32_t>());
  EXPECT_EQ(m.get_as<int32_t>(0), 42);
  m = round_trip(caf::make_message(actor::ping_atom_v, caf::ok_atom_v));
  ASSERT_TRUE((m.match_elements<caf::atom_value, caf::atom_value>()));
  EXPECT_EQ(m.get_as<caf::atom_value>(1), caf::ok_atom::value);
  m = round_trip(caf::message{});
  EXPECT_TRUE(m.empty());
}

TEST(MessageCodec, RefusesMalformedElements) {
  for (const char* bad : {"\x91\x01",  // [1]
                          "\x91\x92\xa3"
                          "bad\x01",               // [["bad", 1]]
                          "\x91\x92\xa3i32\xa1x",  // [["i32", "x"]]
                          "\x92\x92\xa4"
                          "atom\xa4ping\x92\xa3i32\xa1x",  // [["atom", "ping"], ["i32", "x"]]
                          "\x92\x92\xa4"
                          "atom\x01\x92\xa3i32\x01",  // [["atom", 1], ["i32", 1]]
                          "\x91\x92\xa9work_item\x01", "\x01"}) {
    auto handle = msgpack::unpack(bad, std::strlen(bad));
    auto m = decode_message(handle.get());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace troupe::cluster
