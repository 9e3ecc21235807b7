#include "models/decoder/decoder_cpu_stage.hpp"

#include <barrier>
#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "nlohmann/json.hpp"
#include "runtime/tensor/safetensors.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::models {
namespace {

// The fixture make_gpt_fixture.py wrote with PyTorch: weights, a batch, the loss, the gradients.
struct torch_fixture {
  decoder_config config;
  tensor::named_tensors file;
  int batch = 0, seq = 0;
};

torch_fixture load_fixture() {
  torch_fixture f;
  absl::StatusOr<tensor::named_tensors> file = tensor::read_safetensors(
      TROUPE_SOURCE_DIR "/tests/models/decoder/fixtures/gpt_small.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  f.file = *file;
  auto c = nlohmann::json::parse(f.file.metadata.at("config"));
  f.config = {c["vocab"], c["ctx"], c["layers"], c["dim"], c["heads"]};
  tensor::tensor tokens = *f.file.get("tokens");
  f.batch = static_cast<int>(tokens.size(0));
  f.seq = static_cast<int>(tokens.size(1));
  return f;
}

// The tests below run on each family: GPT-2, a Llama (grouped-query attention on half as many
// key/value heads, an MLP of 1.5 dim, q/k/v and output biases, linear RoPE scaling, an untied
// head) and a Qwen 3 (per-head q/k norms, heads wider than dim / heads, tied embeddings).
enum class variant { gpt2, llama, qwen3 };

std::string variant_name(const ::testing::TestParamInfo<variant>& info) {
  switch (info.param) {
    case variant::gpt2:
      return "gpt2";
    case variant::llama:
      return "llama";
    case variant::qwen3:
      return "qwen3";
  }
  return "";
}

decoder_config config_of(variant v, int vocab, int ctx, int layers, int dim, int heads) {
  decoder_config c{vocab, ctx, layers, dim, heads};
  if (v == variant::gpt2) return c;
  c.family = decoder_family::llama;
  c.kv_heads = heads / 2;
  c.norm_eps = 1e-6f;
  if (v == variant::llama) {
    c.ffn = 3 * dim / 2, c.qkv_bias = true, c.o_bias = true, c.tied_embeddings = false;
    c.rope.type = rope_scaling::kind::linear, c.rope.factor = 2.0;
  } else {
    c.ffn = dim, c.qk_norm = true, c.head_dim = 2 * dim / heads, c.rope_theta = 1e6;
  }
  EXPECT_TRUE(c.validate().ok()) << c.validate();
  return c;
}

// Biases and norm weights away from their initial 0 and 1, so that their paths count.
// A tensor-parallel rank's parts change as the whole tensor's do.
void perturb(const decoder_layout& layout, float* params) {
  for (const auto& s : layout.slots()) {
    if (s.shape.size() != 1) continue;
    for_each_shard_run(s.whole_shape, s.split, layout.tp(),
                       [&](int64_t local, int64_t at, int64_t n) {
                         for (int64_t i = 0; i < n; ++i) {
                           const int64_t step = ((at + i) * 7 + s.index) % 9 - 4;
                           params[s.offset + local + i] += 0.05f * static_cast<float>(step);
                         }
                       });
  }
}

class DecoderCpuStageFamily : public ::testing::TestWithParam<variant> {};

tensor::named_tensors with_prefix(const tensor::named_tensors& in, const std::string& prefix) {
  tensor::named_tensors out;
  for (const auto& [name, t] : in.tensors) {
    if (name.starts_with(prefix)) out.tensors.emplace_back(name.substr(prefix.size()), t);
  }
  return out;
}

TEST(DecoderCpuStage, LossAndEveryGradientMatchPyTorch) {
  torch_fixture f = load_fixture();
  decoder_layout layout(f.config, layer_range::all(f.config));
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f), want(layout.total());
  ASSERT_TRUE(layout.from_named(with_prefix(f.file, "param."), params.data()).ok());
  ASSERT_TRUE(layout.from_named(with_prefix(f.file, "grad."), want.data()).ok());

  kernels::cpu::thread_pool pool(2);
  decoder_cpu_stage stage(layout, f.batch, &pool);
  const loss_sum loss =
      stage.forward(params.data(), f.batch, f.seq, (*f.file.get("tokens")).data<int32_t>(), nullptr,
                    (*f.file.get("targets")).data<int32_t>());
  EXPECT_EQ(loss.tokens, f.batch * f.seq - 1);  // one target is -1
  EXPECT_NEAR(loss.sum / loss.tokens, (*f.file.get("loss")).data<float>()[0], 2e-5);
  stage.backward(params.data(), grads.data(), nullptr, 1.0f / loss.tokens);
  for (const auto& slot : layout.slots()) {
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < slot.numel; ++i) {
      max_err = std::max<double>(max_err, std::abs(grads[slot.offset + i] - want[slot.offset + i]));
      max_ref = std::max<double>(max_ref, std::abs(want[slot.offset + i]));
    }
    EXPECT_LT(max_err, 1e-6 + 1e-3 * max_ref)
        << slot.name << " (largest gradient " << max_ref << ")";
    EXPECT_GT(max_ref, 0.0) << slot.name;
  }
}

TEST_P(DecoderCpuStageFamily, TwoStagesChainedEqualTheWholeModel) {
  const decoder_config config = config_of(GetParam(), 50, 12, 3, 16, 2);
  const int batch = 2, seq = 9;
  decoder_layout whole(config, layer_range::all(config)), front(config, {0, 1}),
      back(config, {1, 3});
  std::vector<float> params(whole.total());
  whole.initialize(params.data(), 7);
  perturb(whole, params.data());
  tensor::named_tensors named = whole.to_named(params.data());
  std::vector<float> p_front(front.total()), p_back(back.total());
  ASSERT_TRUE(front.from_named(named, p_front.data()).ok());
  ASSERT_TRUE(back.from_named(named, p_back.data()).ok());
  const bool gpt2 = config.family == decoder_family::gpt2;
  EXPECT_FALSE(front.find(gpt2 ? "ln_f.weight" : "model.norm.weight").ok());
  // A tied head is the embedding, which the last stage holds too.
  EXPECT_EQ(back.find(gpt2 ? "wte.weight" : "model.embed_tokens.weight").ok(),
            config.tied_embeddings);

  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    tokens[i] = (i * 7) % 50, targets[i] = (i * 11 + 3) % 50;
  decoder_cpu_stage s_whole(whole, batch, nullptr), s_front(front, batch, nullptr),
      s_back(back, batch, nullptr);
  const loss_sum l_whole =
      s_whole.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data());
  s_front.forward(p_front.data(), batch, seq, tokens.data(), nullptr, nullptr);
  const loss_sum l_split =
      s_back.forward(p_back.data(), batch, seq, nullptr, s_front.hidden_out(), targets.data());
  EXPECT_DOUBLE_EQ(l_whole.sum, l_split.sum);

  std::vector<float> g_whole(whole.total(), 0), g_front(front.total(), 0), g_back(back.total(), 0);
  s_whole.backward(params.data(), g_whole.data(), nullptr, 1.0f / l_whole.tokens);
  s_back.backward(p_back.data(), g_back.data(), nullptr, 1.0f / l_split.tokens);
  s_front.backward(p_front.data(), g_front.data(), s_back.dhidden_in(), 0.0f);
  for (const auto& slot : whole.slots()) {
    const bool in_front = front.find(slot.name).ok(), in_back = back.find(slot.name).ok();
    for (int64_t i = 0; i < slot.numel; ++i) {
      float split = 0;
      if (in_front) split += g_front[(*front.find(slot.name))->offset + i];
      if (in_back) split += g_back[(*back.find(slot.name))->offset + i];
      ASSERT_NEAR(g_whole[slot.offset + i], split, 1e-6) << slot.name << "[" << i << "]";
    }
  }
}

TEST_P(DecoderCpuStageFamily, WholeModelGradientsMatchFiniteDifferences) {
  const decoder_config config = config_of(GetParam(), 20, 8, 2, 8, 2);
  const int batch = 2, seq = 7;
  decoder_layout layout(config, layer_range::all(config));
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f);
  layout.initialize(params.data(), 3);
  perturb(layout, params.data());
  for (auto& p : params)
    p *= 3;  // larger weights: gradients well above float noise
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    tokens[i] = (i * 3) % 20, targets[i] = (i * 5 + 1) % 20;
  decoder_cpu_stage stage(layout, batch, nullptr);
  auto loss = [&] {
    const loss_sum l =
        stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data());
    return l.sum / l.tokens;
  };
  loss();
  stage.backward(params.data(), grads.data(), nullptr, 1.0f / (batch * seq));
  // RMSNorm over rows as small as the embedding's curves more: a smaller step.
  const float step = config.family == decoder_family::gpt2 ? 3e-3f : 1e-3f;
  testing::expect_gradient("gpt", params, grads, loss, step, 1e-3, 3e-2, 300);
}

// Gradient buckets: they tile the buffer in backward order, and each bucket's gradients are
// final when the batch reports it (what lets its all-reduce overlap the rest of the backward).
TEST_P(DecoderCpuStageFamily, ReportsEachGradientBucketOnceItIsFinal) {
  const decoder_config config = config_of(GetParam(), 64, 16, 3, 32, 4);
  decoder_layout layout(config, layer_range::all(config));
  const std::vector<param_range> buckets = layout.backward_buckets();
  ASSERT_EQ(buckets.size(), 4u);  // three blocks, then the embeddings
  EXPECT_EQ(buckets.front().end, layout.total());
  EXPECT_EQ(buckets.back().begin, 0);
  for (size_t i = 1; i < buckets.size(); ++i)
    EXPECT_EQ(buckets[i].end, buckets[i - 1].begin);
  EXPECT_EQ(buckets[0].begin, layout.block(2).ln1_w);

  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 3);
  perturb(layout, params.data());
  const int batch = 4, seq = 16;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    tokens[i] = (i * 5) % 64, targets[i] = (i * 13 + 1) % 64;
  for (int threads : {1, 2}) {
    decoder_cpu_batch model(layout, batch, threads);
    std::vector<float> grads(layout.total(), 0.0f), plain(layout.total(), 0.0f);
    model.run(params.data(), plain.data(), batch, seq, tokens.data(), targets.data(), 0.01f);
    std::vector<param_range> seen;
    std::vector<std::vector<float>> at_report;
    model.run(params.data(), grads.data(), batch, seq, tokens.data(), targets.data(), 0.01f,
              [&](param_range b) {
                seen.push_back(b);
                at_report.emplace_back(grads.begin() + b.begin, grads.begin() + b.end);
              });
    ASSERT_EQ(seen.size(), buckets.size()) << threads;
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].begin, buckets[i].begin);
      EXPECT_EQ(at_report[i],
                std::vector<float>(grads.begin() + seen[i].begin, grads.begin() + seen[i].end))
          << "bucket " << i << " changed after it was reported (" << threads << " threads)";
    }
    EXPECT_EQ(grads, plain) << "reporting buckets changes no gradient";
  }
}

// Activation checkpointing recomputes what it did not keep with the same arithmetic: every
// block (segments of 1), segments of 2 of 5 blocks (the last one shorter) and of 3, on the loss
// and on a per-token objective, give the loss and the gradients of the run that keeps
// everything, bit for bit, and hold fewer bytes of activations.
TEST_P(DecoderCpuStageFamily, ActivationCheckpointingChangesNoBitAndHoldsLess) {
  const decoder_config config = config_of(GetParam(), 48, 16, 5, 16, 2);
  decoder_layout layout(config, layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 5);
  perturb(layout, params.data());
  const int batch = 3, seq = 16;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    tokens[i] = (i * 7) % 48, targets[i] = i % 5 == 0 ? -1 : (i * 11 + 2) % 48;
  std::vector<float> dloss(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    dloss[i] = 0.01f * static_cast<float>(i % 7 - 3);
  // The loss's gradients, then a per-token objective's (the RL path), added up.
  const auto run = [&](int segment, int64_t* bytes) {
    decoder_cpu_stage stage(layout, batch, nullptr, segment);
    *bytes = stage.activation_bytes();
    EXPECT_EQ(*bytes, decoder_cpu_stage::activation_bytes(layout, batch, segment))
        << "the estimate is what a stage holds";
    std::vector<float> grads(layout.total(), 0.0f);
    const loss_sum loss =
        stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data());
    stage.backward(params.data(), grads.data(), nullptr, 1.0f / loss.tokens);
    stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data(), 0.7f);
    std::vector<float> losses(stage.token_losses(), stage.token_losses() + batch * seq);
    stage.backward(params.data(), grads.data(), token_objective_grad{dloss.data()});
    grads.push_back(static_cast<float>(loss.sum));
    grads.insert(grads.end(), losses.begin(), losses.end());
    return grads;
  };
  int64_t full_bytes = 0;
  const std::vector<float> want = run(0, &full_bytes);
  for (int segment : {1, 2, 3}) {
    int64_t bytes = 0;
    EXPECT_EQ(run(segment, &bytes), want) << "segments of " << segment;
    EXPECT_LT(bytes, full_bytes) << "segments of " << segment;
  }
}

// A zero-bubble schedule runs a backward in two halves with other work between them: the input
// half (what the stage before waits for) and the weight half. On the whole model, a first, a
// middle and a last stage (the last at temperature 0.8), two micro-batches in the order ZB-H1
// may run them (F0 F1 B0 B1 W0 W1: each weight half after the other micro-batch's input half),
// the halves add the gradients backward() adds, bit for bit, and the same d(hidden input).
TEST_P(DecoderCpuStageFamily, BackwardInHalvesChangesNoBit) {
  const decoder_config config = config_of(GetParam(), 40, 12, 4, 16, 2);
  const int batch = 2, seq = 12;
  std::vector<int32_t> tokens(2 * batch * seq), targets(2 * batch * seq);
  for (int i = 0; i < 2 * batch * seq; ++i)
    tokens[i] = (i * 7) % 40, targets[i] = i % 6 == 0 ? -1 : (i * 11 + 3) % 40;
  std::vector<float> hidden(2 * batch * seq * config.dim), dhidden(hidden.size());
  for (size_t i = 0; i < hidden.size(); ++i) {
    hidden[i] = 0.1f * static_cast<float>(static_cast<int>(i * 37 % 19) - 9);
    dhidden[i] = 0.01f * static_cast<float>(static_cast<int>(i * 53 % 23) - 11);
  }
  const decoder_layout whole(config, layer_range::all(config));
  for (const layer_range range :
       {layer_range::all(config), layer_range{0, 2}, layer_range{1, 3}, layer_range{2, 4}}) {
    const decoder_layout layout(config, range, whole.head());
    std::vector<float> params(layout.total());
    layout.initialize(params.data(), 3);
    perturb(layout, params.data());
    const bool first = range.has_embedding(), last = range.has_head(config);
    const size_t rows = static_cast<size_t>(batch) * seq, width = rows * config.dim;
    // Micro-batch mb's inputs, and d(hidden_out) when the stage does not end in the loss.
    auto forward = [&](decoder_cpu_stage& s, int mb) {
      s.forward(params.data(), batch, seq, first ? tokens.data() + mb * rows : nullptr,
                first ? nullptr : hidden.data() + mb * width,
                last ? targets.data() + mb * rows : nullptr, last ? 0.8f : 1.0f);
    };
    const float* const d[2] = {last ? nullptr : dhidden.data(),
                               last ? nullptr : dhidden.data() + width};
    decoder_cpu_stage plain(layout, batch, nullptr);
    std::vector<float> want(layout.total(), 0.0f), want_dx;
    for (int mb = 0; mb < 2; ++mb) {
      forward(plain, mb);
      plain.backward(params.data(), want.data(), d[mb], 0.01f);
      if (!first) want_dx.insert(want_dx.end(), plain.dhidden_in(), plain.dhidden_in() + width);
    }
    decoder_cpu_stage a(layout, batch, nullptr, 0, true), b(layout, batch, nullptr, 0, true);
    EXPECT_EQ(a.activation_bytes(), decoder_cpu_stage::activation_bytes(layout, batch, 0, true));
    EXPECT_GT(a.activation_bytes(), plain.activation_bytes());
    std::vector<float> got(layout.total(), 0.0f), got_dx;
    forward(a, 0);
    forward(b, 1);
    for (decoder_cpu_stage* s : {&a, &b}) {
      s->backward_input(params.data(), got.data(), d[s == &a ? 0 : 1], 0.01f);
      if (!first) got_dx.insert(got_dx.end(), s->dhidden_in(), s->dhidden_in() + width);
    }
    a.backward_weights(got.data());
    b.backward_weights(got.data());
    EXPECT_EQ(got, want) << "blocks " << range.first << "-" << range.last;
    EXPECT_EQ(got_dx, want_dx) << "blocks " << range.first << "-" << range.last;
  }
}

// Two ranks' in-place sum, in rank order, so that both get the same bits (as a ring all-reduce
// gives every rank the same), over two threads.
class two_rank_sum {
 public:
  absl::Status operator()(int rank, float* data, int64_t n) {
    at_[rank] = data;
    sync_.arrive_and_wait();
    std::vector<float> sum(n);
    for (int64_t i = 0; i < n; ++i)
      sum[i] = at_[0][i] + at_[1][i];
    sync_.arrive_and_wait();
    std::copy(sum.begin(), sum.end(), data);
    return absl::OkStatus();
  }

 private:
  std::barrier<> sync_{2};
  float* at_[2] = {nullptr, nullptr};
};

// Megatron's tensor parallelism on two ranks (threads): the whole model and a middle stage (at
// temperature 0.9 on the last stage's part) give the loss, the d(hidden input) and every
// gradient of one rank within float tolerance, the replicated parameters' gradients bit for bit
// the same on both ranks; the backward in halves gives the whole backward's bits.
TEST_P(DecoderCpuStageFamily, TwoTensorParallelRanksComputeAsOne) {
  const decoder_config config = config_of(GetParam(), 40, 12, 3, 32, 4);
  const int batch = 2, seq = 12;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i)
    tokens[i] = (i * 7) % 40, targets[i] = i % 5 == 0 ? -1 : (i * 11 + 3) % 40;
  std::vector<float> hidden(batch * seq * config.dim), dhidden(hidden.size());
  for (size_t i = 0; i < hidden.size(); ++i) {
    hidden[i] = 0.1f * static_cast<float>(static_cast<int>(i * 37 % 19) - 9);
    dhidden[i] = 0.01f * static_cast<float>(static_cast<int>(i * 53 % 23) - 11);
  }
  for (const layer_range range : {layer_range::all(config), layer_range{1, 2}}) {
    const bool first = range.has_embedding(), last = range.has_head(config);
    const float temperature = last ? 0.9f : 1.0f;
    const decoder_layout one(config, range);
    std::vector<float> params(one.total());
    one.initialize(params.data(), 5);
    perturb(one, params.data());
    decoder_cpu_stage whole(one, batch, nullptr);
    const loss_sum want = whole.forward(params.data(), batch, seq, first ? tokens.data() : nullptr,
                                        first ? nullptr : hidden.data(),
                                        last ? targets.data() : nullptr, temperature);
    std::vector<float> want_grads(one.total(), 0.0f);
    whole.backward(params.data(), want_grads.data(), last ? nullptr : dhidden.data(), 0.02f);
    const std::vector<float> want_dx =
        first ? std::vector<float>{}
              : std::vector<float>(whole.dhidden_in(), whole.dhidden_in() + hidden.size());

    two_rank_sum sum;
    std::vector<std::vector<float>> grads(2), halves(2), dx(2);
    std::vector<loss_sum> losses(2);
    std::vector<std::unique_ptr<decoder_layout>> layouts(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      layouts[r] =
          std::make_unique<decoder_layout>(config, range, decoder_head::lm, tensor_parallel{r, 2});
      ranks.emplace_back([&, r] {
        const decoder_layout& layout = *layouts[r];
        std::vector<float> p(layout.total());
        layout.initialize(p.data(), 5);
        perturb(layout, p.data());
        decoder_cpu_stage stage(layout, batch, nullptr, 0, true);
        stage.set_tensor_allreduce([&, r](float* data, int64_t n) { return sum(r, data, n); });
        auto forward = [&] {
          return stage.forward(p.data(), batch, seq, first ? tokens.data() : nullptr,
                               first ? nullptr : hidden.data(), last ? targets.data() : nullptr,
                               temperature);
        };
        losses[r] = forward();
        grads[r].assign(layout.total(), 0.0f);
        stage.backward(p.data(), grads[r].data(), last ? nullptr : dhidden.data(), 0.02f);
        if (!first) dx[r].assign(stage.dhidden_in(), stage.dhidden_in() + hidden.size());
        forward();
        halves[r].assign(layout.total(), 0.0f);
        stage.backward_input(p.data(), halves[r].data(), last ? nullptr : dhidden.data(), 0.02f);
        stage.backward_weights(halves[r].data());
        EXPECT_TRUE(stage.take_comm_status().ok());
      });
    }
    for (auto& t : ranks)
      t.join();
    const std::string where = absl::StrCat("blocks ", range.first, "-", range.last);
    EXPECT_EQ(losses[0].sum, losses[1].sum) << where;
    EXPECT_NEAR(losses[0].sum, want.sum, 1e-5 * std::abs(want.sum)) << where;
    EXPECT_EQ(grads[0], halves[0]) << where;
    EXPECT_EQ(grads[1], halves[1]) << where;
    EXPECT_EQ(dx[0], dx[1]) << where;
    for (size_t i = 0; i < want_dx.size(); ++i)
      ASSERT_NEAR(dx[0][i], want_dx[i], 1e-6) << where << " dx " << i;
    for (const auto& ws : one.slots()) {
      for (int r = 0; r < 2; ++r) {
        const parameter_slot& s = **layouts[r]->find(ws.name);
        if (s.split.dim < 0) {  // replicated: the same bits on both ranks
          const parameter_slot& other = **layouts[1 - r]->find(ws.name);
          ASSERT_TRUE(std::equal(grads[r].begin() + s.offset, grads[r].begin() + s.offset + s.numel,
                                 grads[1 - r].begin() + other.offset))
              << where << " " << ws.name;
        }
        for_each_shard_run(
            s.whole_shape, s.split, tensor_parallel{r, 2},
            [&](int64_t local, int64_t at, int64_t n) {
              for (int64_t j = 0; j < n; ++j) {
                ASSERT_NEAR(grads[r][s.offset + local + j], want_grads[ws.offset + at + j], 1e-6)
                    << where << " " << ws.name << "[" << at + j << "]";
              }
            });
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderCpuStageFamily,
                         ::testing::Values(variant::gpt2, variant::llama, variant::qwen3),
                         variant_name);

}  // namespace
}  // namespace troupe::models
