// `troupe export` on a run directory holding pretraining checkpoints, checked by reading the
// output back, and independently by a Python reader that knows only the safetensors format.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "models/decoder/decoder_layout.hpp"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const models::decoder_config config{256, 64, 2, 32, 4};

// Saves a checkpoint of a model initialised with `seed` at `step` under run_dir/checkpoints.
void save(const std::string& run_dir, int64_t step, uint64_t seed) {
  models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), seed);
  checkpoint::checkpoint_store store((fs::path(run_dir) / "checkpoints").string());
  auto file = store.stage(step, "model.safetensors", layout.to_named(params.data()));
  ASSERT_TRUE(file.ok()) << file.status();
  const nlohmann::json meta = {{"model",
                                {{"vocab", config.vocab},
                                 {"ctx", config.ctx},
                                 {"layers", config.layers},
                                 {"dim", config.dim},
                                 {"heads", config.heads}}}};
  ASSERT_TRUE(store.commit(step, {*file}, meta, 3).ok());
}

TEST(ExportCommand, WritesHuggingFaceWeightsAndConfig) {
  testing::temp_dir dir;
  const std::string run = dir.file("run"), out = dir.file("export");
  save(run, 10, 1);
  save(run, 20, 2);
  // The newest checkpoint is damaged: export uses step 10 and says so.
  fs::resize_file(fs::path(run) / "checkpoints/step-20/model.safetensors", 100);
  const auto result =
      testing::run({TROUPE_BINARY, "export", run, "--format", "safetensors", "--out", out}, 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("skipping checkpoint step 20"), std::string::npos) << result.err;
  const auto summary = nlohmann::json::parse(result.out);
  EXPECT_EQ(summary["step"], 10);

  std::ifstream config_file(fs::path(out) / "config.json");
  const auto hf = nlohmann::json::parse(config_file);
  EXPECT_EQ(hf["model_type"], "gpt2");
  EXPECT_EQ(hf["n_embd"], 32);
  EXPECT_EQ(hf["n_layer"], 2);
  EXPECT_EQ(hf["n_head"], 4);
  EXPECT_EQ(hf["n_positions"], 64);
  EXPECT_EQ(hf["vocab_size"], 256);

  // The weights are step 10's, under GPT-2's names and shapes.
  models::decoder_layout layout(config, models::layer_range::all(config));
  auto weights = tensor::read_safetensors((fs::path(out) / "model.safetensors").string());
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<float> got(layout.total()), want(layout.total());
  ASSERT_TRUE(layout.from_named(*weights, got.data()).ok());
  layout.initialize(want.data(), 1);
  EXPECT_EQ(got, want);
  EXPECT_EQ(weights->metadata.at("format"), "pt");

  // A reader written from the format alone agrees on names, dtypes and shapes.
  const std::string script = R"(
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + n])
meta = header.pop('__metadata__')
assert meta['format'] == 'pt'
assert header['h.1.attn.c_attn.weight']['shape'] == [32, 96], header['h.1.attn.c_attn.weight']
assert header['wte.weight']['shape'] == [256, 32]
assert all(v['dtype'] == 'F32' for v in header.values())
end = max(v['data_offsets'][1] for v in header.values())
assert 8 + n + end == len(data)
print(len(header))
)";
  const std::string script_path = dir.write("read.py", script);
  const auto py = testing::run(
      {"/usr/bin/python3", script_path, (fs::path(out) / "model.safetensors").string()}, 60s);
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(std::stoi(py.out), static_cast<int>(layout.slots().size()));
}

TEST(ExportCommand, RefusesWhatItCannotExport) {
  testing::temp_dir dir;
  auto none = testing::run({TROUPE_BINARY, "export", dir.file("empty"), "--out", dir.file("o")});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no readable checkpoint"), std::string::npos) << none.err;
  auto format = testing::run(
      {TROUPE_BINARY, "export", dir.file("empty"), "--format", "onnx", "--out", dir.file("o")});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_NE(format.err.find("--format safetensors"), std::string::npos);
  // A checkpoint without the model shape is not a pretraining checkpoint.
  checkpoint::checkpoint_store store(dir.file("other/checkpoints"));
  auto file = store.stage(1, "model.safetensors", {});
  ASSERT_TRUE(store.commit(1, {*file}, nlohmann::json::object(), 1).ok());
  auto shapeless =
      testing::run({TROUPE_BINARY, "export", dir.file("other"), "--out", dir.file("o")});
  EXPECT_EQ(shapeless.exit_code, 1);
  EXPECT_NE(shapeless.err.find("meta.model.vocab"), std::string::npos) << shapeless.err;
}

}  // namespace
}  // namespace troupe
