#pragma once

#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// The factory of `app: serve`: an OpenAI-compatible HTTP API in front of the `worker` role's
/// inference workers (docs/serve.md).
[[nodiscard]] actor::role_factory serve_app_factory();

/// The factory of role kind `inference_worker`, impl `gpt`: one engine of `app: serve`,
/// configured by the app's `serve:` section (no options of its own).
[[nodiscard]] actor::role_factory gpt_inference_worker_factory();

}  // namespace troupe::apps
