#include "runtime/tensor/safetensors.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::tensor {
namespace {

named_tensors sample() {
  named_tensors f;
  tensor a = tensor::host({2, 3});
  for (int i = 0; i < 6; ++i)
    a.data<float>()[i] = i * 0.5f;
  tensor b = tensor::host({4}, dtype::i32);
  for (int i = 0; i < 4; ++i)
    b.data<int32_t>()[i] = -i;
  tensor c = tensor::host({3}, dtype::bf16);
  c.data<bf16>()[1] = bf16(2.5f);
  f.tensors = {{"a.weight", a}, {"b", b}, {"c", c}};
  f.metadata = {{"format", "pt"}, {"step", "12"}};
  return f;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Safetensors, RoundTripKeepsNamesShapesBytesAndMetadata) {
  testing::temp_dir dir;
  const std::string path = dir.file("m.safetensors");
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  const std::string bytes = read_all(path);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes.size(), 8 + length + 24 + 16 + 6);

  absl::StatusOr<named_tensors> back = read_safetensors(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata, sample().metadata);
  tensor a = *back->get("a.weight");
  EXPECT_EQ(a.shape(), (shape_t{2, 3}));
  EXPECT_EQ(a.data<float>()[5], 2.5f);
  EXPECT_EQ((*back->get("b")).data<int32_t>()[3], -3);
  EXPECT_EQ(static_cast<float>((*back->get("c")).data<bf16>()[1]), 2.5f);
  EXPECT_EQ(back->get("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(Safetensors, DamagedFilesAreErrorsNamingFileAndTensor) {
  testing::temp_dir dir;
  const std::string good = dir.file("good.safetensors");
  ASSERT_TRUE(write_safetensors(good, sample()).ok());
  const std::string bytes = read_all(good);

  auto error_of = [&](const std::string& name, const std::string& contents) {
    const std::string path = dir.write(name, contents);
    absl::StatusOr<named_tensors> r = read_safetensors(path);
    EXPECT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
    return std::string(r.status().message());
  };
  EXPECT_NE(error_of("short", "abc").find("shorter than the 8-byte header"), std::string::npos);
  EXPECT_NE(error_of("truncated", bytes.substr(0, bytes.size() - 5)).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of("header", bytes.substr(0, 20)).find("does not fit"), std::string::npos);
  std::string garbage = bytes;
  garbage[9] = '#';
  EXPECT_NE(error_of("json", garbage).find("not a JSON object"), std::string::npos);
  std::string extra = bytes + "xx";
  EXPECT_NE(error_of("extra", extra).find("cover"), std::string::npos);

  // A header whose offsets disagree with the shape.
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + std::string(12, '\0');
  EXPECT_NE(error_of("offsets", file).find("tensor 'w'"), std::string::npos);
  header = R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})";
  file = std::string(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + std::string(8, '\0');
  EXPECT_NE(error_of("dtype", file).find("F64"), std::string::npos);
  EXPECT_EQ(read_safetensors(dir.file("absent")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe::tensor
