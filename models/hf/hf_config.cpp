#include "models/hf/hf_config.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.hpp"

namespace troupe::models {

namespace {

using nlohmann::json;

absl::Status bad(const std::string& where, absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, ": ", what));
}

// A whole number at `key`: required, or `fallback` when absent or null and fallback >= 0.
absl::StatusOr<int64_t> count_of(const json& j, const char* key, const std::string& where,
                                 int64_t fallback = -1) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback >= 0) return fallback;
    return bad(where, key, "is missing");
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1) {
    return bad(where, key, absl::StrCat(it->dump(), " is not a positive whole number"));
  }
  return it->get<int64_t>();
}

// A count that must also fit troupe's int sizes.
absl::StatusOr<int> size_of(const json& j, const char* key, const std::string& where,
                            int64_t fallback = -1) {
  TROUPE_ASSIGN_OR_RETURN(const int64_t v, count_of(j, key, where, fallback));
  if (v > (int64_t{1} << 30)) return bad(where, key, absl::StrCat(v, " is too large"));
  return static_cast<int>(v);
}

absl::StatusOr<double> real_of(const json& j, const char* key, const std::string& where,
                               double fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number() || it->get<double>() <= 0) {
    return bad(where, key, absl::StrCat(it->dump(), " is not a positive number"));
  }
  return it->get<double>();
}

absl::StatusOr<bool> flag_of(const json& j, const char* key, const std::string& where,
                             bool fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return bad(where, key, absl::StrCat(it->dump(), " is not true or false"));
  return it->get<bool>();
}

// eos_token_id: a number or a list of them.
absl::Status add_token_ids(const json& j, const char* key, const std::string& where,
                           std::vector<int32_t>& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  const json list = it->is_array() ? *it : json::array({*it});
  for (const auto& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return bad(where, key, absl::StrCat(it->dump(), " is not a token id or a list of them"));
    }
    const auto v = static_cast<int32_t>(id.get<int64_t>());
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return absl::OkStatus();
}

absl::Status read_rope_scaling(const json& j, const std::string& where, rope_scaling& out) {
  const auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return bad(where, "rope_scaling", "must be an object or null");
  // transformers reads "rope_type", and "type" in older files.
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (it->contains(key) && (*it)[key].is_string()) {
      type = (*it)[key].get<std::string>();
      break;
    }
  }
  if (type == "default") return absl::OkStatus();
  if (type != "linear" && type != "llama3") {
    return bad(where, "rope_scaling",
               absl::StrCat("'", type.empty() ? it->dump() : type,
                            "' is not supported; troupe reads linear and llama3 (or null)"));
  }
  const std::string at = where + ": rope_scaling";
  TROUPE_ASSIGN_OR_RETURN(out.factor, real_of(*it, "factor", at, -1));
  if (out.factor < 0) return bad(where, "rope_scaling.factor", "is missing");
  out.type = type == "linear" ? rope_scaling::kind::linear : rope_scaling::kind::llama3;
  if (out.type == rope_scaling::kind::llama3) {
    TROUPE_ASSIGN_OR_RETURN(out.low_freq_factor, real_of(*it, "low_freq_factor", at, 1.0));
    TROUPE_ASSIGN_OR_RETURN(out.high_freq_factor, real_of(*it, "high_freq_factor", at, 4.0));
    TROUPE_ASSIGN_OR_RETURN(out.original_max_position_embeddings,
                            size_of(*it, "original_max_position_embeddings", at, 8192));
    if (out.high_freq_factor <= out.low_freq_factor) {
      return bad(where, "rope_scaling", "high_freq_factor must exceed low_freq_factor");
    }
  }
  return absl::OkStatus();
}

absl::Status read_gpt2(const json& j, const std::string& where, decoder_config& c) {
  c.family = decoder_family::gpt2;
  TROUPE_ASSIGN_OR_RETURN(c.vocab, size_of(j, "vocab_size", where));
  TROUPE_ASSIGN_OR_RETURN(c.dim, size_of(j, "n_embd", where));
  TROUPE_ASSIGN_OR_RETURN(c.layers, size_of(j, "n_layer", where));
  TROUPE_ASSIGN_OR_RETURN(c.heads, size_of(j, "n_head", where));
  TROUPE_ASSIGN_OR_RETURN(c.ctx, size_of(j, "n_positions", where));
  TROUPE_ASSIGN_OR_RETURN(const int inner, size_of(j, "n_inner", where, int64_t{4} * c.dim));
  TROUPE_ASSIGN_OR_RETURN(const double eps, real_of(j, "layer_norm_epsilon", where, 1e-5));
  TROUPE_ASSIGN_OR_RETURN(c.tied_embeddings, flag_of(j, "tie_word_embeddings", where, true));
  // troupe's GPT-2 is GPT-2 itself: what differs from it is refused, not approximated.
  if (inner != 4 * c.dim) {
    return bad(where, "n_inner", absl::StrCat(inner, " is not 4 n_embd (", 4 * c.dim, ")"));
  }
  if (eps != 1e-5) return bad(where, "layer_norm_epsilon", absl::StrCat(eps, " is not 1e-05"));
  if (!c.tied_embeddings)
    return bad(where, "tie_word_embeddings", "false is not supported for GPT-2");
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    return bad(where, "activation_function",
               absl::StrCat("'", act, "' is not supported; troupe's GPT-2 uses gelu_new"));
  }
  if (c.dim % c.heads != 0) {
    return bad(where, "n_head", absl::StrCat(c.heads, " does not divide n_embd (", c.dim, ")"));
  }
  return absl::OkStatus();
}

absl::Status read_llama(const json& j, const std::string& where, const std::string& arch,
                        decoder_config& c) {
  c.family = decoder_family::llama;
  TROUPE_ASSIGN_OR_RETURN(c.vocab, size_of(j, "vocab_size", where));
  TROUPE_ASSIGN_OR_RETURN(c.dim, size_of(j, "hidden_size", where));
  TROUPE_ASSIGN_OR_RETURN(c.ffn, size_of(j, "intermediate_size", where));
  TROUPE_ASSIGN_OR_RETURN(c.layers, size_of(j, "num_hidden_layers", where));
  TROUPE_ASSIGN_OR_RETURN(c.heads, size_of(j, "num_attention_heads", where));
  TROUPE_ASSIGN_OR_RETURN(c.kv_heads, size_of(j, "num_key_value_heads", where, c.heads));
  TROUPE_ASSIGN_OR_RETURN(c.ctx, size_of(j, "max_position_embeddings", where));
  TROUPE_ASSIGN_OR_RETURN(const double eps, real_of(j, "rms_norm_eps", where, 1e-6));
  c.norm_eps = static_cast<float>(eps);
  TROUPE_ASSIGN_OR_RETURN(c.rope_theta, real_of(j, "rope_theta", where, 10000.0));
  TROUPE_ASSIGN_OR_RETURN(c.tied_embeddings, flag_of(j, "tie_word_embeddings", where, false));
  if (c.heads % c.kv_heads != 0) {
    return bad(where, "num_key_value_heads",
               absl::StrCat(c.kv_heads, " does not divide num_attention_heads (", c.heads, ")"));
  }
  const bool explicit_head_dim = j.contains("head_dim") && !j["head_dim"].is_null();
  if (!explicit_head_dim && c.dim % c.heads != 0) {
    return bad(where, "num_attention_heads",
               absl::StrCat(c.heads, " does not divide hidden_size (", c.dim,
                            ") and no head_dim is given"));
  }
  TROUPE_ASSIGN_OR_RETURN(c.head_dim, size_of(j, "head_dim", where, c.dim / c.heads));
  if (c.head_dim % 2 != 0) {
    return bad(where, "head_dim", absl::StrCat(c.head_dim, " is odd; RoPE rotates pairs"));
  }
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") {
    return bad(where, "hidden_act",
               absl::StrCat("'", act, "' is not supported; troupe reads silu"));
  }
  TROUPE_ASSIGN_OR_RETURN(const bool mlp_bias, flag_of(j, "mlp_bias", where, false));
  if (mlp_bias)
    return bad(where, "mlp_bias", "true is not supported (no Llama-family model uses it)");
  TROUPE_RETURN_IF_ERROR(read_rope_scaling(j, where, c.rope));
  // Qwen 2's projections of queries, keys and values always have biases; Llama's and
  // Qwen 3's all four do when attention_bias says so.
  if (arch == "Qwen2ForCausalLM") {
    c.qkv_bias = true;
  } else {
    TROUPE_ASSIGN_OR_RETURN(c.qkv_bias, flag_of(j, "attention_bias", where, false));
    c.o_bias = c.qkv_bias;
  }
  c.qk_norm = arch == "Qwen3ForCausalLM";
  // A sliding window the attention would ignore changes what the model computes past it.
  const auto window = j.find("sliding_window");
  TROUPE_ASSIGN_OR_RETURN(const bool use_window, flag_of(j, "use_sliding_window", where, true));
  if (use_window && window != j.end() && !window->is_null()) {
    if (!window->is_number_integer() || window->get<int64_t>() < 1) {
      return bad(where, "sliding_window",
                 absl::StrCat(window->dump(), " is not a positive whole number"));
    }
    if (window->get<int64_t>() < c.ctx) {
      return bad(where, "sliding_window",
                 absl::StrCat(window->get<int64_t>(), " is below max_position_embeddings (", c.ctx,
                              "); troupe's attention has no sliding window: set sliding_window "
                              "to null, or max_position_embeddings to at most ",
                              window->get<int64_t>()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object"));
  }
  return j;
}

// quantization_config: GPTQ's (bits 4 or 8, groups along the inputs in order), else refused by
// what it is.
absl::StatusOr<gptq_quantization> read_quantization(const json& q, const std::string& where) {
  const std::string key = "quantization_config";
  if (!q.is_object()) return bad(where, key, "is not an object");
  const std::string method = q.value("quant_method", std::string());
  if (method != "gptq") {
    return bad(where, key + ".quant_method",
               absl::StrCat("'", method,
                            "' is not supported; troupe reads GPTQ checkpoints (gptq), or "
                            "quantizes an unquantized model itself (serve.engine.quantization)"));
  }
  gptq_quantization out;
  const auto bits = q.find("bits");
  if (bits == q.end() || !bits->is_number_integer() ||
      (bits->get<int>() != 4 && bits->get<int>() != 8)) {
    return bad(where, key + ".bits",
               absl::StrCat(bits == q.end() ? "is missing" : bits->dump(),
                            ": troupe reads 4- and 8-bit GPTQ weights"));
  }
  out.bits = bits->get<int>();
  const auto group = q.find("group_size");
  if (group != q.end() && !group->is_null()) {
    if (!group->is_number_integer() || (group->get<int>() < 1 && group->get<int>() != -1)) {
      return bad(where, key + ".group_size",
                 absl::StrCat(group->dump(), " is not a positive whole number or -1"));
    }
    out.group_size = std::max(0, group->get<int>());
  }
  TROUPE_ASSIGN_OR_RETURN(const bool desc_act, flag_of(q, "desc_act", where, false));
  if (desc_act) {
    return bad(where, key + ".desc_act",
               "true (act-order groups, g_idx not in order) is not supported; troupe reads "
               "GPTQ checkpoints quantized with desc_act false");
  }
  const std::string format = q.value("checkpoint_format", std::string("gptq"));
  if (format != "gptq" && format != "gptq_v2") {
    return bad(where, key + ".checkpoint_format",
               absl::StrCat("'", format, "' is not supported; troupe reads gptq and gptq_v2"));
  }
  out.zeros_minus_one = format == "gptq";
  TROUPE_ASSIGN_OR_RETURN(out.symmetric, flag_of(q, "sym", where, true));
  return out;
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> names = {"GPT2LMHeadModel", "LlamaForCausalLM",
                                                 "MistralForCausalLM", "Qwen2ForCausalLM",
                                                 "Qwen3ForCausalLM"};
  return names;
}

absl::StatusOr<hf_model_config> parse_hf_config(const json& j, const std::string& where) {
  if (!j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a JSON object"));
  const auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string()) {
    return bad(where, "architectures",
               absl::StrCat("must name one architecture (one of ",
                            absl::StrJoin(supported_architectures(), ", "), ")"));
  }
  hf_model_config c;
  c.architecture = (*archs)[0].get<std::string>();
  const auto& known = supported_architectures();
  if (std::find(known.begin(), known.end(), c.architecture) == known.end()) {
    return bad(where, "architectures",
               absl::StrCat("'", c.architecture, "' is not supported; troupe reads ",
                            absl::StrJoin(known, ", ")));
  }
  if (c.architecture == "GPT2LMHeadModel") {
    TROUPE_RETURN_IF_ERROR(read_gpt2(j, where, c.model));
  } else {
    TROUPE_RETURN_IF_ERROR(read_llama(j, where, c.architecture, c.model));
  }
  if (const absl::Status valid = c.model.validate(); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", valid.message()));
  }
  c.torch_dtype = j.value("torch_dtype", std::string());
  if (const auto q = j.find("quantization_config"); q != j.end() && !q->is_null()) {
    if (c.model.family == decoder_family::gpt2) {
      return bad(where, "quantization_config",
                 "a quantized GPT-2 is not supported; troupe reads GPTQ checkpoints of the "
                 "Llama family");
    }
    TROUPE_ASSIGN_OR_RETURN(c.quantization, read_quantization(*q, where));
  }
  TROUPE_RETURN_IF_ERROR(add_token_ids(j, "eos_token_id", where, c.eos_token_ids));
  std::vector<int32_t> bos;
  TROUPE_RETURN_IF_ERROR(add_token_ids(j, "bos_token_id", where, bos));
  if (!bos.empty()) c.bos_token_id = bos.front();
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.model.vocab) {
      return bad(where, "eos_token_id",
                 absl::StrCat(id, " is outside vocab_size (", c.model.vocab, ")"));
    }
  }
  return c;
}

absl::StatusOr<hf_model_config> load_hf_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat(model_dir,
                                            " has no config.json: it is not a Hugging "
                                            "Face model directory"));
  }
  TROUPE_ASSIGN_OR_RETURN(const json config, read_json(path));
  TROUPE_ASSIGN_OR_RETURN(hf_model_config c, parse_hf_config(config, path));
  const std::string generation = model_dir + "/generation_config.json";
  if (std::filesystem::exists(generation)) {
    TROUPE_ASSIGN_OR_RETURN(const json g, read_json(generation));
    TROUPE_RETURN_IF_ERROR(add_token_ids(g, "eos_token_id", generation, c.eos_token_ids));
    for (int32_t id : c.eos_token_ids) {
      if (id >= c.model.vocab) {
        return bad(generation, "eos_token_id",
                   absl::StrCat(id, " is outside config.json's vocab_size (", c.model.vocab, ")"));
      }
    }
  }
  return c;
}

std::string hf_architecture_of(const decoder_config& c) {
  if (c.family == decoder_family::gpt2) return "GPT2LMHeadModel";
  if (c.qk_norm) return "Qwen3ForCausalLM";
  if (c.qkv_bias && !c.o_bias) return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

std::string model_type_of(const std::string& architecture) {
  if (architecture == "GPT2LMHeadModel") return "gpt2";
  if (architecture == "MistralForCausalLM") return "mistral";
  if (architecture == "Qwen2ForCausalLM") return "qwen2";
  if (architecture == "Qwen3ForCausalLM") return "qwen3";
  return "llama";
}

json to_hf_config_json(const hf_model_config& hf) {
  const decoder_config& c = hf.model;
  json j = {{"architectures", {hf.architecture}},
            {"model_type", model_type_of(hf.architecture)},
            {"vocab_size", c.vocab}};
  if (c.family == decoder_family::gpt2) {
    j.update({{"n_positions", c.ctx},
              {"n_ctx", c.ctx},
              {"n_embd", c.dim},
              {"n_layer", c.layers},
              {"n_head", c.heads},
              {"n_inner", nullptr},
              {"activation_function", "gelu_new"},
              {"layer_norm_epsilon", 1e-5},
              {"tie_word_embeddings", true}});
  } else {
    j.update({{"hidden_size", c.dim},
              {"intermediate_size", c.ffn_width()},
              {"num_hidden_layers", c.layers},
              {"num_attention_heads", c.heads},
              {"num_key_value_heads", c.kv_head_count()},
              {"head_dim", c.head_size()},
              {"max_position_embeddings", c.ctx},
              // The float's shortest decimal (1e-05, not 9.99999974e-06), as config.json says it.
              {"rms_norm_eps", std::stod(absl::StrCat(c.norm_eps))},
              {"rope_theta", c.rope_theta},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", c.tied_embeddings}});
    if (c.rope.type == rope_scaling::kind::none) {
      j["rope_scaling"] = nullptr;
    } else if (c.rope.type == rope_scaling::kind::linear) {
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope.factor}};
    } else {
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", c.rope.factor},
          {"low_freq_factor", c.rope.low_freq_factor},
          {"high_freq_factor", c.rope.high_freq_factor},
          {"original_max_position_embeddings", c.rope.original_max_position_embeddings}};
    }
    // Qwen 2's q/k/v biases are implied by its architecture; the others say attention_bias.
    if (hf.architecture != "Qwen2ForCausalLM") j["attention_bias"] = c.qkv_bias;
    j["sliding_window"] = nullptr;
    if (hf.architecture == "Qwen2ForCausalLM" || hf.architecture == "Qwen3ForCausalLM") {
      j["use_sliding_window"] = false;
    }
  }
  j["torch_dtype"] = hf.torch_dtype.empty() ? "float32" : hf.torch_dtype;
  if (hf.quantization) {
    j["quantization_config"] = {
        {"quant_method", "gptq"},
        {"bits", hf.quantization->bits},
        {"group_size", hf.quantization->group_size > 0 ? hf.quantization->group_size : -1},
        {"desc_act", false},
        {"sym", hf.quantization->symmetric},
        {"checkpoint_format", hf.quantization->zeros_minus_one ? "gptq" : "gptq_v2"}};
  }
  if (hf.bos_token_id >= 0) j["bos_token_id"] = hf.bos_token_id;
  if (hf.eos_token_ids.size() == 1) {
    j["eos_token_id"] = hf.eos_token_ids[0];
  } else if (!hf.eos_token_ids.empty()) {
    j["eos_token_id"] = hf.eos_token_ids;
  }
  return j;
}

}  // namespace troupe::models
