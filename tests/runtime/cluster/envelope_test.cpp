#include "runtime/cluster/envelope.hpp"

#include <random>

#include <gtest/gtest.h>

#include "runtime/cluster/msgpack_view.hpp"

namespace troupe::cluster {
namespace {

TEST(Envelope, RoundTrips) {
  envelope h;
  h.type = "kv.get";
  h.src = "w1";
  h.dst = "trainer/3";
  h.corr = 42;
  h.epoch = 7;
  h.from = 99;
  const std::string frame = encode(h, map_builder().add("key", std::string("k")).bytes());
  auto r = decode(frame.data(), frame.size(), 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.type, "kv.get");
  EXPECT_EQ(r->header.src, "w1");
  EXPECT_EQ(r->header.dst, "trainer/3");
  EXPECT_EQ(r->header.corr, 42u);
  EXPECT_EQ(r->header.epoch, 7u);
  EXPECT_EQ(r->header.from, 99u);
  auto payload = map_view::of(r->payload, "payload");
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->get_string("key").value(), "k");
}

TEST(Envelope, RefusesOversizedFrames) {
  const std::string frame = encode(envelope{.type = "x"});
  auto r = decode(frame.data(), frame.size(), frame.size() - 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_STREQ(rejection_reason(r.status()), "oversized");
}

TEST(Envelope, RefusesGarbageAndTruncatedFrames) {
  const std::string frame = encode(envelope{.type = "status"});
  for (size_t n = 0; n < frame.size(); ++n) {
    auto r = decode(frame.data(), n, 1 << 20);
    EXPECT_FALSE(r.ok()) << "a truncated frame of " << n << " bytes was accepted";
    EXPECT_STREQ(rejection_reason(r.status()), "malformed");
  }
  for (const std::string& garbage : {std::string("\xff\xfe\xfd"), std::string("hello"),
                                     std::string("\x93\x01\x02\x03"),      // an array, not a map
                                     std::string("\xdd\xff\xff\xff\xff"),  // array of 4G elements
                                     frame + "x"}) {
    auto r = decode(garbage.data(), garbage.size(), 1 << 20);
    EXPECT_FALSE(r.ok());
    EXPECT_STREQ(rejection_reason(r.status()), "malformed") << r.status();
  }
}

TEST(Envelope, DecodesEnvelopesBackToBack) {
  const std::string frame = encode(envelope{.type = "a", .corr = 1}) +
                            encode(envelope{.type = "b", .corr = 2}) + "\xc1" +
                            encode(envelope{.type = "c", .corr = 3});
  frame_reader reader(frame.data(), frame.size(), 1 << 20);
  auto first = reader.next();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->header.type, "a");
  auto second = reader.next();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->header.corr, 2u);
  EXPECT_FALSE(reader.done());
  // After garbage, where the next envelope starts is unknown: the rest of the frame is refused.
  auto bad = reader.next();
  EXPECT_STREQ(rejection_reason(bad.status()), "malformed");
  EXPECT_TRUE(reader.done());
  // Each envelope is held to the limit.
  const std::string big = encode(envelope{.type = "big", .dst = std::string(100, 'x')});
  frame_reader big_reader(big.data(), big.size(), 50);
  auto over = big_reader.next();
  EXPECT_STREQ(rejection_reason(over.status()), "oversized");
}

TEST(Envelope, AFrameReadersPayloadsPointIntoTheFrame) {
  envelope h{.type = "actor.send", .dst = "echo/0"};
  const std::string frame =
      encode(h, map_builder().add("text", std::string("a payload string")).bytes()) +
      encode(h, map_builder().add("text", std::string("another one")).bytes());
  frame_reader reader(frame.data(), frame.size(), 1 << 20);
  for (const char* text : {"a payload string", "another one"}) {
    auto env = reader.next();
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_EQ(env->header.dst, "echo/0");
    const msgpack::object* value = map_view::of(env->payload, "payload")->find("text");
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(absl::string_view(value->via.str.ptr, value->via.str.size), text);
    EXPECT_GE(value->via.str.ptr, frame.data());  // not a copy
    EXPECT_LT(value->via.str.ptr, frame.data() + frame.size());
  }
  EXPECT_TRUE(reader.done());
}

// Peers' frames are untrusted: thousands of mutated frames (bytes changed, dropped, added) are
// read to the end without a crash, each envelope either decoded or refused.
TEST(Envelope, AFrameReaderSurvivesMutatedFrames) {
  envelope h{.type = "actor.req", .src = "w1", .dst = "echo/0", .corr = 7, .epoch = 2, .from = 9};
  std::string good;
  for (int i = 0; i < 3; ++i) {
    good += encode(h, map_builder().add("key", std::string("value")).add("n", i).bytes());
  }
  std::mt19937_64 rng(7);
  int read = 0, refused = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string frame = good;
    for (int m = 1 + static_cast<int>(rng() % 4); m > 0 && !frame.empty(); --m) {
      const size_t at = rng() % frame.size();
      switch (rng() % 3) {
        case 0:
          frame[at] = static_cast<char>(rng());
          break;
        case 1:
          frame.erase(at, 1 + rng() % 3);
          break;
        default:
          frame.insert(at, 1, static_cast<char>(rng()));
      }
    }
    frame_reader reader(frame.data(), frame.size(), 1 << 20);
    for (int envelopes = 0; !reader.done(); ++envelopes) {
      ASSERT_LE(envelopes, static_cast<int>(frame.size())) << "the reader does not advance";
      auto env = reader.next();
      env.ok() ? ++read : ++refused;
    }
  }
  EXPECT_GT(read, 0);
  EXPECT_GT(refused, 0);
}

TEST(Envelope, RefusesMissingFieldsAndOtherVersions) {
  msgpack::sbuffer buf;
  packer pk(buf);
  pk.pack_map(1);
  pk.pack("v");
  pk.pack(protocol_version);
  auto missing = decode(buf.data(), buf.size(), 1 << 20);
  EXPECT_EQ(missing.status().message(), "envelope: missing key 'type'");

  const std::string v1 = encode(envelope{.v = 1, .type = "hello"});
  auto wrong = decode(v1.data(), v1.size(), 1 << 20);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_STREQ(rejection_reason(wrong.status()), "bad_version");
}

}  // namespace
}  // namespace troupe::cluster
