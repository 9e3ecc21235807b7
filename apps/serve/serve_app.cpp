#include "apps/serve/serve_app.hpp"

#include "absl/strings/str_cat.h"
#include "actors/inference_worker_actor.hpp"
#include "apps/serve/router_actor.hpp"
#include "apps/serve/serve_options.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/hf/hf_config.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"

namespace troupe::apps {
namespace {

struct gpt_worker_options {};

absl::StatusOr<caf::actor> spawn_gpt_worker(actor::role_context& ctx, const gpt_worker_options&) {
  if (ctx.plan.spec.app != "serve" || ctx.plan.app_options == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the inference_worker role belongs to app: serve, not app: ", ctx.plan.spec.app));
  }
  const auto& options = *static_cast<const serve_options*>(ctx.plan.app_options.get());
  TROUPE_ASSIGN_OR_RETURN(auto model, load_served_model(ctx.plan, options));
  TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
  auto engine = engine_options(*model, options, ctx.cores);
  auto worker =
      actors::spawn_inference_worker(ctx.system, ctx.metrics, ctx.actor_name(), std::move(model),
                                     std::move(engine), run::work_pacer(std::move(hooks)));
  if (!worker.ok()) {
    return absl::Status(
        worker.status().code(),
        absl::StrCat(worker.status().message(), " (serve.engine.device: cpu serves on the CPU)"));
  }
  return caf::actor_cast<caf::actor>(*worker);
}

void check_serve_plan(const app::app_plan& plan, const void* opaque,
                      const config::parse_context& ctx, const YAML::Node& section) {
  const auto& options = *static_cast<const serve_options*>(opaque);
  // The model, its directory's files included, before any process starts.
  if (absl::Status s = check_served_model(plan.spec.model); !s.ok()) {
    ctx.error(section, std::string(s.message()));
  }
  if (const std::string dir = models::hf_model_dir(plan.spec.model);
      !dir.empty() && options.engine.quantization != "none") {
    if (auto hf = models::load_hf_config(dir); hf.ok() && hf->quantization) {
      ctx.error(section, absl::StrCat("serve.engine.quantization is ", options.engine.quantization,
                                      " but model.path is a GPTQ checkpoint, already quantized: "
                                      "set it to none"));
    }
  }
  if (const auto served = models::decoder_config_of(plan.spec.model); served.ok()) {
    if (absl::Status s = check_draft_model(options, *served); !s.ok()) {
      ctx.error(section, std::string(s.message()));
    }
  }
  if (!models::hf_model_dir(plan.spec.model).empty() && !options.checkpoint.empty()) {
    ctx.error(section, "serve.checkpoint and model.path both name the weights; give one");
  }
  const auto* worker = plan.find_role("worker");
  if (worker == nullptr || worker->spec.kind != "inference_worker") {
    ctx.error(section,
              "app: serve needs a role 'worker' of kind inference_worker, e.g. "
              "roles: {worker: {kind: inference_worker, impl: gpt, elastic: {min: 1, max: 8}}}");
  }
  for (const auto& role : plan.roles) {
    if (role.spec.name != "worker") {
      ctx.error(section, absl::StrCat("app: serve runs only the 'worker' role; remove role '",
                                      role.spec.name, "'"));
    }
  }
}

}  // namespace

actor::role_factory serve_app_factory() {
  auto factory = actor::make_role_factory<serve_options>(
      "serves the model over an OpenAI-compatible HTTP API from inference workers", serve_schema(),
      [](actor::role_context& ctx, const serve_options& options) {
        return spawn_serve_router(ctx, options);
      });
  factory.check_plan = check_serve_plan;
  factory.autoscales = true;
  return factory;
}

actor::role_factory gpt_inference_worker_factory() {
  return actor::make_role_factory<gpt_worker_options>(
      "one inference worker of app: serve (paged KV cache, continuous batching, GPT on the CPU or "
      "CUDA)",
      config::object_schema<gpt_worker_options>(), spawn_gpt_worker);
}

}  // namespace troupe::apps
