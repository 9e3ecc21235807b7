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
// second (1.2 MB) in one piece; the checksum is the whole buffer's all the same.
TEST(WeightSync, ABucketInPiecesGivesTheWholeBuffersChecksum) {
  const int64_t n = 2'400'001;
  auto [checksum, bytes] = sync_to_two_receivers(n, int64_t{8} << 20);
  EXPECT_EQ(bytes[n - 1], 0.001f * static_cast<float>((n - 1) * (n - 1) % 997));
}

// A receiver that never takes part: the sender's sync fails after the group's timeout, naming
// the bucket, instead of hanging.
TEST(WeightSync, AMissingReceiverFailsTheSyncWithinTheTimeout) {
  comm::memory_store store;
  absl::Status sender_status;
  std::thread sender([&] {
    auto group =
        comm::make_gloo_communicator(store, {.name = "sync", .rank = 0, .size = 2, .timeout = 2s});
    ASSERT_TRUE(group.ok()) << group.status();
    tensor::tensor weights = tensor::tensor::host({100});
    sender_status = broadcast_weights(**group, weights, 64, 0).status();
  });
  // The receiver joins the group and then leaves without broadcasting.
  {
    auto group =
        comm::make_gloo_communicator(store, {.name = "sync", .rank = 1, .size = 2, .timeout = 2s});
    ASSERT_TRUE(group.ok()) << group.status();
    sender.join();
  }
  EXPECT_FALSE(sender_status.ok());
  EXPECT_NE(sender_status.message().find("weight sync: bucket 1 of 7 (rank 0 of 2)"),
            std::string::npos)
      << sender_status;
}

}  // namespace
}  // namespace troupe::actors
