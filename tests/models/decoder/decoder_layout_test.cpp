#include "models/decoder/decoder_layout.hpp"

#include <set>

#include <gtest/gtest.h>

namespace troupe::models {
namespace {

decoder_config small_llama() {
  decoder_config c;
  c.family = decoder_family::llama;
  c.vocab = 32;
  c.ctx = 16;
  c.layers = 1;
  c.dim = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.ffn = 24;
  c.qkv_bias = true;
  c.tied_embeddings = false;
  return c;
}

// The element of tensor `name` at `flat` in the whole model's values: tensor k holds 1000 k + i.
float whole_value(const decoder_layout& whole, const std::string& name, int64_t flat) {
  return static_cast<float>(1000 * (*whole.find(name))->index + flat);
}

TEST(DecoderLayout, TheLlamaFamilyUsesHfNamesAndShapes) {
  const decoder_config c = small_llama();
  ASSERT_TRUE(c.validate().ok());
  const decoder_layout layout(c, layer_range::all(c));
  std::vector<std::string> names;
  for (const auto& s : layout.slots())
    names.push_back(s.name);
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_EQ(names[1], "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  EXPECT_EQ((*layout.find("model.layers.0.self_attn.k_proj.weight"))->shape,
            (tensor::shape_t{8, 16}));  // [kv_heads * head_dim, dim]
  EXPECT_EQ((*layout.find("model.layers.0.mlp.down_proj.weight"))->shape,
            (tensor::shape_t{16, 24}));
  EXPECT_NE(layout.head_weight(), layout.wte());
  // The initialisation: norms 1, biases 0, matrices random.
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 5);
  const auto& b = layout.block(0);
  EXPECT_EQ(params[b.ln1_w], 1.0f);
  EXPECT_EQ(params[b.q_b], 0.0f);
  EXPECT_NE(params[b.q_w], 0.0f);
}

// Each tensor's place in the whole model seeds its initialisation: no two may share one, or
// their random values would repeat each other.
TEST(DecoderLayout, EveryTensorHasAnInitialisationStreamOfItsOwn) {
  decoder_config c = small_llama();
  c.layers = 3;
  c.qk_norm = true;
  c.o_bias = true;
  for (const decoder_config& config : {c, decoder_config{}}) {
    const decoder_layout layout(config, layer_range::all(config));
    std::set<int64_t> indices;
    for (const auto& s : layout.slots())
      EXPECT_TRUE(indices.insert(s.index).second) << s.name << " reuses index " << s.index;
  }
}

// Megatron's split of the Llama family over two tensor-parallel ranks: each rank's heads' rows
// of q, k and v (and their biases), its share of gate and up, the matching columns of o and
// down, its block of the vocabulary; norms whole.
TEST(DecoderLayout, TensorParallelRanksHoldTheirHeadsOfTheLlamaFamily) {
  const decoder_config c = small_llama();
  const decoder_layout whole(c, layer_range::all(c));
  tensor::named_tensors values;
  for (const auto& s : whole.slots()) {
    tensor::tensor t = tensor::tensor::host(s.whole_shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = whole_value(whole, s.name, i);
    values.tensors.emplace_back(s.name, std::move(t));
  }
  for (int rank = 0; rank < 2; ++rank) {
    const decoder_layout part(c, layer_range::all(c), decoder_head::lm, {rank, 2});
    std::vector<float> params(part.total());
    ASSERT_TRUE(part.from_named(values, params.data()).ok());
    const auto& b = part.block(0);
    const std::string p = "model.layers.0.";
    // q_proj [16, 16]: rows 8 r .. 8 r + 7, i.e. heads 2 r and 2 r + 1.
    EXPECT_EQ(params[b.q_w], whole_value(whole, p + "self_attn.q_proj.weight", rank * 8 * 16));
    // k_proj [8, 16]: one key/value head each, rows 4 r ..
    EXPECT_EQ(params[b.k_w + 16],
              whole_value(whole, p + "self_attn.k_proj.weight", (rank * 4 + 1) * 16));
    EXPECT_EQ(params[b.v_b + 3], whole_value(whole, p + "self_attn.v_proj.bias", rank * 4 + 3));
    // o_proj [16, 16]: columns 8 r .. of each row.
    EXPECT_EQ(params[b.o_w + 8 + 1],
              whole_value(whole, p + "self_attn.o_proj.weight", 16 + rank * 8 + 1));
    // gate [24, 16]: rows 12 r ..; down [16, 24]: columns 12 r ..
    EXPECT_EQ(params[b.gate_w], whole_value(whole, p + "mlp.gate_proj.weight", rank * 12 * 16));
    EXPECT_EQ(params[b.down_w + 12 + 5],
              whole_value(whole, p + "mlp.down_proj.weight", 24 + rank * 12 + 5));
    // The vocabulary's rows 16 r .., and the norms whole.
    EXPECT_EQ(params[part.wte()], whole_value(whole, "model.embed_tokens.weight", rank * 16 * 16));
    EXPECT_EQ(params[part.head_weight()], whole_value(whole, "lm_head.weight", rank * 16 * 16));
    EXPECT_EQ(params[b.ln2_w + 15], whole_value(whole, p + "post_attention_layernorm.weight", 15));
  }
}

}  // namespace
}  // namespace troupe::models
