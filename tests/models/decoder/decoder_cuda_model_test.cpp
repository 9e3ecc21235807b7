// The mixed-precision CUDA model against the f32 CPU model from the same weights. CTest label
// `gpu`; skips without a CUDA device.

#include "models/decoder/decoder_cuda_model.hpp"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "runtime/tensor/cuda_device.hpp"

namespace troupe::models {
namespace {

// Each family, with heads of 64 values: GPT-2; a Llama (grouped-query attention on half as many
// key/value heads, an MLP of 1.5 dim, q/k/v and output biases, an untied head); a Qwen 3
// (per-head q/k norms, queries wider than the model, tied embeddings).
enum class family_variant { gpt2, llama, qwen3 };

decoder_config config_of(family_variant v) {
  decoder_config c{64, 32, 2, 128, 2};
  if (v == family_variant::gpt2) return c;
  c.family = decoder_family::llama;
  c.kv_heads = 1;
  if (v == family_variant::llama) {
    c.ffn = 192, c.qkv_bias = true, c.o_bias = true, c.tied_embeddings = false;
  } else {
    c.dim = 64, c.ffn = 64, c.qk_norm = true, c.head_dim = 64, c.rope_theta = 1e6;
  }
  EXPECT_TRUE(c.validate().ok()) << c.validate();
  return c;
}

class DecoderCudaModel : public ::testing::TestWithParam<family_variant> {};

TEST_P(DecoderCudaModel, LossAndGradientsFollowTheCpuModel) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  const decoder_config config = config_of(GetParam());
  const int batch = 3, seq = 29;
  decoder_layout layout(config, layer_range::all(config));
  auto model = decoder_cuda_model::create(layout, batch, 0, 5);
  ASSERT_TRUE(model.ok()) << model.status();

  // The CPU model starts from the CUDA model's bf16-rounded weights.
  tensor::tensor master = *(*model)->master().to(tensor::device::cpu());
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f);
  for (int64_t i = 0; i < layout.total(); ++i) {
    params[i] = static_cast<float>(tensor::bf16(master.data<float>()[i]));
  }
  tensor::tensor tokens = tensor::tensor::host({batch * seq}, tensor::dtype::i32),
                 targets = tensor::tensor::host({batch * seq}, tensor::dtype::i32);
  for (int i = 0; i < batch * seq; ++i) {
    tokens.data<int32_t>()[i] = (i * 13) % 64;
    targets.data<int32_t>()[i] = (i * 7 + 2) % 64;
  }
  decoder_cpu_stage cpu(layout, batch, nullptr);
  const loss_sum want = cpu.forward(params.data(), batch, seq, tokens.data<int32_t>(), nullptr,
                                    targets.data<int32_t>());
  cpu.backward(params.data(), grads.data(), nullptr, 1.0f / want.tokens);

  auto got =
      (*model)->train_step(*tokens.to(tensor::device::cuda(0)),
                           *targets.to(tensor::device::cuda(0)), batch, seq, 1.0f / (batch * seq));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(got->sum / got->tokens, want.sum / want.tokens, 2e-2 * want.sum / want.tokens);
  tensor::tensor g = *(*model)->grads().to(tensor::device::cpu());
  for (const auto& slot : layout.slots()) {
    double err = 0, ref = 0;
    for (int64_t i = 0; i < slot.numel; ++i) {
      err = std::max<double>(err,
                             std::abs(g.data<float>()[slot.offset + i] - grads[slot.offset + i]));
      ref = std::max<double>(ref, std::abs(grads[slot.offset + i]));
    }
    EXPECT_LT(err, 1e-5 + 5e-2 * ref) << slot.name;
  }
  ASSERT_TRUE((*model)->optimizer_step({1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1}, 0.1f).ok());
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderCudaModel,
                         ::testing::Values(family_variant::gpt2, family_variant::llama,
                                           family_variant::qwen3),
                         [](const ::testing::TestParamInfo<family_variant>& info) {
                           return info.param == family_variant::gpt2    ? std::string("gpt2")
                                  : info.param == family_variant::llama ? std::string("llama")
                                                                        : std::string("qwen3");
                         });

}  // namespace
}  // namespace troupe::models
