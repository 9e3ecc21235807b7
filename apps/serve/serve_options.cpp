#include "apps/serve/serve_options.hpp"

#include <thread>

#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_source.hpp"
#include "models/decoder/paged_decoder.hpp"
#include "models/hf/gptq_weights.hpp"
#include "models/hf/hf_config.hpp"
#include "models/hf/hf_weights.hpp"
#include "models/vocab/hf_vocabulary.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/cuda_device.hpp"

namespace troupe::apps {
namespace {

config::object_schema<speculative_spec> speculative_schema() {
  config::object_schema<speculative_spec> s;
  s.add("method", &speculative_spec::method)
      .one_of({"ngram", "draft_model"})
      .help(
          "ngram: prompt lookup, draft tokens copied from where the sequence's end occurred "
          "before in it; draft_model: guessed by the small model at `model`");
  s.add("model", &speculative_spec::model)
      .help("draft_model: a Hugging Face model directory with the served model's tokenizer");
  s.add("num_speculative_tokens", &speculative_spec::num_speculative_tokens)
      .range(0, 64)
      .help("draft tokens a sequence's decode step checks at most; 0: no speculation");
  s.add("prompt_lookup_min", &speculative_spec::prompt_lookup_min)
      .range(0, 1024)
      .help("the shortest n-gram looked up; 0: prompt_lookup_max, or 5 when both are 0");
  s.add("prompt_lookup_max", &speculative_spec::prompt_lookup_max)
      .range(0, 1024)
      .help("the longest n-gram looked up; 0: prompt_lookup_min, or 5 when both are 0");
  s.add("disable_by_batch_size", &speculative_spec::disable_by_batch_size)
      .range(0, 1 << 16)
      .help("no drafts while more sequences than this run in a worker's batch; 0: always");
  s.check([](const speculative_spec& x) -> std::optional<std::string> {
    if (x.method == "draft_model" && x.model.empty()) {
      return "method draft_model needs model: the draft model's Hugging Face directory";
    }
    if (x.method == "draft_model" && x.num_speculative_tokens == 0) {
      return "method draft_model needs num_speculative_tokens: how many tokens it guesses";
    }
    if (x.method == "ngram" && !x.model.empty()) {
      return absl::StrCat("model is ", x.model,
                          " but method is ngram, which needs none; set method: draft_model to "
                          "guess with it");
    }
    if (x.prompt_lookup_min > 0 && x.prompt_lookup_max > 0 &&
        x.prompt_lookup_min > x.prompt_lookup_max) {
      return absl::StrCat("prompt_lookup_min (", x.prompt_lookup_min,
                          ") is over prompt_lookup_max (", x.prompt_lookup_max,
                          "); lower it or raise prompt_lookup_max");
    }
    return std::nullopt;
  });
  return s;
}

config::object_schema<engine_spec> engine_schema() {
  config::object_schema<engine_spec> s;
  s.add("batching", &engine_spec::batching)
      .one_of({"continuous", "static"})
      .help("continuous: requests join at the next iteration; static: the baseline");
  s.add("device", &engine_spec::device)
      .one_of({"auto", "cpu", "cuda"})
      .help(
          "where the model runs: cpu, cuda (device 0), or auto (cuda when a GPU is visible and "
          "the CUDA decoder takes the model's heads: a multiple of 32 values, at most 256)");
  s.add("max_batch_tokens", &engine_spec::max_batch_tokens)
      .range(1, 1 << 20)
      .help("tokens per iteration, prefill chunks and decode steps together");
  s.add("max_sequences", &engine_spec::max_sequences)
      .range(1, 1 << 16)
      .help("sequences a worker runs at once");
  s.add("kv_blocks", &engine_spec::kv_blocks).range(1, 1 << 24).help("KV cache blocks per worker");
  s.add("block_size", &engine_spec::block_size).range(1, 1024).help("positions per KV block");
  s.add("threads", &engine_spec::threads)
      .range(0, 1024)
      .help(
          "CPU threads each iteration's batch is split over; 0: the cores the worker offers "
          "(troupe worker --resources cores=N; a launch's local workers share the machine)");
  s.add("prefix_caching", &engine_spec::prefix_caching)
      .help(
          "keep full KV blocks after their requests end and share them with later requests "
          "that start with the same tokens (vLLM's automatic prefix caching)");
  s.add("quantization", &engine_spec::quantization)
      .one_of({"none", "int8", "int4"})
      .help(
          "weight-only quantization of every block's linear layers, done when a worker loads the "
          "model (the CPU decoder): int8 per output channel (the output head too), int4 in "
          "groups (the output head f32); norms stay f32");
  s.add("quantization_group_size", &engine_spec::quantization_group_size)
      .range(0, 1 << 20)
      .help(
          "inputs that share a scale: a multiple of 16 dividing each layer's inputs; 0: int8 one "
          "per output channel, int4 128 (or gcd(128, inputs))");
  s.add("kv_cache_dtype", &engine_spec::kv_cache_dtype)
      .one_of({"auto", "int8"})
      .help(
          "the KV cache's values: auto (f32 on the CPU, bf16 on CUDA) or int8 with a scale per "
          "position and key/value head (the CPU decoder; a quarter of the memory)");
  s.add("speculative_config", &engine_spec::speculative_config, speculative_schema())
      .help(
          "speculative decoding (vLLM's speculative_config): draft tokens checked in one "
          "forward pass; greedy output unchanged, sampled output distributed as without");
  s.check([](const engine_spec& e) -> std::optional<std::string> {
    if (e.speculative_config.num_speculative_tokens > 0 && e.batching != "continuous") {
      return "speculative_config.num_speculative_tokens needs batching: continuous (a static "
             "batch decodes one token per sequence a step); set it to 0 or batching to "
             "continuous";
    }
    return std::nullopt;
  });
  return s;
}

config::object_schema<pooler_spec> pooler_schema() {
  config::object_schema<pooler_spec> s;
  s.add("pooling_type", &pooler_spec::pooling_type)
      .one_of({"LAST", "MEAN"})
      .help(
          "an embedding is the final norm's hidden state at the input's last token (LAST) or "
          "its mean over the input's tokens (MEAN)");
  s.add("normalize", &pooler_spec::normalize).help("embeddings scaled to unit length");
  return s;
}

config::object_schema<tls_files> tls_schema() {
  config::object_schema<tls_files> s;
  s.add("cert", &tls_files::cert).help("the server's PEM certificate chain");
  s.add("key", &tls_files::key).help("its PEM private key (mode 0600)");
  s.check([](const tls_files& t) -> std::optional<std::string> {
    if (t.cert.empty() != t.key.empty()) return "give both cert and key, or neither";
    return std::nullopt;
  });
  return s;
}

config::object_schema<http::http_limits> http_schema() {
  config::object_schema<http::http_limits> s;
  s.add("max_body_bytes", &http::http_limits::max_body_bytes)
      .range(size_t{1}, size_t{1} << 34)
      .help("largest request body; a larger one is answered 413");
  s.add("max_url_bytes", &http::http_limits::max_url_bytes)
      .range(size_t{64}, size_t{1} << 20)
      .help("longest request line (method, URL, version); a longer one is answered 414");
  s.add("max_header_bytes", &http::http_limits::max_header_bytes)
      .range(size_t{256}, size_t{1} << 20)
      .help("the request line and headers together; more is answered 431");
  s.add("read_timeout_s", &http::http_limits::read_timeout_s)
      .range(0.01, 3600.0)
      .help("a request must arrive whole within this, from its first byte; else 408");
  s.add("write_timeout_s", &http::http_limits::write_timeout_s)
      .range(0.01, 3600.0)
      .help("a client that takes no bytes of its answer this long is cut off");
  s.add("keep_alive_timeout_s", &http::http_limits::keep_alive_timeout_s)
      .range(0.01, 3600.0)
      .help("an idle kept-alive connection is closed after this");
  s.add("max_connections", &http::http_limits::max_connections)
      .range(1, 1 << 20)
      .help("connections served at once (on one event loop); more are answered 503");
  s.add("reply_buffer_bytes", &http::http_limits::reply_buffer_bytes)
      .range(size_t{1024}, size_t{1} << 30)
      .help(
          "reply bytes held for a client that has not read them; past this a stream waits "
          "for the client (back-pressure)");
  s.check([](const http::http_limits& l) -> std::optional<std::string> {
    if (l.max_url_bytes > l.max_header_bytes) {
      return absl::StrCat("max_url_bytes (", l.max_url_bytes, ") is over max_header_bytes (",
                          l.max_header_bytes, "), which counts the request line too; raise ",
                          "max_header_bytes or lower max_url_bytes");
    }
    return std::nullopt;
  });
  return s;
}

}  // namespace

config::object_schema<serve_options> serve_schema() {
  config::object_schema<serve_options> s;
  s.add("host", &serve_options::host).non_empty().help("the HTTP API's address");
  s.add("port", &serve_options::port).range(0, 65535).help("0 picks a free port (printed)");
  s.add("model_name", &serve_options::model_name)
      .non_empty()
      .help("the name clients ask for in 'model'");
  s.add("checkpoint", &serve_options::checkpoint)
      .help("a pretrain run directory or checkpoint directory; empty: fresh weights");
  s.add("init_seed", &serve_options::init_seed)
      .range(0, 1 << 30)
      .help("the seed of fresh weights (no checkpoint)");
  s.add("token", &serve_options::token).help("bearer token clients must send; empty: none");
  s.add("max_queue", &serve_options::max_queue)
      .range(0, 1 << 20)
      .help("requests waiting for a worker before 429");
  s.add("max_per_worker", &serve_options::max_per_worker)
      .range(1, 1 << 16)
      .help("requests one worker runs at once");
  s.add("default_max_tokens", &serve_options::default_max_tokens)
      .range(1, 1 << 20)
      .help("max_tokens when a request gives none");
  s.add("http", &serve_options::http, http_schema())
      .help("what one HTTP client may send, how slowly, and how many may connect");
  s.add("tls", &serve_options::tls, tls_schema())
      .help("HTTPS: the certificate and key files; empty: plain HTTP");
  s.add("engine", &serve_options::engine, engine_schema()).help("each worker's engine");
  s.add("pooler_config", &serve_options::pooler_config, pooler_schema())
      .help("/v1/embeddings: how hidden states are pooled (vLLM's pooler_config)");
  return s;
}

absl::Status check_served_model(const std::optional<config::model_spec>& model) {
  TROUPE_RETURN_IF_ERROR(models::decoder_config_of(model).status());
  return models::check_model_dir(model);
}

namespace {

// The draft model's description, its context made the served model's.
absl::StatusOr<models::hf_model_config> draft_config(const serve_options& options,
                                                     const models::decoder_config& served) {
  const std::string& dir = options.engine.speculative_config.model;
  const std::string where = "serve.engine.speculative_config.model";
  auto hf = models::load_hf_config(dir);
  if (!hf.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", hf.status().message()));
  if (hf->quantization) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", dir, " is a GPTQ checkpoint; a draft model runs in f32"));
  }
  if (hf->model.vocab != served.vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", dir, " has a vocabulary of ", hf->model.vocab, " tokens and the served model ",
        served.vocab, "; a draft model must share the served model's tokenizer"));
  }
  if (hf->model.ctx < served.ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", dir, " holds ", hf->model.ctx, " positions, fewer than the ",
                     served.ctx, " served; lower model.ctx (--max-model-len) or pick another"));
  }
  hf->model.ctx = served.ctx;
  return hf;
}

}  // namespace

absl::Status check_draft_model(const serve_options& options, const models::decoder_config& served) {
  if (options.engine.speculative_config.method != "draft_model") return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(const models::hf_model_config hf, draft_config(options, served));
  return models::check_hf_weights(options.engine.speculative_config.model, hf);
}

absl::StatusOr<std::shared_ptr<const actors::served_model>> load_served_model(
    const app::app_plan& plan, const serve_options& options) {
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config config,
                          models::decoder_config_of(plan.spec.model));
  auto m = std::make_shared<actors::served_model>();
  m->layout = std::make_unique<models::decoder_layout>(config, models::layer_range::all(config));
  if (const std::string dir = models::hf_model_dir(plan.spec.model); !dir.empty()) {
    TROUPE_ASSIGN_OR_RETURN(models::hf_model_config hf, models::load_hf_config(dir));
    if (hf.quantization) {  // a GPTQ checkpoint: its integers, and the rest in f32
      hf.model = config;    // with model.ctx's context
      TROUPE_ASSIGN_OR_RETURN(models::quantized_hf_model q,
                              models::read_gptq_model(*m->layout, dir, hf));
      q.quantized->release_f32(q.params.data());  // the quantized matrices' zeros
      m->params = std::move(q.params);
      m->prequantized = std::move(q.quantized);
    } else {
      TROUPE_ASSIGN_OR_RETURN(m->params, models::read_hf_params(*m->layout, dir));
    }
    TROUPE_ASSIGN_OR_RETURN(auto vocabulary, models::hf_vocabulary::load(dir, config.vocab));
    m->token_text = std::make_shared<const std::vector<std::string>>(vocabulary->token_texts());
  } else if (options.checkpoint.empty()) {
    m->params.assign(m->layout->total(), 0.0f);
    m->layout->initialize(m->params.data(), static_cast<uint64_t>(options.init_seed));
  } else {
    TROUPE_ASSIGN_OR_RETURN(m->params, models::read_decoder_weights(*m->layout, options.checkpoint,
                                                                    "serve.checkpoint"));
  }
  if (options.engine.quantization != "none") {
    if (m->prequantized != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("serve.engine.quantization is ", options.engine.quantization,
                       " but model.path is a GPTQ checkpoint, already quantized: set it to none"));
    }
    // Quantized once for the worker, and the f32 block weights given back: the worker keeps the
    // integers, the embeddings, norms and head.
    const auto q = models::weight_quantization::serving(
        options.engine.quantization == "int8" ? 8 : 4, options.engine.quantization_group_size);
    auto quantized = models::quantized_weights::quantize(*m->layout, m->params.data(), q);
    if (!quantized.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(quantized.status().message(),
                       " (serve.engine.quantization and quantization_group_size)"));
    }
    (*quantized)->release_f32(m->params.data());
    m->prequantized = std::move(*quantized);
  }
  if (options.engine.speculative_config.method == "draft_model") {
    TROUPE_ASSIGN_OR_RETURN(const models::hf_model_config hf, draft_config(options, config));
    m->draft_layout =
        std::make_unique<models::decoder_layout>(hf.model, models::layer_range::all(hf.model));
    TROUPE_ASSIGN_OR_RETURN(
        m->draft_params,
        models::read_hf_params(*m->draft_layout, options.engine.speculative_config.model));
  }
  return m;
}

actors::inference_engine::options engine_options(const actors::served_model& model,
                                                 const serve_options& options, int offered_cores) {
  actors::inference_engine::options o;
  o.scheduler.ctx = model.layout->config().ctx;
  o.scheduler.token_text = model.token_text;
  o.scheduler.max_batch_tokens = options.engine.max_batch_tokens;
  o.scheduler.max_sequences = options.engine.max_sequences;
  o.scheduler.continuous = options.engine.batching == "continuous";
  o.scheduler.prefix_caching = options.engine.prefix_caching;
  o.kv_blocks = options.engine.kv_blocks;
  o.block_size = options.engine.block_size;
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.threads = options.engine.threads > 0 ? options.engine.threads
                                         : (offered_cores > 0 ? offered_cores : machine);
  o.prequantized = model.prequantized;
  if (options.engine.kv_cache_dtype == "int8") o.kv_cache_dtype = models::kv_cache_dtype::int8;
  const speculative_spec& spec = options.engine.speculative_config;
  o.speculative.num_speculative_tokens = spec.num_speculative_tokens;
  o.speculative.disable_by_batch_size = spec.disable_by_batch_size;
  o.draft_layout = model.draft_layout.get();
  o.draft_params = model.draft_params.data();
  // vLLM's defaults: one bound given stands for both; neither, 5.
  const int either = spec.prompt_lookup_min > 0 ? spec.prompt_lookup_min : spec.prompt_lookup_max;
  o.speculative.prompt_lookup_min = spec.prompt_lookup_min > 0 ? spec.prompt_lookup_min
                                    : either > 0               ? either
                                                               : 5;
  o.speculative.prompt_lookup_max = spec.prompt_lookup_max > 0 ? spec.prompt_lookup_max
                                    : either > 0               ? either
                                                               : 5;
  if (options.engine.device == "cuda") {
    o.device = 0;
  } else if (options.engine.device == "auto") {
    // A model whose heads the CUDA attention does not take is served on the CPU.
    const auto gpus = tensor::cuda_devices();
    const bool cuda_runs_it = models::cuda_decoder_runs(model.layout->config()).ok() &&
                              o.prequantized == nullptr &&
                              o.kv_cache_dtype == models::kv_cache_dtype::f32;
    o.device = cuda_runs_it && gpus.ok() && !gpus->empty() ? 0 : -1;
  }
  return o;
}

}  // namespace troupe::apps
