#include "apps/builtin_apps.hpp"

#include "actors/builtin_roles.hpp"
#include "apps/pipeline/pipeline_app.hpp"
#include "apps/pretrain/pretrain_app.hpp"
#include "apps/rlhf/rlhf_app.hpp"
#include "apps/serve/serve_app.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps {

absl::Status register_builtins(actor::role_registry& registry) {
  TROUPE_RETURN_IF_ERROR(actors::register_builtin_roles(registry));
  TROUPE_RETURN_IF_ERROR(registry.add("app", "pipeline", pipeline_app_factory()));
  TROUPE_RETURN_IF_ERROR(registry.add("app", "pretrain", pretrain_app_factory()));
  TROUPE_RETURN_IF_ERROR(registry.add("app", "reward_model", pretrain_app_factory("reward_model")));
  TROUPE_RETURN_IF_ERROR(registry.add("app", "dpo", pretrain_app_factory("dpo")));
  TROUPE_RETURN_IF_ERROR(registry.add("trainer", "gpt", gpt_trainer_factory()));
  TROUPE_RETURN_IF_ERROR(rlhf::register_rlhf(registry));
  TROUPE_RETURN_IF_ERROR(registry.add("app", "serve", serve_app_factory()));
  TROUPE_RETURN_IF_ERROR(registry.add("inference_worker", "gpt", gpt_inference_worker_factory()));
  return absl::OkStatus();
}

}  // namespace troupe::apps
