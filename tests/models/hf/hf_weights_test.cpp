#include "models/hf/hf_weights.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

using nlohmann::json;

hf_model_config tiny_qwen3() {
  const json j = {{"architectures", {"Qwen3ForCausalLM"}},
                  {"vocab_size", 64},
                  {"hidden_size", 16},
                  {"intermediate_size", 24},
                  {"num_hidden_layers", 2},
                  {"num_attention_heads", 2},
                  {"num_key_value_heads", 1},
                  {"head_dim", 8},
                  {"max_position_embeddings", 128},
                  {"tie_word_embeddings", true}};
  auto c = parse_hf_config(j, "config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Each spec's tensor, element i of tensor k being k + i / 1000 (exact in bf16 for small ones).
tensor::named_tensors weights_of(const hf_model_config& c, tensor::dtype type) {
  tensor::named_tensors out;
  const auto specs = hf_tensor_specs(c.model);
  for (size_t k = 0; k < specs.size(); ++k) {
    tensor::tensor t = tensor::tensor::host(specs[k].shape, type);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = static_cast<float>(k) + static_cast<float>(i % 8) / 8;
      if (type == tensor::dtype::f32) {
        t.data<float>()[i] = v;
      } else {
        t.data<tensor::bf16>()[i] = tensor::bf16(v);
      }
    }
    out.tensors.emplace_back(specs[k].name, std::move(t));
  }
  return out;
}

// A safetensors file written by hand, for dtypes troupe itself never writes (F16, I32).
struct raw_tensor {
  std::string name, dtype;
  tensor::shape_t shape;
  std::string data;
};
std::string raw_file(const std::vector<raw_tensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data += t.data;
  }
  const std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  return out + h + data;
}

// read_hf_weights' error, which check_hf_weights (headers only) must find too.
std::string error_of(const std::string& dir, const hf_model_config& c) {
  const auto w = read_hf_weights(dir, c);
  EXPECT_FALSE(w.ok());
  const std::string error = w.ok() ? "" : std::string(w.status().message());
  EXPECT_EQ(check_hf_weights(dir, c).message(), error);
  return error;
}

TEST(HfWeights, SpecsFollowHfNamesAndShapes) {
  const auto specs = hf_tensor_specs(tiny_qwen3().model);
  ASSERT_EQ(specs.size(), 1 + 2 * 11 + 1u);  // tied: no lm_head
  EXPECT_EQ(specs[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[2].shape, (tensor::shape_t{16, 16}));  // [heads * head_dim, hidden]
  EXPECT_EQ(specs[3].shape, (tensor::shape_t{8, 16}));   // k_proj: one key/value head
  EXPECT_EQ(specs[6].name, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(specs.back().name, "model.norm.weight");
}

TEST(HfWeights, ReadsOneFileOrShardsInF32Bf16AndF16) {
  const hf_model_config c = tiny_qwen3();
  testing::temp_dir one;
  ASSERT_TRUE(
      tensor::write_safetensors(one.file("model.safetensors"), weights_of(c, tensor::dtype::f32))
          .ok());
  auto w = read_hf_weights(one.path().string(), c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(check_hf_weights(one.path().string(), c).ok());
  EXPECT_EQ(w->tensors.size(), hf_tensor_specs(c.model).size());
  EXPECT_EQ((*w->get("model.norm.weight")).data<float>()[3], 23.375f);

  // Two bf16 shards and their index, the output head's tied copy among them.
  testing::temp_dir sharded;
  tensor::named_tensors all = weights_of(c, tensor::dtype::bf16), first, second;
  json map = json::object();
  for (size_t i = 0; i < all.tensors.size(); ++i) {
    const bool early = i < all.tensors.size() / 2;
    (early ? first : second).tensors.push_back(all.tensors[i]);
    map[all.tensors[i].first] =
        early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  second.tensors.emplace_back("lm_head.weight", all.tensors[0].second);
  ASSERT_TRUE(
      tensor::write_safetensors(sharded.file("model-00001-of-00002.safetensors"), first).ok());
  ASSERT_TRUE(
      tensor::write_safetensors(sharded.file("model-00002-of-00002.safetensors"), second).ok());
  sharded.write("model.safetensors.index.json",
                json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  w = read_hf_weights(sharded.path().string(), c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w->get("model.norm.weight")).data<float>()[3], 23.375f);
  EXPECT_EQ((*w->get("model.norm.weight")).type(), tensor::dtype::f32);

  // F16, which only other tools write.
  hf_model_config small = c;
  small.model.layers = 0;
  small.model.vocab = 2;
  small.model.dim = 2;
  testing::temp_dir half;
  const uint16_t embed[] = {0x3C00, 0xC000, 0x3800, 0x0000};  // 1, -2, 0.5, 0
  const uint16_t norm[] = {0x3C00, 0x3C00};
  half.write("model.safetensors",
             raw_file({{"model.embed_tokens.weight",
                        "F16",
                        {2, 2},
                        std::string(reinterpret_cast<const char*>(embed), sizeof embed)},
                       {"model.norm.weight",
                        "F16",
                        {2},
                        std::string(reinterpret_cast<const char*>(norm), sizeof norm)}}));
  w = read_hf_weights(half.path().string(), small);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w->get("model.embed_tokens.weight")).data<float>()[1], -2.0f);
}

TEST(HfWeights, EveryInconsistencyNamesTheTensorAndTheFile) {
  const hf_model_config c = tiny_qwen3();
  testing::temp_dir dir;
  const std::string d = dir.path().string();
  EXPECT_NE(error_of(d, c).find("has neither model.safetensors nor model.safetensors.index.json"),
            std::string::npos);

  tensor::named_tensors w = weights_of(c, tensor::dtype::f32);
  auto write = [&](const tensor::named_tensors& t) {
    ASSERT_TRUE(tensor::write_safetensors(dir.file("model.safetensors"), t).ok());
  };
  tensor::named_tensors missing = w;
  missing.tensors.erase(missing.tensors.begin() + 5);
  write(missing);
  EXPECT_EQ(error_of(d, c), d + ": tensor '" + w.tensors[5].first +
                                "' is missing (config.json says 2 layers of a Qwen3ForCausalLM)");

  tensor::named_tensors extra = w;
  extra.tensors.emplace_back("model.layers.2.mlp.up_proj.weight", w.tensors[0].second);
  write(extra);
  EXPECT_EQ(error_of(d, c), dir.file("model.safetensors") +
                                ": tensor 'model.layers.2.mlp.up_proj.weight' is not part of a "
                                "Qwen3ForCausalLM with this config.json (do the config and the "
                                "weights belong together?)");

  tensor::named_tensors misshapen = w;
  misshapen.tensors[0].second = tensor::tensor::host({32, 16});
  write(misshapen);
  EXPECT_EQ(error_of(d, c), dir.file("model.safetensors") +
                                ": tensor 'model.embed_tokens.weight' is [32, 16] but config.json "
                                "(vocab_size 64, hidden_size 16, intermediate_size 24, heads 2, "
                                "key/value heads 1, head_dim 8) needs [64, 16]");

  tensor::named_tensors ints = w;
  ints.tensors[0].second = tensor::tensor::host({64, 16}, tensor::dtype::i32);
  write(ints);
  EXPECT_NE(error_of(d, c).find("tensor 'model.embed_tokens.weight' is I32, not a float type"),
            std::string::npos);

  write(w);
  std::filesystem::resize_file(dir.file("model.safetensors"),
                               std::filesystem::file_size(dir.file("model.safetensors")) - 10);
  EXPECT_NE(error_of(d, c).find("truncated"), std::string::npos);

  dir.write(
      "model.safetensors.index.json",
      json{{"weight_map", {{"model.norm.weight", "model-00009-of-00009.safetensors"}}}}.dump());
  EXPECT_NE(
      error_of(d, c).find("names the shard 'model-00009-of-00009.safetensors', which is not in"),
      std::string::npos);
  dir.write("model.safetensors.index.json", "[]");
  EXPECT_NE(error_of(d, c).find("is not a safetensors index"), std::string::npos);
}

}  // namespace
}  // namespace troupe::models
