#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "actors/inference_worker_actor.hpp"
#include "runtime/config/app_spec.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/http/http_limits.hpp"

namespace troupe::app {
struct app_plan;
}

namespace troupe::apps {

/// `serve.engine.speculative_config` (vLLM's keys): speculative decoding by prompt lookup or by
/// a draft model.
struct speculative_spec {
  std::string method = "ngram";    ///< or "draft_model"
  std::string model;               ///< draft_model: a Hugging Face directory of the same tokenizer
  int num_speculative_tokens = 0;  ///< 0: off
  int prompt_lookup_min = 0;       ///< 0: prompt_lookup_max's, or 5 (vLLM's defaults)
  int prompt_lookup_max = 0;       ///< 0: prompt_lookup_min's, or 5
  int disable_by_batch_size = 0;   ///< no drafts while more sequences run; 0: always
};

/// `serve.engine`: each inference worker's batching, KV cache and device.
struct engine_spec {
  std::string batching = "continuous";  ///< or "static" (the baseline)
  int max_batch_tokens = 256;
  int max_sequences = 32;
  int kv_blocks = 512;
  int block_size = 16;
  std::string device = "auto";  ///< "cpu", "cuda" (device 0), or "auto": CUDA when a GPU is seen
  int threads = 0;              ///< CPU threads per worker's engine; 0: the worker's cores
  bool prefix_caching = true;   ///< vLLM's automatic prefix caching
  std::string quantization = "none";    ///< weight-only: "none", "int8" or "int4"
  int quantization_group_size = 0;      ///< inputs per scale; 0: int8 per channel, int4 128
  std::string kv_cache_dtype = "auto";  ///< "auto" (f32 on the CPU, bf16 on CUDA) or "int8"
  speculative_spec speculative_config;
};

/// `serve.pooler_config` (vLLM's): how /v1/embeddings pools the final norm's hidden states.
struct pooler_spec {
  std::string pooling_type = "LAST";  ///< or "MEAN"
  bool normalize = true;              ///< scaled to unit length
};

/// `serve.tls`: HTTPS with this PEM certificate chain and private key (both, or neither).
struct tls_files {
  std::string cert;
  std::string key;
};

/// The `serve:` section.
struct serve_options {
  std::string host = "127.0.0.1";
  int port = 0;  ///< 0 picks a free port (printed)
  std::string model_name = "troupe-tiny";
  std::string checkpoint;  ///< a pretrain run directory or checkpoint; empty: fresh weights
  int init_seed = 1;
  std::string token;  ///< bearer token; empty: none
  int max_queue = 256;
  int max_per_worker = 64;
  int default_max_tokens = 16;
  http::http_limits http;
  tls_files tls;
  engine_spec engine;
  pooler_spec pooler_config;
};

[[nodiscard]] config::object_schema<serve_options> serve_schema();

/// The served model as the router and the workers will read it: the `model:` section's shape,
/// or the Hugging Face directory at `model.path` (config.json and model.ctx, every safetensors
/// header, tokenizer.json and the chat template). An error says what is wrong and where.
[[nodiscard]] absl::Status check_served_model(const std::optional<config::model_spec>& model);

/// The draft model of `options` (speculative_config.method draft_model) for a served model of
/// `served`'s shape, without its weights: its config.json and every tensor's header, its
/// vocabulary the served one's and its context at least `served.ctx`. OK when there is none.
[[nodiscard]] absl::Status check_draft_model(const serve_options& options,
                                             const models::decoder_config& served);

/// The model to serve: the Hugging Face model at `model.path` (its weights and its tokenizer's
/// token bytes), or the `model:` GPT with the newest good checkpoint's weights (a run
/// directory's checkpoints/ or a checkpoint directory), or fresh ones from `init_seed`.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const actors::served_model>> load_served_model(
    const app::app_plan& plan, const serve_options& options);

/// The engine options of an inference worker of `model` on this machine (`device: auto` looks
/// for a GPU, and takes it for a model the CUDA decoder runs). `offered_cores`: the cores its
/// worker offers, which `threads: 0` takes (0: not said, the machine's).
[[nodiscard]] actors::inference_engine::options engine_options(const actors::served_model& model,
                                                               const serve_options& options,
                                                               int offered_cores);

}  // namespace troupe::apps
