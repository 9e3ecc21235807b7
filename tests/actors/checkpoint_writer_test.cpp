#include "actors/checkpoint_writer.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

using files = std::vector<std::pair<std::string, tensor::named_tensors>>;

actor::checkpoint_snapshot snapshot_of(const std::string& root) {
  tensor::tensor m = tensor::tensor::host({64});
  for (int i = 0; i < 64; ++i)
    m.data<float>()[i] = static_cast<float>(i);
  tensor::named_tensors contents;
  contents.tensors = {{"m", m}};
  return {{7, 1, 448, {}, 0.001, 0},
          root,
          std::make_shared<const files>(files{{"optimizer-1.safetensors", contents}})};
}

TEST(CheckpointWriter, StagesEveryFileAndReportsItsRecord) {
  testing::temp_dir dir;
  const std::string root = dir.file("checkpoints");
  auto shard = write_snapshot(snapshot_of(root));
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->step, 7);
  EXPECT_EQ(shard->rank, 1);
  EXPECT_EQ(shard->cursor, 448);
  EXPECT_GT(shard->write_s, 0);
  ASSERT_EQ(shard->files.size(), 1u);
  const std::string path = root + "/.step-7.partial/optimizer-1.safetensors";
  EXPECT_EQ(shard->files[0].bytes, std::filesystem::file_size(path));
  EXPECT_EQ(shard->files[0].sha256, *checkpoint::sha256_file(path));
  // The driver's commit makes it a checkpoint that reads back.
  checkpoint::checkpoint_store store(root);
  ASSERT_TRUE(store.commit(7, shard->files, {{"cursor", shard->cursor}}, 3).ok());
  auto saved = checkpoint::checkpoint_store::read(store.step_dir(7));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->files.at("optimizer-1.safetensors").get("m")->data<float>()[63], 63.0f);
}

TEST(CheckpointWriter, AnUnwritableRootIsAnErrorNamingTheFile) {
  testing::temp_dir dir;
  const std::string blocker = dir.write("not-a-dir", "x");
  auto shard = write_snapshot(snapshot_of(blocker));
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("not-a-dir"), std::string::npos) << shard.status();
}

}  // namespace
}  // namespace troupe::actors
