#include "models/hf/hf_weights.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/hf/gptq_weights.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/mapped_safetensors.hpp"

namespace troupe::models {

namespace {

namespace fs = std::filesystem;

// The config values a spec's shape comes from, for the message about a misshapen tensor.
std::string shape_origin(const decoder_config& c) {
  return absl::StrCat("vocab_size ", c.vocab, ", hidden_size ", c.dim, ", intermediate_size ",
                      c.ffn_width(), ", heads ", c.heads, ", key/value heads ", c.kv_head_count(),
                      ", head_dim ", c.head_size());
}

// Checkpoint entries that are buffers, not weights.
bool is_buffer(const std::string& name) {
  return absl::EndsWith(name, ".attn.bias") || absl::EndsWith(name, ".attn.masked_bias") ||
         absl::EndsWith(name, ".rotary_emb.inv_freq");
}

// GPT2LMHeadModel's checkpoints name the trunk "transformer.*"; troupe's specs name it as
// GPT2Model does.
std::string canonical_name(const decoder_config& c, const std::string& name) {
  if (c.family == decoder_family::gpt2 && absl::StartsWith(name, "transformer.")) {
    return name.substr(std::string("transformer.").size());
  }
  return name;
}

absl::StatusOr<nlohmann::json> read_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object()) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a safetensors index (a JSON object with a weight_map)"));
  }
  return j;
}

}  // namespace

std::vector<hf_tensor_spec> hf_tensor_specs(const decoder_config& c) {
  std::vector<hf_tensor_spec> out;
  const int64_t C = c.dim, F = c.ffn_width(), V = c.vocab;
  if (c.family == decoder_family::gpt2) {
    out.push_back({"wte.weight", {V, C}});
    out.push_back({"wpe.weight", {c.ctx, C}});
    for (int64_t l = 0; l < c.layers; ++l) {
      const std::string p = absl::StrCat("h.", l, ".");
      out.push_back({p + "ln_1.weight", {C}});
      out.push_back({p + "ln_1.bias", {C}});
      out.push_back({p + "attn.c_attn.weight", {C, 3 * C}});
      out.push_back({p + "attn.c_attn.bias", {3 * C}});
      out.push_back({p + "attn.c_proj.weight", {C, C}});
      out.push_back({p + "attn.c_proj.bias", {C}});
      out.push_back({p + "ln_2.weight", {C}});
      out.push_back({p + "ln_2.bias", {C}});
      out.push_back({p + "mlp.c_fc.weight", {C, F}});
      out.push_back({p + "mlp.c_fc.bias", {F}});
      out.push_back({p + "mlp.c_proj.weight", {F, C}});
      out.push_back({p + "mlp.c_proj.bias", {C}});
    }
    out.push_back({"ln_f.weight", {C}});
    out.push_back({"ln_f.bias", {C}});
    if (!c.tied_embeddings) out.push_back({"lm_head.weight", {V, C}});
    return out;
  }
  const int64_t Q = c.q_width(), KV = c.kv_width(), D = c.head_size();
  out.push_back({"model.embed_tokens.weight", {V, C}});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.push_back({p + "input_layernorm.weight", {C}});
    out.push_back({p + "self_attn.q_proj.weight", {Q, C}});
    if (c.qkv_bias) out.push_back({p + "self_attn.q_proj.bias", {Q}});
    out.push_back({p + "self_attn.k_proj.weight", {KV, C}});
    if (c.qkv_bias) out.push_back({p + "self_attn.k_proj.bias", {KV}});
    out.push_back({p + "self_attn.v_proj.weight", {KV, C}});
    if (c.qkv_bias) out.push_back({p + "self_attn.v_proj.bias", {KV}});
    out.push_back({p + "self_attn.o_proj.weight", {C, Q}});
    if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {C}});
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {D}});
      out.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {C}});
    out.push_back({p + "mlp.gate_proj.weight", {F, C}});
    out.push_back({p + "mlp.up_proj.weight", {F, C}});
    out.push_back({p + "mlp.down_proj.weight", {C, F}});
  }
  out.push_back({"model.norm.weight", {C}});
  if (!c.tied_embeddings) out.push_back({"lm_head.weight", {V, C}});
  return out;
}

namespace {}  // namespace

absl::Status walk_hf_tensors(const std::string& model_dir, const hf_model_config& hf,
                             const std::vector<hf_tensor_spec>& specs,
                             const hf_tensor_taker& take) {
  const decoder_config& config = hf.model;
  // Which files to read: the index's shards, or the one file.
  const std::string single = model_dir + "/model.safetensors";
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  absl::flat_hash_map<std::string, std::string> indexed;  // tensor → file, from the index
  if (fs::exists(index_path)) {
    TROUPE_ASSIGN_OR_RETURN(const nlohmann::json index, read_index(index_path));
    std::map<std::string, bool> seen;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
        return absl::DataLossError(absl::StrCat(index_path, ": weight_map['", name,
                                                "'] must be a file name in the directory"));
      }
      indexed[canonical_name(config, name)] = file.get<std::string>();
      if (!seen[file.get<std::string>()]) files.push_back(file.get<std::string>());
      seen[file.get<std::string>()] = true;
    }
  } else if (fs::exists(single)) {
    files.push_back("model.safetensors");
  } else {
    return absl::NotFoundError(absl::StrCat(
        model_dir,
        " has neither model.safetensors nor model.safetensors.index.json (troupe "
        "reads safetensors checkpoints; a pytorch_model.bin must be converted first)"));
  }

  absl::flat_hash_map<std::string, size_t> wanted;
  for (size_t i = 0; i < specs.size(); ++i)
    wanted[specs[i].name] = i;
  std::vector<bool> have(specs.size(), false);
  for (const std::string& file : files) {
    const std::string path = model_dir + "/" + file;
    if (!fs::exists(path)) {
      return absl::NotFoundError(
          absl::StrCat(index_path, " names the shard '", file, "', which is not in ", model_dir));
    }
    TROUPE_ASSIGN_OR_RETURN(tensor::mapped_safetensors mapped,
                            tensor::mapped_safetensors::open(path));
    for (const auto& e : mapped.entries()) {
      const std::string name = canonical_name(config, e.name);
      if (is_buffer(name)) continue;
      const auto it = wanted.find(name);
      if (it == wanted.end()) {
        if (name == "lm_head.weight" && config.tied_embeddings) continue;  // the tied copy
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor '", e.name, "' is not part of a ", hf.architecture,
            " with this config.json (do the config and the weights belong together?)"));
      }
      const hf_tensor_spec& spec = specs[it->second];
      if (e.shape != spec.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", e.name, "' is ", tensor::shape_string(e.shape),
                         " but config.json (", shape_origin(config), ") needs ",
                         tensor::shape_string(spec.shape)));
      }
      if (have[it->second]) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", e.name, "' is in more than one file"));
      }
      if (absl::Status s = take(it->second, e); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
      }
      have[it->second] = true;
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!have[i]) {
      const auto at = indexed.find(specs[i].name);
      return absl::InvalidArgumentError(absl::StrCat(
          model_dir, ": tensor '", specs[i].name, "' is missing",
          at != indexed.end() ? absl::StrCat(" from ", at->second, ", where the index puts it")
                              : absl::StrCat(" (config.json says ", config.layers, " layers of a ",
                                             hf.architecture, ")")));
    }
  }
  return absl::OkStatus();
}

namespace {

// A GPTQ checkpoint's weights are integers that only serving reads.
absl::Status refuse_quantized(const std::string& model_dir, const hf_model_config& hf) {
  if (!hf.quantization) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      model_dir, " is a GPTQ checkpoint (int", hf.quantization->bits,
      "): troupe serves it (troupe serve DIR) but trains, fine-tunes and exports from unquantized "
      "weights (F32, BF16 or F16)"));
}

}  // namespace

absl::StatusOr<tensor::named_tensors> read_hf_weights(const std::string& model_dir,
                                                      const hf_model_config& hf) {
  TROUPE_RETURN_IF_ERROR(refuse_quantized(model_dir, hf));
  const std::vector<hf_tensor_spec> specs = hf_tensor_specs(hf.model);
  std::vector<tensor::tensor> found(specs.size());
  TROUPE_RETURN_IF_ERROR(walk_hf_tensors(model_dir, hf, specs,
                                         [&](size_t i, const tensor::mapped_safetensors::entry& e) {
                                           found[i] = tensor::tensor::host(specs[i].shape);
                                           return tensor::copy_as_f32(e, found[i].data<float>());
                                         }));
  tensor::named_tensors out;
  for (size_t i = 0; i < specs.size(); ++i)
    out.tensors.emplace_back(specs[i].name, std::move(found[i]));
  return out;
}

absl::Status check_hf_weights(const std::string& model_dir, const hf_model_config& hf) {
  if (hf.quantization) return check_gptq_weights(model_dir, hf);
  return walk_hf_tensors(model_dir, hf, hf_tensor_specs(hf.model),
                         [](size_t, const tensor::mapped_safetensors::entry& e) {
                           if (e.dtype == "F32" || e.dtype == "BF16" || e.dtype == "F16")
                             return absl::OkStatus();
                           return absl::InvalidArgumentError(absl::StrCat(
                               "tensor '", e.name, "' is ", e.dtype, ", not a float type"));
                         });
}

absl::Status write_hf_model(const std::string& out_dir, const hf_model_config& config,
                            const tensor::named_tensors& weights, tensor::dtype dtype) {
  if (dtype != tensor::dtype::f32 && dtype != tensor::dtype::bf16) {
    return absl::InvalidArgumentError("Hugging Face weights are written in f32 or bf16");
  }
  const std::vector<hf_tensor_spec> specs = hf_tensor_specs(config.model);
  if (weights.tensors.size() != specs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a ", config.architecture,
                                                   " of this config has ", specs.size(),
                                                   " tensors, not ", weights.tensors.size()));
  }
  tensor::named_tensors out;
  out.metadata = {{"format", "pt"}};
  for (const hf_tensor_spec& spec : specs) {
    TROUPE_ASSIGN_OR_RETURN(const tensor::tensor t, weights.get(spec.name));
    if (t.shape() != spec.shape || t.type() != tensor::dtype::f32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name, "' is ",
                                                     t.description(), "; the model needs f32",
                                                     tensor::shape_string(spec.shape)));
    }
    TROUPE_ASSIGN_OR_RETURN(const tensor::tensor host, t.to(tensor::device::cpu()));
    if (dtype == tensor::dtype::f32) {
      out.tensors.emplace_back(spec.name, host);
      continue;
    }
    tensor::tensor b = tensor::tensor::host(spec.shape, tensor::dtype::bf16);
    for (int64_t i = 0; i < host.numel(); ++i)
      b.data<tensor::bf16>()[i] = tensor::bf16(host.data<float>()[i]);
    out.tensors.emplace_back(spec.name, std::move(b));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(out_dir, ": cannot create: ", ec.message()));
  TROUPE_RETURN_IF_ERROR(tensor::write_safetensors(out_dir + "/model.safetensors", out));
  hf_model_config written = config;
  written.torch_dtype = dtype == tensor::dtype::bf16 ? "bfloat16" : "float32";
  return write_hf_configs(out_dir, written);
}

absl::Status write_hf_configs(const std::string& out_dir, const hf_model_config& config) {
  nlohmann::json generation = nlohmann::json::object();
  if (config.bos_token_id >= 0) generation["bos_token_id"] = config.bos_token_id;
  if (!config.eos_token_ids.empty()) generation["eos_token_id"] = config.eos_token_ids;
  for (const auto& [file, j] : {std::pair{std::string("config.json"), to_hf_config_json(config)},
                                {std::string("generation_config.json"), generation}}) {
    std::ofstream f(out_dir + "/" + file, std::ios::trunc);
    f << j.dump(2) << "\n";
    if (!f) return absl::DataLossError(absl::StrCat(out_dir, "/", file, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
