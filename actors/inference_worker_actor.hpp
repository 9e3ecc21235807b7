#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/inference_engine.hpp"
#include "actors/weight_sync.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/comm/rendezvous_store.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/work_pacer.hpp"

namespace troupe::actors {

/// A model for serving: its layout and weights (shared by the workers of a process).
struct served_model {
  std::unique_ptr<models::decoder_layout> layout;
  std::vector<float> params;
  /// The bytes of each token, to match stop strings on (scheduler_options::token_text); null:
  /// troupe's byte vocabulary.
  std::shared_ptr<const std::vector<std::string>> token_text;
  /// The block weights quantized: a GPTQ checkpoint's, or serve.engine.quantization's made at
  /// load (`params` then holds the rest, and zeros where these are); null: f32 in `params`.
  std::shared_ptr<const models::quantized_weights> prequantized;
  /// Speculative decoding's draft model (serve.engine.speculative_config.model), in f32; null:
  /// none.
  std::unique_ptr<models::decoder_layout> draft_layout;
  std::vector<float> draft_params;
};

/// How a rollout worker receives the RL policy's weights: the weight-sync group, formed through
/// `store` at the first `(sync)`.
struct rollout_sync {
  std::shared_ptr<comm::rendezvous_store> store;
  weight_sync_spec spec;
};

/// Spawns an inference worker on its own thread (each iteration is a model forward pass): it
/// runs `model` through an inference_engine with `options`, iterating while it has work, and
/// answers polls with the events produced (a request with stream false: its events merged into
/// one, a poll answered for it once it ends). `pacer` paces the iterations for tests (a held
/// iteration is asked again later; a slowdown keeps the worker's thread busy for longer; a
/// weight transfer is a unit too, held after its group is formed). A
/// poll waits at most `poll_wait` for an event. With `sync` it is an RL rollout worker, whose
/// `(sync)` receives weights from the policy into a second buffer (the worker's thread is busy
/// with the transfer meanwhile) and swaps them in once the requests running on the old ones
/// have ended. Fails when the engine cannot be made (a CUDA device that cannot be
/// used).
[[nodiscard]] absl::StatusOr<actor::inference_worker_actor> spawn_inference_worker(
    caf::actor_system& system, metrics::registry& metrics, const std::string& name,
    std::shared_ptr<const served_model> model, inference_engine::options options,
    run::work_pacer pacer = {},
    std::chrono::milliseconds poll_wait = std::chrono::milliseconds(500),
    std::optional<rollout_sync> sync = std::nullopt);

}  // namespace troupe::actors
