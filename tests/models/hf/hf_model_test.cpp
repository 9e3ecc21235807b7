// troupe's decoder and training stage on random-weight Hugging Face checkpoints of the Llama
// family against an independent forward pass written in PyTorch from Hugging Face's modeling
// conventions (hf_reference_model.py, Debian's python3-torch): the logits at every position
// within 1e-4 of the largest, greedy continuations identical, and the training loss and every
// gradient those of PyTorch's autograd. Each checkpoint is written by that
// script in HF's own layout (config.json, safetensors, shards and index), read by troupe
// through read_hf_weights.

#include <cmath>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/cpu_paged_decoder.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "models/hf/gptq_weights.hpp"
#include "models/hf/hf_weights.hpp"
#include "nlohmann/json.hpp"
#include "runtime/tensor/safetensors.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

const std::string script =
    std::string(TROUPE_SOURCE_DIR) + "/tests/models/hf/hf_reference_model.py";

struct checkpoint_case {
  std::string arch, dtype;
  int shards;
};

void PrintTo(const checkpoint_case& c, std::ostream* os) {
  *os << c.arch << "/" << c.dtype << "/" << c.shards;
}

class HfModel : public ::testing::TestWithParam<checkpoint_case> {};

void run_python(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3", script};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = troupe::testing::run(argv, std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err << " (python3-torch comes with scripts/setup.sh)";
}

// The fixture's random-weight checkpoint of `c` in `dir`.
void make_checkpoint(const checkpoint_case& c, const std::string& dir, int seed) {
  run_python({"make", c.arch, dir, "--dtype", c.dtype, "--shards", std::to_string(c.shards),
              "--seed", std::to_string(seed)});
}

// The largest difference over the largest magnitude of the reference's logits.
double relative_error(const float* ours, const std::vector<float>& theirs) {
  double diff = 0, scale = 0;
  for (size_t v = 0; v < theirs.size(); ++v) {
    diff = std::max(diff, std::abs(static_cast<double>(ours[v]) - theirs[v]));
    scale = std::max(scale, std::abs(static_cast<double>(theirs[v])));
  }
  return diff / std::max(scale, 1.0);
}

TEST_P(HfModel, LogitsAndGreedyTokensEqualThePyTorchReference) {
  const checkpoint_case& param = GetParam();
  troupe::testing::temp_dir dir;
  const std::string model = dir.file("model");
  ASSERT_NO_FATAL_FAILURE(make_checkpoint(param, model, 3));
  const std::vector<int32_t> prompt = {5, 17, 3, 88, 41, 9, 60, 23, 77, 12, 4};
  std::string tokens;
  for (int32_t t : prompt)
    absl::StrAppend(&tokens, tokens.empty() ? "" : ",", t);
  const int generate = 8;
  ASSERT_NO_FATAL_FAILURE(run_python({"forward", model, tokens, dir.file("reference.json"),
                                      "--generate", std::to_string(generate)}));
  std::ifstream in(dir.file("reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);

  auto config = load_hf_config(model);
  ASSERT_TRUE(config.ok()) << config.status();
  auto weights = read_hf_weights(model, *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const decoder_layout layout(config->model, layer_range::all(config->model));
  std::vector<float> params(layout.total());
  ASSERT_TRUE(layout.from_named(*weights, params.data()).ok());
  const int V = config->model.vocab, block = 4, blocks = 16;
  std::vector<float> logits(V);

  // One token at a time: the logits after each position.
  {
    cpu_paged_decoder decoder(layout, params.data(), 64, blocks, block);
    std::vector<int32_t> table(blocks);
    for (int b = 0; b < blocks; ++b)
      table[b] = blocks - 1 - b;  // not in order: the cache is paged
    for (size_t t = 0; t < prompt.size(); ++t) {
      const decode_request r{&prompt[t], 1, static_cast<int>(t), table.data(), blocks};
      ASSERT_TRUE(decoder.forward({&r, 1}, logits.data()).ok());
      const auto expected = reference["logits"][t].get<std::vector<float>>();
      EXPECT_LT(relative_error(logits.data(), expected), 1e-4) << "position " << t;
    }
  }
  // The prompt as one prefill chunk, then greedy decoding.
  cpu_paged_decoder decoder(layout, params.data(), 64, blocks, block);
  std::vector<int32_t> table(blocks);
  for (int b = 0; b < blocks; ++b)
    table[b] = b;
  decode_request r{prompt.data(), static_cast<int>(prompt.size()), 0, table.data(), blocks};
  ASSERT_TRUE(decoder.forward({&r, 1}, logits.data()).ok());
  EXPECT_LT(relative_error(logits.data(), reference["logits"].back().get<std::vector<float>>()),
            1e-4);
  std::vector<int32_t> generated;
  int position = static_cast<int>(prompt.size());
  for (int i = 0; i < generate; ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    generated.push_back(next);
    const decode_request step{&generated.back(), 1, position++, table.data(), blocks};
    ASSERT_TRUE(decoder.forward({&step, 1}, logits.data()).ok());
  }
  EXPECT_EQ(generated, reference["generated"].get<std::vector<int32_t>>());
}

// Training: the mean next-token loss over a batch of two sequences, and the gradient of every
// weight, against PyTorch's autograd through the same reference forward: within 1e-4 of each
// tensor's largest gradient, with every tensor's gradient nonzero.
TEST_P(HfModel, TrainingLossAndGradientsEqualPyTorchAutograd) {
  const checkpoint_case& param = GetParam();
  troupe::testing::temp_dir dir;
  const std::string model = dir.file("model");
  ASSERT_NO_FATAL_FAILURE(make_checkpoint(param, model, 5));
  const int batch = 2, seq = 13;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  std::string sequences;
  for (int i = 0; i < batch * seq; ++i) {
    tokens[i] = (i * 37 + 11) % 96;
    absl::StrAppend(&sequences, i == 0 ? "" : i % seq == 0 ? "/" : ",", tokens[i]);
  }
  for (int i = 0; i < batch * seq; ++i)
    targets[i] = (i + 1) % seq == 0 ? -1 : tokens[i + 1];
  ASSERT_NO_FATAL_FAILURE(run_python({"grads", model, sequences, dir.file("grads.safetensors")}));
  auto reference = tensor::read_safetensors(dir.file("grads.safetensors"));
  ASSERT_TRUE(reference.ok()) << reference.status();

  auto config = load_hf_config(model);
  ASSERT_TRUE(config.ok()) << config.status();
  auto weights = read_hf_weights(model, *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const decoder_layout layout(config->model, layer_range::all(config->model));
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f), want(layout.total());
  ASSERT_TRUE(layout.from_named(*weights, params.data()).ok());
  ASSERT_TRUE(layout.from_named(*reference, want.data()).ok());
  kernels::cpu::thread_pool pool(2);
  decoder_cpu_stage stage(layout, batch, &pool);
  const loss_sum loss =
      stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data());
  ASSERT_EQ(loss.tokens, batch * (seq - 1));
  const double want_loss = std::stod(reference->metadata.at("loss"));
  EXPECT_NEAR(loss.sum / loss.tokens, want_loss, 1e-5 * want_loss);
  stage.backward(params.data(), grads.data(), nullptr, 1.0f / static_cast<float>(loss.tokens));
  for (const auto& slot : layout.slots()) {
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < slot.numel; ++i) {
      max_err = std::max<double>(max_err, std::abs(grads[slot.offset + i] - want[slot.offset + i]));
      max_ref = std::max<double>(max_ref, std::abs(want[slot.offset + i]));
    }
    EXPECT_LT(max_err, 1e-4 * max_ref) << slot.name << " (largest gradient " << max_ref << ")";
    EXPECT_GT(max_ref, 0.0) << slot.name;
  }
}

// Each position's logits of `prompt` fed a token at a time through `decoder`, against the
// reference's (within 1e-4 of the largest).
void expect_reference_logits(cpu_paged_decoder& decoder, int vocab,
                             const std::vector<int32_t>& prompt, const nlohmann::json& reference) {
  const int blocks = 16;
  std::vector<int32_t> table(blocks);
  for (int b = 0; b < blocks; ++b)
    table[b] = b;
  std::vector<float> logits(vocab);
  for (size_t t = 0; t < prompt.size(); ++t) {
    const decode_request r{&prompt[t], 1, static_cast<int>(t), table.data(), blocks};
    ASSERT_TRUE(decoder.forward({&r, 1}, logits.data()).ok());
    EXPECT_LT(relative_error(logits.data(), reference["logits"][t].get<std::vector<float>>()), 1e-4)
        << "position " << t;
  }
}

// The reference's logits of `prompt` on the model in `model_dir`.
nlohmann::json reference_logits(const std::string& model_dir, const std::vector<int32_t>& prompt,
                                const std::string& out) {
  std::string tokens;
  for (int32_t t : prompt)
    absl::StrAppend(&tokens, tokens.empty() ? "" : ",", t);
  run_python({"forward", model_dir, tokens, out});
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

// A GPTQ checkpoint written by the reference (asymmetric groups, F16 scales, AutoGPTQ's packing)
// serves the model of its dequantized weights: troupe's quantized decoder on its integers gives
// the logits the reference computes from the weights it dequantizes by GPTQ's formula.
TEST(HfGptq, ACheckpointServesTheModelOfItsDequantizedWeights) {
  const std::vector<int32_t> prompt = {5, 17, 3, 88, 41, 9, 60, 23};
  for (const auto& [bits, group] : {std::pair{4, 32}, std::pair{8, -1}}) {
    SCOPED_TRACE(::testing::Message() << "int" << bits << ", groups of " << group);
    troupe::testing::temp_dir dir;
    const std::string model = dir.file("model");
    ASSERT_NO_FATAL_FAILURE(
        run_python({"make", "llama", model, "--seed", "3", "--gptq", std::to_string(bits),
                    "--group-size", std::to_string(group)}));
    const nlohmann::json reference = reference_logits(model, prompt, dir.file("reference.json"));

    auto config = load_hf_config(model);
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_TRUE(config->quantization.has_value());
    EXPECT_FALSE(config->quantization->symmetric);
    EXPECT_EQ(read_hf_weights(model, *config).status().message().find("is a GPTQ checkpoint") !=
                  std::string::npos,
              true);
    const decoder_layout layout(config->model, layer_range::all(config->model));
    auto q = read_gptq_model(layout, model, *config);
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_NE(q->quantized->find(layout.block(0).q_w), nullptr);
    cpu_paged_decoder decoder(layout, q->params.data(), 64, 16, 4);
    decoder.use_quantized(q->quantized);
    expect_reference_logits(decoder, config->model.vocab, prompt, reference);
    EXPECT_EQ(decoder.set_weights(q->params.data()).code(), absl::StatusCode::kFailedPrecondition);
  }
}

// troupe's own quantization written as a GPTQ checkpoint (`troupe quantize`) is, read by the
// reference, the model troupe serves when it quantizes at load: the same logits; and read back,
// the same integers and scales.
TEST(HfGptq, TroupesQuantizationWritesTheModelItServes) {
  troupe::testing::temp_dir dir;
  const std::string model = dir.file("model"), out = dir.file("int4");
  ASSERT_NO_FATAL_FAILURE(run_python({"make", "llama", model, "--seed", "4"}));
  auto config = load_hf_config(model);
  ASSERT_TRUE(config.ok()) << config.status();
  const decoder_layout layout(config->model, layer_range::all(config->model));
  auto weights = read_hf_weights(model, *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<float> params(layout.total());
  ASSERT_TRUE(layout.from_named(*weights, params.data()).ok());
  const weight_quantization q{4, 32};
  auto quantized = quantized_weights::quantize(layout, params.data(), q);
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  hf_model_config gptq = *config;
  gptq.quantization = gptq_quantization{4, 32};
  ASSERT_TRUE(write_gptq_model(out, gptq, layout, params.data(), **quantized).ok());

  const std::vector<int32_t> prompt = {7, 1, 64, 30, 2, 95, 11};
  const nlohmann::json reference = reference_logits(out, prompt, dir.file("reference.json"));
  cpu_paged_decoder served(layout, params.data(), 64, 16, 4);
  ASSERT_TRUE(served.quantize(q).ok());
  expect_reference_logits(served, config->model.vocab, prompt, reference);

  auto again_config = load_hf_config(out);
  ASSERT_TRUE(again_config.ok()) << again_config.status();
  auto again = read_gptq_model(layout, out, *again_config);
  ASSERT_TRUE(again.ok()) << again.status();
  for (int l = 0; l < config->model.layers; ++l) {
    for (const auto& w : quantized_weights::block_weights(layout, l)) {
      const kernels::quantized_matrix* a = (*quantized)->find(w.offset);
      const kernels::quantized_matrix* b = again->quantized->find(w.offset);
      ASSERT_NE(b, nullptr) << w.name;
      EXPECT_EQ(b->zeros, nullptr) << w.name << ": symmetric, zero points 8";
      EXPECT_EQ(std::memcmp(a->q, b->q, a->rows * a->row_bytes()), 0) << w.name;
      EXPECT_EQ(std::memcmp(a->scales, b->scales, a->rows * a->groups() * sizeof(float)), 0)
          << w.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfModel,
                         ::testing::Values(checkpoint_case{"llama", "f32", 1},
                                           checkpoint_case{"mistral", "f32", 1},
                                           checkpoint_case{"qwen2", "bf16", 1},
                                           checkpoint_case{"qwen3", "bf16", 2}),
                         [](const auto& info) { return info.param.arch; });

// Imported, exported, imported again: the same config and the same tensors, bit for bit, in
// f32, and in bf16 too for a bf16 checkpoint (its values are bf16's; an f32 one's would round).
TEST(HfExport, ImportExportImportGivesIdenticalTensors) {
  for (const auto& [arch, dtype] :
       {std::pair{"llama", "f32"}, {"qwen3", "bf16"}, {"qwen2", "bf16"}}) {
    troupe::testing::temp_dir dir;
    const std::string model = dir.file("model");
    ASSERT_NO_FATAL_FAILURE(run_python({"make", arch, model, "--dtype", dtype, "--shards", "2"}));
    auto config = load_hf_config(model);
    ASSERT_TRUE(config.ok()) << config.status();
    auto weights = read_hf_weights(model, *config);
    ASSERT_TRUE(weights.ok()) << weights.status();
    std::vector<tensor::dtype> exports = {tensor::dtype::f32};
    if (std::string(dtype) == "bf16") exports.push_back(tensor::dtype::bf16);
    for (const tensor::dtype out_type : exports) {
      const std::string out = dir.file(tensor::dtype_name(out_type));
      ASSERT_TRUE(write_hf_model(out, *config, *weights, out_type).ok());
      auto again_config = load_hf_config(out);
      ASSERT_TRUE(again_config.ok()) << again_config.status();
      EXPECT_EQ(to_hf_config_json(*again_config).dump(),
                to_hf_config_json(
                    {config->architecture, config->model,
                     tensor::dtype_name(out_type) == std::string("bf16") ? "bfloat16" : "float32",
                     config->eos_token_ids, config->bos_token_id})
                    .dump())
          << arch;
      auto again = read_hf_weights(out, *again_config);
      ASSERT_TRUE(again.ok()) << again.status();
      ASSERT_EQ(again->tensors.size(), weights->tensors.size());
      for (size_t i = 0; i < weights->tensors.size(); ++i) {
        const auto& [name, t] = weights->tensors[i];
        ASSERT_EQ(again->tensors[i].first, name);
        EXPECT_EQ(std::memcmp(again->tensors[i].second.raw(), t.raw(), t.nbytes()), 0)
            << arch << " " << name;
      }
    }
  }
}

TEST(HfExport, RefusesWeightsThatDoNotFitTheConfig) {
  troupe::testing::temp_dir dir;
  const std::string model = dir.file("model");
  ASSERT_NO_FATAL_FAILURE(run_python({"make", "mistral", model}));
  auto config = load_hf_config(model);
  ASSERT_TRUE(config.ok());
  auto weights = read_hf_weights(model, *config);
  ASSERT_TRUE(weights.ok());
  weights->tensors.pop_back();
  const absl::Status s = write_hf_model(dir.file("out"), *config, *weights);
  EXPECT_NE(s.message().find("tensors, not"), std::string::npos) << s;
}

}  // namespace
}  // namespace troupe::models
