#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/cpu_paged_decoder.hpp"
#include "models/decoder/quantized_weights.hpp"

namespace troupe::models {
namespace {

decoder_config gpt2_model() {
  return {48, 32, 2, 32, 4};
}
decoder_config llama_model() {  // grouped-query attention, q/k/v biases, an MLP of 48
  decoder_config c{48, 32, 2, 32, 4};
  c.family = decoder_family::llama;
  c.kv_heads = 2;
  c.ffn = 48;
  c.qkv_bias = true;
  return c;
}

struct model {
  explicit model(const decoder_config& c, uint64_t seed)
      : layout(c, layer_range::all(c)), params(layout.total()) {
    layout.initialize(params.data(), seed);
    for (auto& p : params)
      p *= 5;  // sharper distributions than the 0.02 init
  }
  decoder_layout layout;
  std::vector<float> params;
};

// Two sequences' prefill chunks and then single tokens, the logits after each step.
std::vector<float> decode(cpu_paged_decoder& decoder, int vocab) {
  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12}, b = {7, 7, 2, 35, 11, 19};
  const std::vector<int32_t> table_a = {3, 0}, table_b = {1, 2};
  std::vector<float> all, logits(2 * vocab);
  std::vector<decode_request> batch = {{a.data(), 5, 0, table_a.data(), 2},
                                       {b.data(), 3, 0, table_b.data(), 2}};
  for (int step = 0; step < 4; ++step) {
    EXPECT_TRUE(decoder.forward(batch, logits.data()).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    for (auto& r : batch) {
      r.first_position += r.count;
      r.tokens += r.count;
      r.count = 1;
    }
  }
  return all;
}

float largest_difference(const std::vector<float>& x, const std::vector<float>& y) {
  float d = 0;
  for (size_t i = 0; i < x.size(); ++i)
    d = std::max(d, std::fabs(x[i] - y[i]));
  return d;
}

decoder_config untied_llama_model() {
  decoder_config c = llama_model();
  c.tied_embeddings = false;
  return c;
}

// The quantized decoder computes the model whose block weights (and output head, with the token
// embedding when tied) are the dequantized ones (the f32 decoder on those, to float rounding),
// for both families, int8 per channel and int4 in groups, and that model is not the f32 one.
TEST(QuantizedDecoder, ComputesTheModelOfItsDequantizedWeights) {
  for (const decoder_config& c : {gpt2_model(), llama_model(), untied_llama_model()}) {
    for (const weight_quantization q :
         {weight_quantization{8, 0}, weight_quantization{4, 16}, weight_quantization::serving(8, 0),
          weight_quantization{4, 16, true}}) {
      SCOPED_TRACE(testing::Message() << (c.family == decoder_family::gpt2 ? "gpt2 " : "llama ")
                                      << (c.tied_embeddings ? "tied " : "untied ") << q.describe());
      model m(c, 5);
      auto quantized = quantized_weights::quantize(m.layout, m.params.data(), q);
      ASSERT_TRUE(quantized.ok()) << quantized.status();
      std::vector<float> dequantized = m.params;
      (*quantized)->dequantize_into(dequantized.data());

      cpu_paged_decoder reference(m.layout, dequantized.data(), 16, 4, 4);
      cpu_paged_decoder f32(m.layout, m.params.data(), 16, 4, 4);
      cpu_paged_decoder decoder(m.layout, m.params.data(), 16, 4, 4);
      ASSERT_TRUE(decoder.quantize(q).ok());
      const auto want = decode(reference, c.vocab), got = decode(decoder, c.vocab);
      EXPECT_LT(largest_difference(got, want), 1e-3f);
      EXPECT_GT(largest_difference(decode(f32, c.vocab), got), 1e-3f);
    }
  }
}

// A quantized decoder's logits for a request are the same bits on one thread and on two, where
// each request runs alone; and a weights swap quantizes the new weights.
TEST(QuantizedDecoder, IsBatchInvariantAndRequantizesOnASwap) {
  const decoder_config c = llama_model();
  model first(c, 5), second(c, 6);
  const weight_quantization q{4, 16};
  kernels::cpu::thread_pool pool(2);
  cpu_paged_decoder alone(first.layout, first.params.data(), 16, 4, 4);
  cpu_paged_decoder split(first.layout, first.params.data(), 16, 4, 4, &pool);
  ASSERT_TRUE(alone.quantize(q).ok());
  ASSERT_TRUE(split.quantize(q).ok());
  EXPECT_EQ(decode(alone, c.vocab), decode(split, c.vocab));

  cpu_paged_decoder fresh(second.layout, second.params.data(), 16, 4, 4);
  ASSERT_TRUE(fresh.quantize(q).ok());
  cpu_paged_decoder swapped(first.layout, first.params.data(), 16, 4, 4);
  ASSERT_TRUE(swapped.quantize(q).ok());
  ASSERT_TRUE(swapped.set_weights(second.params.data()).ok());
  EXPECT_EQ(decode(fresh, c.vocab), decode(swapped, c.vocab));
}

TEST(QuantizedDecoder, ALayerItCannotQuantizeIsNamedWithWhatToChoose) {
  decoder_config c = llama_model();
  c.ffn = 40;  // down_proj's inputs: not a multiple of 16
  model m(c, 5);
  cpu_paged_decoder decoder(m.layout, m.params.data(), 16, 4, 4);
  const absl::Status s = decoder.quantize({8, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer 0 mlp.down_proj"), std::string::npos) << s;
  EXPECT_NE(s.message().find("a positive multiple of 16"), std::string::npos) << s;
  const absl::Status group = decoder.quantize({4, 48});
  EXPECT_NE(group.message().find("group size 48"), std::string::npos) << group;
}

// An int8 KV cache: a quarter of the f32 cache's bytes (and a scale per position and key/value
// head), logits within 5% of the largest of the f32 cache's (these models' weights are 5 times
// the initialisation's, so their attention is sharp), and still the same bits on one thread and
// on two.
TEST(QuantizedDecoder, AnInt8KvCacheStaysNearTheF32OneAndBatchInvariant) {
  for (const decoder_config& c : {gpt2_model(), llama_model()}) {
    model m(c, 5);
    kernels::cpu::thread_pool pool(2);
    cpu_paged_decoder f32(m.layout, m.params.data(), 16, 4, 4);
    cpu_paged_decoder int8(m.layout, m.params.data(), 16, 4, 4, nullptr, kv_cache_dtype::int8);
    cpu_paged_decoder split(m.layout, m.params.data(), 16, 4, 4, &pool, kv_cache_dtype::int8);
    const auto want = decode(f32, c.vocab), got = decode(int8, c.vocab);
    float largest = 0;
    for (float x : want)
      largest = std::max(largest, std::fabs(x));
    EXPECT_LT(largest_difference(got, want), 0.05f * largest) << largest;
    EXPECT_GT(largest_difference(got, want), 0.0f);
    EXPECT_EQ(decode(split, c.vocab), got);
    const int64_t positions = 4 * 4, kv = c.kv_width(), heads = c.kv_head_count();
    EXPECT_EQ(f32.cache().bytes(), 2 * c.layers * positions * kv * 4);
    EXPECT_EQ(int8.cache().bytes(), 2 * c.layers * positions * (kv + heads * 4));
  }
}

// The resident pages of this process, in bytes.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Quantized at load, the f32 block weights are given back: the process's resident memory falls
// by about their bytes, and the decoder on the released buffer with the quantized weights gives
// the logits of one quantizing the whole buffer itself.
TEST(QuantizedDecoder, TheF32WeightsItReplacesAreGivenBack) {
  decoder_config c = llama_model();
  c.dim = 256, c.ffn = 768, c.heads = 8, c.kv_heads = 4, c.vocab = 1024;
  model m(c, 7);
  const auto q = weight_quantization::serving(8, 0);  // the tied head and embedding too
  cpu_paged_decoder whole(m.layout, m.params.data(), 16, 4, 4);
  ASSERT_TRUE(whole.quantize(q).ok());
  const auto want = decode(whole, c.vocab);

  auto quantized = quantized_weights::quantize(m.layout, m.params.data(), q);
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  int64_t f32_bytes = 0;
  for (int l = 0; l < c.layers; ++l)
    for (const auto& w : quantized_weights::block_weights(m.layout, l))
      f32_bytes += int64_t{w.outputs} * w.inputs * 4;
  f32_bytes += int64_t{c.vocab} * c.dim * 4;
  const int64_t before = resident_bytes();
  const int64_t released = (*quantized)->release_f32(m.params.data());
  const int64_t after = resident_bytes();
  EXPECT_GT(released, f32_bytes * 9 / 10);
  EXPECT_GT(before - after, released * 9 / 10);
  EXPECT_EQ(m.params[m.layout.block(0).up_w + 5000], 0.0f);
  EXPECT_EQ(m.params[m.layout.wte() + 5000], 0.0f);

  cpu_paged_decoder given(m.layout, m.params.data(), 16, 4, 4);
  given.use_quantized(std::move(*quantized));
  EXPECT_EQ(decode(given, c.vocab), want);
}

}  // namespace
}  // namespace troupe::models
