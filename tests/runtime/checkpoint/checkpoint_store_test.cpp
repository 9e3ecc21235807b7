#include "runtime/checkpoint/checkpoint_store.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::checkpoint {
namespace {

namespace fs = std::filesystem;

tensor::named_tensors weights(float value) {
  tensor::named_tensors n;
  tensor::tensor w = tensor::tensor::host({64});
  for (int i = 0; i < 64; ++i)
    w.data<float>()[i] = value + i;
  n.tensors = {{"w", w}};
  return n;
}

absl::Status save(const checkpoint_store& store, int64_t step, int keep = 3) {
  auto a = store.stage(step, "model.safetensors", weights(step));
  auto b = store.stage(step, "optimizer-rank0.safetensors", weights(-step));
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  return store.commit(step, {*a, *b}, {{"dp", 1}, {"cursor", step * 16}}, keep);
}

TEST(ChecksumOfAFile, MatchesTheKnownDigest) {
  testing::temp_dir dir;
  EXPECT_EQ(*sha256_file(dir.write("abc", "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CheckpointStore, CommitsAtomicallyAndKeepsTheNewest) {
  testing::temp_dir dir;
  checkpoint_store store(dir.path().string());
  for (int64_t step : {10, 20, 30, 40})
    ASSERT_TRUE(save(store, step).ok());
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{20, 30, 40}));
  // A staged but uncommitted step is invisible.
  ASSERT_TRUE(store.stage(50, "model.safetensors", weights(50)).ok());
  EXPECT_EQ(store.steps().back(), 40);
  std::vector<std::string> warnings;
  auto latest = store.read_latest(&warnings);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 40);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(latest->meta["cursor"], 640);
  EXPECT_EQ((*latest->files.at("model.safetensors").get("w")).data<float>()[1], 41.0f);
}

TEST(CheckpointStore, DamageIsDetectedNamedAndSkipped) {
  testing::temp_dir dir;
  checkpoint_store store(dir.path().string());
  for (int64_t step : {1, 2, 3})
    ASSERT_TRUE(save(store, step).ok());

  // Step 3: one byte of a tensor flipped. Step 2: a file truncated.
  const std::string corrupt = (fs::path(store.step_dir(3)) / "model.safetensors").string();
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const std::string truncated =
      (fs::path(store.step_dir(2)) / "optimizer-rank0.safetensors").string();
  fs::resize_file(truncated, fs::file_size(truncated) - 10);

  auto three = checkpoint_store::read(store.step_dir(3));
  EXPECT_EQ(three.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(three.status().message().find(corrupt), std::string::npos) << three.status();
  EXPECT_NE(three.status().message().find("sha256"), std::string::npos);
  auto two = checkpoint_store::read(store.step_dir(2));
  EXPECT_NE(two.status().message().find("truncated"), std::string::npos) << two.status();

  std::vector<std::string> warnings;
  auto latest = store.read_latest(&warnings);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("step 3"), std::string::npos);

  fs::remove(fs::path(store.step_dir(1)) / "manifest.json");
  EXPECT_EQ(store.read_latest(nullptr).status().code(), absl::StatusCode::kNotFound);
}

// A manifest is outside input: fields of another type, or a file outside the step directory,
// make the checkpoint unreadable (the next older one is used), never an exception.
TEST(CheckpointStore, AManifestWithFieldsOfOtherTypesIsRefused) {
  testing::temp_dir dir;
  checkpoint_store store(dir.path().string());
  ASSERT_TRUE(save(store, 1).ok());
  const std::string manifest = (fs::path(store.step_dir(1)) / "manifest.json").string();
  for (const char* text :
       {R"({"format": 3, "step": 1, "files": {}})",
        R"({"format": "troupe-checkpoint-1", "step": 1, "files": {}, "meta": []})",
        R"({"format": "troupe-checkpoint-1", "step": 1, "files": {"model.safetensors": 7}})",
        R"({"format": "troupe-checkpoint-1", "step": 1,
               "files": {"model.safetensors": {"bytes": "10", "sha256": "x"}}})",
        R"({"format": "troupe-checkpoint-1", "step": 1,
               "files": {"../../etc/hostname": {"bytes": 1, "sha256": "x"}}})"}) {
    std::ofstream(manifest, std::ios::trunc) << text;
    auto read = checkpoint_store::read(store.step_dir(1));
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_NE(read.status().message().find(manifest), std::string::npos) << read.status();
  }
}

}  // namespace
}  // namespace troupe::checkpoint

#include "runtime/checkpoint/async_writer.hpp"

namespace troupe::checkpoint {
namespace {

TEST(AsyncWriter, WritesInOrderOffTheCallersThreadAndFinishesOnDestruction) {
  testing::temp_dir dir;
  checkpoint_store store(dir.path().string());
  tensor::named_tensors live = weights(1);
  std::vector<std::future<absl::StatusOr<file_record>>> records;
  {
    async_writer writer(store);
    for (int rank = 0; rank < 3; ++rank) {
      auto snap = snapshot(live);
      ASSERT_TRUE(snap.ok());
      records.push_back(writer.stage(7, "rank" + std::to_string(rank) + ".safetensors", *snap));
      // The caller keeps training: changing its live state must not change what is written.
      (*live.get("w")).data<float>()[0] += 100.0f;
    }
  }  // the destructor waits for the queued writes
  std::vector<file_record> files;
  for (auto& r : records) {
    absl::StatusOr<file_record> record = r.get();
    ASSERT_TRUE(record.ok()) << record.status();
    files.push_back(*record);
  }
  ASSERT_TRUE(store.commit(7, files, {}, 2).ok());
  auto c = checkpoint_store::read(store.step_dir(7));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c->files.at("rank0.safetensors").get("w")).data<float>()[0], 1.0f);
  EXPECT_EQ((*c->files.at("rank2.safetensors").get("w")).data<float>()[0], 201.0f);
}

TEST(Snapshot, RecyclesTheMemoryOfAMatchingSnapshot) {
  tensor::named_tensors live = weights(1);
  auto first = snapshot(live);
  ASSERT_TRUE(first.ok());
  void* memory = (*first->get("w")).raw();
  (*live.get("w")).data<float>()[3] = -5.0f;
  auto second = snapshot(live, *std::move(first));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second->get("w")).raw(), memory);
  EXPECT_EQ((*second->get("w")).data<float>()[3], -5.0f);
  EXPECT_NE((*second->get("w")).raw(), (*live.get("w")).raw());
  auto other = snapshot(weights(2), tensor::named_tensors{});  // nothing to recycle: fresh memory
  EXPECT_NE((*other->get("w")).raw(), memory);
}

TEST(AsyncWriter, AFailedWriteComesBackAsItsError) {
  testing::temp_dir dir;
  const std::string blocker = dir.write("not-a-dir", "x");
  async_writer writer{checkpoint_store(blocker)};  // the root is a file: staging must fail
  auto record = writer.stage(1, "m.safetensors", weights(1)).get();
  EXPECT_FALSE(record.ok());
  EXPECT_NE(record.status().message().find("not-a-dir"), std::string::npos) << record.status();
}

}  // namespace
}  // namespace troupe::checkpoint
