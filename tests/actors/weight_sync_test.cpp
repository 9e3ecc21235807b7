#include "actors/weight_sync.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

// Rank 0 sends n weights in buckets of `bucket_bytes` to two receivers: each must end with rank
// 0's bytes and the checksum of the whole buffer (weights_checksum's, though every rank fed its
// checksum piece by piece). Returns that checksum and the bytes.
std::pair<std::string, std::vector<float>> sync_to_two_receivers(int64_t n, int64_t bucket_bytes) {
  comm::memory_store store;
  constexpr int ranks = 3;
  std::vector<std::string> checksums(ranks);
  std::vector<std::vector<float>> received(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto group = comm::make_gloo_communicator(store, {.name = "sync", .rank = r, .size = ranks});
      ASSERT_TRUE(group.ok()) << group.status();
      tensor::tensor weights = tensor::tensor::host({n});
      for (int64_t i = 0; i < n; ++i)
        weights.data<float>()[i] = r == 0 ? 0.001f * static_cast<float>(i * i % 997) : -1.0f;
      auto checksum = broadcast_weights(**group, weights, bucket_bytes, 0);
      ASSERT_TRUE(checksum.ok()) << checksum.status();
      checksums[r] = *checksum;
      received[r].assign(weights.data<float>(), weights.data<float>() + n);
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 1; r < ranks; ++r) {
    EXPECT_TRUE(received[r] == received[0]) << "rank " << r;
    EXPECT_EQ(checksums[r], checksums[0]) << "rank " << r;
  }
  tensor::tensor whole = tensor::tensor::host({n});
  std::copy(received[0].begin(), received[0].end(), whole.data<float>());
  EXPECT_EQ(*weights_checksum(whole), checksums[0]);
  return {checksums[0], received[0]};
}

// 1000 weights in buckets of 64, each bucket in one piece.
TEST(WeightSync, BucketedBroadcastDeliversTheSendersBytes) {
  auto [checksum, bytes] = sync_to_two_receivers(1000, 64 * sizeof(float));
  EXPECT_EQ(checksum.size(), 32u);  // XXH3-128, hex
  tensor::tensor other = tensor::tensor::host({1000});
  std::copy(bytes.begin(), bytes.end(), other.data<float>());
  other.data<float>()[999] += 1.0f;
  EXPECT_NE(*weights_checksum(other), checksum) << "one changed weight changes the checksum";
}

// 9.6 MB in buckets of 8 MiB: the first bucket moves in 1 MiB pieces, hashed as they arrive, the
// second (1.2 MB) in one piece. In buckets of 3 MiB: three in two halves each, the last (0.2 MB)
// whole. The checksum is the whole buffer's all the same.
TEST(WeightSync, ABucketInPiecesGivesTheWholeBuffersChecksum) {
  const int64_t n = 2'400'001;
  auto [checksum, bytes] = sync_to_two_receivers(n, int64_t{8} << 20);
  EXPECT_EQ(bytes[n - 1], 0.001f * static_cast<float>((n - 1) * (n - 1) % 997));
  EXPECT_EQ(sync_to_two_receivers(n, int64_t{3} << 20).first, checksum);
}

// Rank `syncing` of a group of two syncs n weights in buckets of `bucket_bytes` from rank 0; the
// other rank joins the group and then leaves without syncing. Returns the syncing rank's status.
absl::Status sync_alone(int syncing, int64_t n, int64_t bucket_bytes) {
  comm::memory_store store;
  absl::Status status;
  std::thread syncer([&] {
    auto group = comm::make_gloo_communicator(
        store, {.name = "sync", .rank = syncing, .size = 2, .timeout = 2s});
    ASSERT_TRUE(group.ok()) << group.status();
    tensor::tensor weights = tensor::tensor::host({n});
    status = broadcast_weights(**group, weights, bucket_bytes, 0).status();
  });
  {
    auto group = comm::make_gloo_communicator(
        store, {.name = "sync", .rank = 1 - syncing, .size = 2, .timeout = 2s});
    EXPECT_TRUE(group.ok()) << group.status();
    syncer.join();
  }
  return status;
}

// A receiver that never takes part: the sender's sync fails after the group's timeout, naming
// the bucket, instead of hanging: with one piece a bucket, and with a bucket in 1 MiB pieces.
TEST(WeightSync, AMissingReceiverFailsTheSyncWithinTheTimeout) {
  const absl::Status whole = sync_alone(0, 100, 64);
  EXPECT_NE(whole.message().find("weight sync: bucket 1 of 7 (rank 0 of 2)"), std::string::npos)
      << whole;
  const absl::Status pieces = sync_alone(0, 2'400'000, int64_t{16} << 20);
  EXPECT_NE(pieces.message().find("weight sync: bucket 1 of 1 (rank 0 of 2)"), std::string::npos)
      << pieces;
}

// A sender that never takes part: a receiver waiting for a bucket's first piece fails the same
// way.
TEST(WeightSync, AMissingSenderFailsTheReceiversSyncWithinTheTimeout) {
  const absl::Status pieces = sync_alone(1, 2'400'000, int64_t{16} << 20);
  EXPECT_NE(pieces.message().find("weight sync: bucket 1 of 1 (rank 1 of 2)"), std::string::npos)
      << pieces;
}

}  // namespace
}  // namespace troupe::actors
