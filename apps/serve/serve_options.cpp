#include "apps/serve/serve_options.hpp"

#include "absl/strings/str_cat.h"
#include "models/gpt/gpt_source.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/cuda_device.hpp"

namespace troupe::apps {
namespace {

config::object_schema<engine_spec> engine_schema() {
  config::object_schema<engine_spec> s;
  s.add("batching", &engine_spec::batching)
      .one_of({"continuous", "static"})
      .help("continuous: requests join at the next iteration; static: the baseline");
  s.add("device", &engine_spec::device)
      .one_of({"auto", "cpu", "cuda"})
      .help("where the model runs: cpu, cuda (device 0), or auto (cuda when a GPU is visible)");
  s.add("max_batch_tokens", &engine_spec::max_batch_tokens)
      .range(1, 1 << 20)
      .help("tokens per iteration, prefill chunks and decode steps together");
  s.add("max_sequences", &engine_spec::max_sequences)
      .range(1, 1 << 16)
      .help("sequences a worker runs at once");
  s.add("kv_blocks", &engine_spec::kv_blocks).range(1, 1 << 24).help("KV cache blocks per worker");
  s.add("block_size", &engine_spec::block_size).range(1, 1024).help("positions per KV block");
  s.add("threads", &engine_spec::threads)
      .range(1, 1024)
      .help("CPU threads each iteration's batch is split over");
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
  s.add("engine", &serve_options::engine, engine_schema()).help("each worker's engine");
  return s;
}

absl::StatusOr<std::shared_ptr<const actors::served_model>> load_served_model(
    const app::app_plan& plan, const serve_options& options) {
  const models::gpt_config config = models::gpt_config_of(plan.spec.model);
  TROUPE_RETURN_IF_ERROR(config.validate());
  auto m = std::make_shared<actors::served_model>();
  m->layout = std::make_unique<models::gpt_layout>(config, models::layer_range::all(config));
  if (options.checkpoint.empty()) {
    m->params.assign(m->layout->total(), 0.0f);
    m->layout->initialize(m->params.data(), static_cast<uint64_t>(options.init_seed));
    return m;
  }
  TROUPE_ASSIGN_OR_RETURN(
      m->params, models::read_gpt_weights(*m->layout, options.checkpoint, "serve.checkpoint"));
  return m;
}

actors::inference_engine::options engine_options(const app::app_plan& plan,
                                                 const serve_options& options) {
  actors::inference_engine::options o;
  o.scheduler.ctx = models::gpt_config_of(plan.spec.model).ctx;
  o.scheduler.max_batch_tokens = options.engine.max_batch_tokens;
  o.scheduler.max_sequences = options.engine.max_sequences;
  o.scheduler.continuous = options.engine.batching == "continuous";
  o.kv_blocks = options.engine.kv_blocks;
  o.block_size = options.engine.block_size;
  o.threads = options.engine.threads;
  if (options.engine.device == "cuda") {
    o.device = 0;
  } else if (options.engine.device == "auto") {
    const auto gpus = tensor::cuda_devices();
    o.device = gpus.ok() && !gpus->empty() ? 0 : -1;
  }
  return o;
}

}  // namespace troupe::apps
