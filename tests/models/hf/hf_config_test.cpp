#include "models/hf/hf_config.hpp"

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

using nlohmann::json;

// A small Qwen 3 config.json as transformers writes one.
json qwen3() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"vocab_size", 151936},
          {"hidden_size", 64},
          {"intermediate_size", 160},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 32},
          {"max_position_embeddings", 4096},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"hidden_act", "silu"},
          {"sliding_window", nullptr},
          {"use_sliding_window", false},
          {"tie_word_embeddings", true},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 151643},
          {"eos_token_id", 151645}};
}

std::string refusal(const json& j) {
  const auto c = parse_hf_config(j, "m/config.json");
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(HfConfig, ReadsQwen3) {
  const auto c = parse_hf_config(qwen3(), "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.family, decoder_family::llama);
  EXPECT_EQ(c->model.head_dim, 32);  // explicit: 4 heads x 32 = 128, not hidden_size
  EXPECT_EQ(c->model.kv_heads, 2);
  EXPECT_TRUE(c->model.qk_norm);
  EXPECT_FALSE(c->model.qkv_bias);
  EXPECT_TRUE(c->model.tied_embeddings);
  EXPECT_EQ(c->model.rope_theta, 1e6);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{151645});
}

TEST(HfConfig, ReadsEachFamilysConventions) {
  json llama = qwen3();
  llama["architectures"] = {"LlamaForCausalLM"};
  llama.erase("head_dim");
  llama["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192}};
  llama["eos_token_id"] = {128001, 128008, 128009};
  auto c = parse_hf_config(llama, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.head_dim, 16);  // hidden_size / heads
  EXPECT_FALSE(c->model.qk_norm);
  EXPECT_EQ(c->model.rope.type, rope_scaling::kind::llama3);
  EXPECT_EQ(c->model.rope.factor, 8.0);
  EXPECT_EQ(c->eos_token_ids.size(), 3u);

  json qwen2 = llama;
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2["rope_scaling"] = nullptr;
  qwen2["sliding_window"] = 32;  // ignored: use_sliding_window is false
  c = parse_hf_config(qwen2, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->model.qkv_bias);
  EXPECT_FALSE(c->model.o_bias);

  const json gpt2 = {{"architectures", {"GPT2LMHeadModel"}},
                     {"vocab_size", 256},
                     {"n_embd", 64},
                     {"n_layer", 2},
                     {"n_head", 4},
                     {"n_positions", 128}};
  c = parse_hf_config(gpt2, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.family, decoder_family::gpt2);
  EXPECT_EQ(c->model.ffn_width(), 256);
  EXPECT_TRUE(c->model.tied_embeddings);
  EXPECT_EQ(c->model.head_size(), 16);
}

TEST(HfConfig, RefusesWhatTheFamilyCannotHonourByKeyAndValue) {
  json j = qwen3();
  j["architectures"] = {"GemmaForCausalLM"};
  EXPECT_EQ(refusal(j),
            "m/config.json: architectures: 'GemmaForCausalLM' is not supported; troupe reads "
            "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
            "Qwen3ForCausalLM");
  j = qwen3();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(refusal(j),
            "m/config.json: rope_scaling: 'yarn' is not supported; troupe reads linear and llama3 "
            "(or null)");
  j = qwen3();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 1024;
  j.erase("use_sliding_window");
  EXPECT_EQ(refusal(j),
            "m/config.json: sliding_window: 1024 is below max_position_embeddings (4096); troupe's "
            "attention has no sliding window: set sliding_window to null, or "
            "max_position_embeddings to at most 1024");
  j = qwen3();
  j["num_key_value_heads"] = 3;
  EXPECT_EQ(refusal(j),
            "m/config.json: num_key_value_heads: 3 does not divide num_attention_heads (4)");
  j = qwen3();
  j["hidden_act"] = "gelu";
  EXPECT_NE(refusal(j).find("hidden_act: 'gelu' is not supported"), std::string::npos);
  j = qwen3();
  j.erase("hidden_size");
  EXPECT_EQ(refusal(j), "m/config.json: hidden_size: is missing");
  j = qwen3();
  j["eos_token_id"] = 999999;
  EXPECT_NE(refusal(j).find("eos_token_id: 999999 is outside vocab_size"), std::string::npos);
}

// GPTQ's quantization_config: read (and written back by to_hf_config_json), and what troupe
// cannot honour refused by key and value.
TEST(HfConfig, ReadsGptqQuantizationAndRefusesOtherMethods) {
  json j = qwen3();
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4},   {"group_size", 128},
                              {"desc_act", false},      {"sym", true}, {"damp_percent", 0.01}};
  auto c = parse_hf_config(j, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->quantization.has_value());
  EXPECT_EQ(c->quantization->bits, 4);
  EXPECT_EQ(c->quantization->group_size, 128);
  EXPECT_TRUE(c->quantization->zeros_minus_one);
  const json again = to_hf_config_json(*c);
  EXPECT_EQ(again["quantization_config"]["group_size"], 128);
  EXPECT_EQ(parse_hf_config(again, "again")->quantization->bits, 4);

  j["quantization_config"]["group_size"] = -1;
  j["quantization_config"]["checkpoint_format"] = "gptq_v2";
  c = parse_hf_config(j, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quantization->group_size, 0);  // one scale per output channel
  EXPECT_FALSE(c->quantization->zeros_minus_one);

  const auto refused = [&](const char* key, const json& value) {
    json bad = j;
    bad["quantization_config"][key] = value;
    return refusal(bad);
  };
  EXPECT_NE(refused("quant_method", "awq")
                .find("quantization_config.quant_method: 'awq' is not "
                      "supported; troupe reads GPTQ checkpoints"),
            std::string::npos);
  EXPECT_NE(refused("bits", 3).find("quantization_config.bits: 3: troupe reads 4- and 8-bit"),
            std::string::npos);
  EXPECT_NE(refused("desc_act", true).find("quantization_config.desc_act: true (act-order"),
            std::string::npos);
  EXPECT_NE(refused("checkpoint_format", "marlin").find("'marlin' is not supported"),
            std::string::npos);
}

TEST(HfConfig, GenerationConfigAddsItsStopTokens) {
  testing::temp_dir dir;
  dir.write("config.json", qwen3().dump());
  dir.write("generation_config.json",
            R"({"eos_token_id": [151645, 151643], "bos_token_id": 151643})");
  const auto c = load_hf_config(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  testing::temp_dir empty;
  EXPECT_EQ(load_hf_config(empty.path().string()).status().code(), absl::StatusCode::kNotFound);
  dir.write("generation_config.json", "{not json");
  EXPECT_NE(load_hf_config(dir.path().string()).status().message().find("is not a JSON object"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::models
